package adk

import (
	"iter"
	"maps"
	"slices"
	"sync"
	"time"

	"google.golang.org/adk/session"
)

// handle is the session.Session this package hands out: a view of one
// session as read (its state, its events) plus next, the session's next
// sequence as of that read. An append through the handle is conditional on
// next, so a handle that another writer has overtaken is refused (ADK's
// stale-session protection) instead of writing over state it never saw.
type handle struct {
	app, user, id string
	// sid is the agentstate session id (a ULID); ADK never sees it.
	sid string

	// appendMu serializes appends through one handle: each is
	// conditional on the next sequence the previous one left.
	appendMu sync.Mutex

	mu      sync.RWMutex
	state   map[string]any
	events  []*session.Event
	next    int64
	updated time.Time
}

var _ session.Session = (*handle)(nil)

func (h *handle) ID() string      { return h.id }
func (h *handle) AppName() string { return h.app }
func (h *handle) UserID() string  { return h.user }

func (h *handle) State() session.State { return stateView{h} }

func (h *handle) Events() session.Events {
	h.mu.RLock()
	defer h.mu.RUnlock()
	return events(slices.Clip(h.events))
}

func (h *handle) LastUpdateTime() time.Time {
	h.mu.RLock()
	defer h.mu.RUnlock()
	return h.updated
}

func (h *handle) nextSequence() int64 {
	h.mu.RLock()
	defer h.mu.RUnlock()
	return h.next
}

// appended records an event the store committed: the handle now stands at
// next, with the event's delta (temp: keys included) in its state.
func (h *handle) appended(full, stored *session.Event, next int64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	applyDelta(h.state, full.Actions.StateDelta)
	h.events = append(h.events, stored)
	h.next = next
	if !full.Timestamp.IsZero() {
		h.updated = full.Timestamp
	}
}

// stateView is a handle's state. Set changes the handle only, as in ADK's
// own services: the store's state changes through events' deltas.
type stateView struct{ h *handle }

func (s stateView) Get(key string) (any, error) {
	s.h.mu.RLock()
	defer s.h.mu.RUnlock()
	v, ok := s.h.state[key]
	if !ok {
		return nil, session.ErrStateKeyNotExist
	}
	return v, nil
}

func (s stateView) Set(key string, value any) error {
	s.h.mu.Lock()
	defer s.h.mu.Unlock()
	s.h.state[key] = value
	return nil
}

func (s stateView) All() iter.Seq2[string, any] {
	s.h.mu.RLock()
	c := maps.Clone(s.h.state)
	s.h.mu.RUnlock()
	return maps.All(c)
}

type events []*session.Event

func (e events) All() iter.Seq[*session.Event] { return slices.Values(e) }
func (e events) Len() int                      { return len(e) }

func (e events) At(i int) *session.Event {
	if i >= 0 && i < len(e) {
		return e[i]
	}
	return nil
}
