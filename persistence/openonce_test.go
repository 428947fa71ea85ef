package persistence_test

import (
	"errors"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/agentstate/agentstate/messages/errs"
	"github.com/agentstate/agentstate/persistence"
)

type fakeStore struct {
	persistence.Shared
	id       int64
	shutdown atomic.Int64
}

type fakes struct {
	reg  persistence.Registry[*fakeStore]
	made atomic.Int64
	fail atomic.Bool
}

func (f *fakes) open(key, spec string) (*fakeStore, error) {
	return f.reg.Open(key, spec, func() *fakeStore { return &fakeStore{id: f.made.Add(1)} }, func(*fakeStore) error {
		if f.fail.Load() {
			return errors.New("cannot open")
		}
		return nil
	})
}

func (f *fakes) close(s *fakeStore) error {
	return f.reg.Close(s, func() error { s.shutdown.Add(1); return nil })
}

func TestRegistryOpensEachKeyOnce(t *testing.T) {
	var f fakes
	var wg sync.WaitGroup
	got := make([]*fakeStore, 32)
	for i := range got {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s, err := f.open("db", "full")
			if err != nil {
				t.Error(err)
			}
			got[i] = s
		}()
	}
	wg.Wait()
	if f.reg.Opens() != 1 {
		t.Fatalf("%d opens for one key, want 1", f.reg.Opens())
	}
	for _, s := range got {
		if s != got[0] {
			t.Fatal("two Opens of one key got different stores")
		}
	}
	other, err := f.open("other", "full")
	if err != nil || other == got[0] {
		t.Fatalf("another key: %v, same store %v", err, other == got[0])
	}
	for i, s := range got {
		if err := f.close(s); err != nil {
			t.Fatal(err)
		}
		if want := int64(0); i < len(got)-1 && s.shutdown.Load() != want {
			t.Fatalf("shut down after %d of %d Closes", i+1, len(got))
		}
	}
	if got[0].shutdown.Load() != 1 || f.reg.Held("db") {
		t.Fatalf("after the last Close: %d shutdowns, held %v", got[0].shutdown.Load(), f.reg.Held("db"))
	}
	if err := f.close(got[0]); errs.CodeOf(err) != errs.FailedPreconditionCode {
		t.Fatalf("Close beyond the Opens: %v, want FAILED_PRECONDITION", err)
	}
}

func TestRegistrySpecMismatch(t *testing.T) {
	var f fakes
	s, err := f.open("db", "full")
	if err != nil {
		t.Fatal(err)
	}
	var mismatch *persistence.SpecMismatch
	if _, err := f.open("db", "normal"); !errors.As(err, &mismatch) || mismatch.Have != "full" || mismatch.Want != "normal" {
		t.Fatalf("open with another spec: %v", err)
	}
	if f.reg.Refs(s) != 1 {
		t.Fatalf("a refused Open took a reference: %d", f.reg.Refs(s))
	}
}

func TestRegistryForgetsAFailedOpen(t *testing.T) {
	var f fakes
	f.fail.Store(true)
	if _, err := f.open("db", ""); err == nil {
		t.Fatal("open did not fail")
	}
	if f.reg.Held("db") {
		t.Fatal("a failed open is still held")
	}
	f.fail.Store(false)
	s, err := f.open("db", "")
	if err != nil || f.reg.Opens() != 2 {
		t.Fatalf("retry after a failed open: %v, %d opens", err, f.reg.Opens())
	}
	_ = f.close(s)
}

// A handle closed for good must not touch the store opened afresh for its
// key: its Close is refused, the new store keeps its reference.
func TestRegistryStaleHandleAfterReopen(t *testing.T) {
	var f fakes
	old, _ := f.open("db", "")
	if err := f.close(old); err != nil {
		t.Fatal(err)
	}
	fresh, err := f.open("db", "")
	if err != nil || fresh == old {
		t.Fatalf("reopen: %v, same store %v", err, fresh == old)
	}
	if err := f.close(old); errs.CodeOf(err) != errs.FailedPreconditionCode {
		t.Fatalf("stale Close: %v", err)
	}
	if f.reg.Refs(fresh) != 1 || !f.reg.Held("db") {
		t.Fatalf("a stale Close changed the new store: refs %d", f.reg.Refs(fresh))
	}
}

func TestRegistryUnshared(t *testing.T) {
	var f fakes
	shared, _ := f.open("db", "")
	own, err := f.reg.OpenUnshared("db", func() *fakeStore { return &fakeStore{} }, func(*fakeStore) error { return nil })
	if err != nil || own == shared {
		t.Fatalf("unshared: %v, same %v", err, own == shared)
	}
	if err := f.reg.Close(own, func() error { return nil }); err != nil {
		t.Fatal(err)
	}
	if !f.reg.Held("db") || f.reg.Refs(shared) != 1 {
		t.Fatal("closing an unshared store touched the shared one")
	}
}
