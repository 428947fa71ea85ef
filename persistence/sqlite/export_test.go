package sqlite

// SettleEvery makes s settle its pending message rows once n are pending
// (schema migration 5), so that tests reach both kinds of rows.
func SettleEvery(s *Store, n int64) {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	s.settleAt = n
}
