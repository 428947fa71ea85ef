package sessionv1

// Operations is how many operations the batch asks of the node: one per
// append. The node's fair share charges a stream message by it (a batch of
// 64 appends costs what 64 unary appends do, less their framing).
func (b *AppendBatch) Operations() int { return len(b.GetAppends()) }
