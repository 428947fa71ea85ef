package sessionv1

// OwnerHeader is the response header (gRPC metadata) a cluster member sets
// on the answer to a request it forwarded to the member that owns the
// request's session or plan: the owner's gRPC address, host:port. A client
// that sends the next requests of that session (or plan) there saves the
// members a forwarding hop; a client that ignores it is served the same.
// It is a hint: membership may have changed since, and the member it names
// forwards in turn or answers UNAVAILABLE like any other.
const OwnerHeader = "agentstate-owner"
