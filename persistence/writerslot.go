package persistence

import (
	"sync"

	"github.com/agentstate/agentstate/messages/errs"
)

// WriterSlot is a store's one writer: the mutex that serializes
// everything using the writer connection, whether the Writer is handed
// out, and whether the store is closed. A store keeps one and guards its
// own writer state with the same mutex (Lock, Unlock).
//
// Invariant: at most one WriterLease is held at a time; once Close ran,
// neither Take nor an Apply (Enter) gets through.
type WriterSlot struct {
	mu     sync.Mutex
	closed bool
	held   bool
}

// Lock takes the writer's mutex.
func (w *WriterSlot) Lock() { w.mu.Lock() }

// Unlock releases the writer's mutex.
func (w *WriterSlot) Unlock() { w.mu.Unlock() }

// Close marks the store closed. Called with the mutex held.
func (w *WriterSlot) Close() { w.closed = true }

// Closed reports whether Close ran. Called with the mutex held.
func (w *WriterSlot) Closed() bool { return w.closed }

// LockOpen takes the mutex unless the store is closed (UNAVAILABLE,
// naming store, and the mutex is not held).
func (w *WriterSlot) LockOpen(store string) error {
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return errs.Unavailable("store %s is closed", store)
	}
	return nil
}

// Take hands out the writer: UNAVAILABLE once the store is closed,
// ErrWriterTaken while another lease is held.
func (w *WriterSlot) Take(store string) (*WriterLease, error) {
	if err := w.LockOpen(store); err != nil {
		return nil, err
	}
	defer w.mu.Unlock()
	if w.held {
		return nil, ErrWriterTaken
	}
	w.held = true
	return &WriterLease{slot: w}, nil
}

// WriterLease is the handed-out writer's hold on its slot; a store's
// Writer embeds it for Release.
type WriterLease struct {
	slot     *WriterSlot
	released bool // guarded by slot.mu
}

// Release gives the writer back; a second Release does nothing.
func (l *WriterLease) Release() {
	l.slot.mu.Lock()
	defer l.slot.mu.Unlock()
	if !l.released {
		l.released = true
		l.slot.held = false
	}
}

// Enter takes the slot's mutex for one Apply: FAILED_PRECONDITION once the
// lease was released, UNAVAILABLE once the store is closed (and then the
// mutex is not held). The caller unlocks the slot when done.
func (l *WriterLease) Enter(store string) error {
	l.slot.mu.Lock()
	switch {
	case l.released:
		l.slot.mu.Unlock()
		return errs.FailedPrecondition("writer was released")
	case l.slot.closed:
		l.slot.mu.Unlock()
		return errs.Unavailable("store %s is closed", store)
	}
	return nil
}
