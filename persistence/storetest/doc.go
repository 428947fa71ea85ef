// Package storetest is the conformance suite of persistence.Store: every
// implementation runs the very same tests, so a second backend is held to
// exactly what the first one promises.
//
// Use it from the implementation's tests:
//
//	func TestConformance(t *testing.T) {
//		storetest.Run(t, func(t *testing.T) persistence.Store {
//			s, err := mystore.Open(filepath.Join(t.TempDir(), "db"))
//			if err != nil {
//				t.Fatal(err)
//			}
//			return s
//		})
//	}
//
// open must return a new, empty store each time; Run closes it when the
// subtest ends. The suite covers every command and Reader method: result
// semantics (duplicates, conflicts, not found), the audit chain, filters,
// paging and limits, and batch atomicity. Transaction-failure tests need a
// way to make writes fail: a store that implements ReadOnlySwitch or
// PageLimiter gets them.
package storetest
