package adkstore

import (
	"iter"
	"maps"
	"slices"
	"sync"
	"time"
)

// Handle is one session as read (its state, its events) plus next, the
// session's next sequence as of that read. An append through the handle is
// conditional on next, so a handle that another writer has overtaken is
// refused (ADK's stale-session protection) instead of writing over state it
// never saw. Each version's package wraps it to return its own session
// package's State and Events types.
type Handle[E any] struct {
	app, user, id string
	// sid is the agentstate session id (a ULID); ADK never sees it.
	sid string
	// noKey is the version's session.ErrStateKeyNotExist.
	noKey error

	// appendMu serializes appends through one handle: each is
	// conditional on the next sequence the previous one left.
	appendMu sync.Mutex

	mu      sync.RWMutex
	state   map[string]any
	events  []*E
	next    int64
	updated time.Time
}

// handle is how AppendEvent finds the handle inside the session.Session a
// version's package wraps it in (the method is promoted to the wrapper).
func (h *Handle[E]) handle() *Handle[E] { return h }

func (h *Handle[E]) ID() string      { return h.id }
func (h *Handle[E]) AppName() string { return h.app }
func (h *Handle[E]) UserID() string  { return h.user }

func (h *Handle[E]) LastUpdateTime() time.Time {
	h.mu.RLock()
	defer h.mu.RUnlock()
	return h.updated
}

// StateView is the handle's state; it has the methods of every ADK
// version's session.State.
func (h *Handle[E]) StateView() StateView { return StateView{h.stateOf()} }

// EventList is the handle's events as read and appended since; it has the
// methods of the version's session.Events.
func (h *Handle[E]) EventList() Events[E] {
	h.mu.RLock()
	defer h.mu.RUnlock()
	return Events[E](slices.Clip(h.events))
}

func (h *Handle[E]) nextSequence() int64 {
	h.mu.RLock()
	defer h.mu.RUnlock()
	return h.next
}

// appended records an event the store committed: the handle now stands at
// next, with the event's full delta (temp: keys included) in its state.
func (h *Handle[E]) appended(a appendOf[E], next int64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	maps.Copy(h.state, a.FullDelta)
	h.events = append(h.events, a.Stored)
	h.next = next
	if !a.Time.IsZero() {
		h.updated = a.Time
	}
}

// handleState is the part of a handle a state view needs, whatever the
// event type.
type handleState struct {
	mu    *sync.RWMutex
	state map[string]any
	noKey error
}

func (h *Handle[E]) stateOf() handleState {
	return handleState{mu: &h.mu, state: h.state, noKey: h.noKey}
}

// StateView is a handle's state. Set changes the handle only, as in ADK's
// own services: the store's state changes through events' deltas.
type StateView struct{ h handleState }

func (s StateView) Get(key string) (any, error) {
	s.h.mu.RLock()
	defer s.h.mu.RUnlock()
	v, ok := s.h.state[key]
	if !ok {
		return nil, s.h.noKey
	}
	return v, nil
}

func (s StateView) Set(key string, value any) error {
	s.h.mu.Lock()
	defer s.h.mu.Unlock()
	s.h.state[key] = value
	return nil
}

func (s StateView) All() iter.Seq2[string, any] {
	s.h.mu.RLock()
	c := maps.Clone(s.h.state)
	s.h.mu.RUnlock()
	return maps.All(c)
}

// Events is a handle's events, oldest first.
type Events[E any] []*E

func (e Events[E]) All() iter.Seq[*E] { return slices.Values(e) }
func (e Events[E]) Len() int          { return len(e) }

func (e Events[E]) At(i int) *E {
	if i >= 0 && i < len(e) {
		return e[i]
	}
	return nil
}
