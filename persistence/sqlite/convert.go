package sqlite

// Times and limits are stored and clamped by the helpers every store shares
// (persistence.StoredNanos, BoundNanos, Stamp, ClampLimit); SQLite has no boolean type.

func boolInt(b bool) int64 {
	if b {
		return 1
	}
	return 0
}
