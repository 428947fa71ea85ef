package postgres

// Times and limits are stored and clamped by the helpers every store shares
// (persistence.StoredNanos, BoundNanos, Stamp, ClampLimit).
