package adkstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	sessionv1 "github.com/agentstate/agentstate/messages/agentstate/session/v1"
	"github.com/agentstate/agentstate/messages/errs"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// ErrStaleSession refuses an AppendEvent through a session handle that is
// older than the stored session: another writer appended since the handle
// was read. Nothing was stored; Get the session again and retry.
var ErrStaleSession = errors.New("stale session")

// Options configure a Service. The zero value is usable.
type Options struct {
	// NamespacePrefix is put before the app name to make the agentstate
	// namespace of the app's sessions (default "adk:").
	NamespacePrefix string
	// SessionTTL, when positive, gives every session created a time to
	// live: agentstate's expiry sweep deletes it that long after its
	// creation. Zero: sessions live until deleted.
	SessionTTL time.Duration
}

// Version is what differs between ADK versions that the shared service
// needs: their session package's sentinel errors, their id source, and
// how an event is read from its message.
type Version[E any] struct {
	// NotFound and NoStateKey are the version's session.ErrNotFound and
	// session.ErrStateKeyNotExist.
	NotFound, NoStateKey error
	// NewID is the version's platform.NewUUID: ids honour a provider
	// installed on the context.
	NewID func(context.Context) string
	// Decode reads an event from a message (IsEvent or not); Encode is
	// the message that stores an event (EventMessage).
	Decode func(*sessionv1.Message) (*E, error)
	Encode func(*E) (*sessionv1.NewMessage, error)
	// Fields are what AppendEvent reads of an event: its ID (set there
	// when empty), whether it is partial, its state delta and time.
	Fields func(*E) (id *string, partial bool, delta map[string]any, at time.Time)
	// WithDelta is a copy of an event with another state delta.
	WithDelta func(*E, map[string]any) *E
}

// Service is the ADK session service on agentstate, for the event type E
// of one ADK version. Each version's package gives it that version's
// request and response types.
type Service[E any] struct {
	store Store
	opts  Options
	v     Version[E]
}

// New returns the service over store (see Store for the two kinds).
func New[E any](store Store, opts Options, v Version[E]) *Service[E] {
	if opts.NamespacePrefix == "" {
		opts.NamespacePrefix = "adk:"
	}
	return &Service[E]{store: store, opts: opts, v: v}
}

// maxLast is the most messages the server returns for one "last N" read.
const maxLast = 1000

// Create stores a new session (id, or a new UUID when empty), with the app
// and user parts of state applied to their shared scopes in the same
// transaction. A session id already taken for this app and user is an
// error.
func (s *Service[E]) Create(ctx context.Context, app, user, id string, state map[string]any) (*Handle[E], error) {
	if app == "" || user == "" {
		return nil, fmt.Errorf("adk: app_name and user_id are required, got app_name: %q, user_id: %q", app, user)
	}
	if id == "" {
		id = s.v.NewID(ctx)
	}
	d, err := splitDelta(state)
	if err != nil {
		return nil, err
	}
	meta, err := encodeMeta(app, user, id)
	if err != nil {
		return nil, err
	}
	cr := &sessionv1.CreateSessionRequest{
		ActorName:    user,
		Namespace:    s.namespace(app),
		ClientKey:    clientKey(user, id),
		MetadataJson: meta,
		StateDelta:   d.session,
		ScopeDeltas:  d.scopes(app, user),
	}
	if s.opts.SessionTTL > 0 {
		cr.Ttl = durationpb.New(s.opts.SessionTTL)
	}
	created, err := s.store.Create(ctx, cr)
	if err != nil {
		if errs.CodeOf(err) == errs.AlreadyExistsCode {
			return nil, fmt.Errorf("adk: session %q of app %q, user %q already exists: %w", id, app, user, err)
		}
		return nil, fmt.Errorf("adk: create session %q: %w", id, err)
	}
	h := s.handle(app, user, id, created.GetSession())
	if err := s.readState(ctx, h); err != nil {
		return nil, err
	}
	return h, nil
}

func (s *Service[E]) handle(app, user, id string, sess *sessionv1.Session) *Handle[E] {
	return &Handle[E]{app: app, user: user, id: id, sid: sess.GetSessionId(), noKey: s.v.NoStateKey,
		updated: sess.GetUpdatedAt().AsTime()}
}

// readState sets h's merged state and next sequence: one read of the
// session's state row and the two scopes, never of its messages.
func (s *Service[E]) readState(ctx context.Context, h *Handle[E]) error {
	resp, err := s.store.GetState(ctx, &sessionv1.GetStateRequest{
		SessionId: h.sid,
		Scopes:    []string{scopeApp(h.app), scopeUser(h.app, h.user)},
	})
	if err != nil {
		return s.lookupErr(h.id, err)
	}
	st, err := mergeState(h.app, h.user, resp)
	if err != nil {
		return err
	}
	h.state, h.next = st, resp.GetNextSequence()
	return nil
}

func (s *Service[E]) lookupErr(id string, err error) error {
	if errs.CodeOf(err) == errs.NotFoundCode {
		return fmt.Errorf("%w: %q: %w", s.v.NotFound, id, err)
	}
	return fmt.Errorf("adk: session %q: %w", id, err)
}

// find resolves an ADK session to its agentstate session by client key.
func (s *Service[E]) find(ctx context.Context, app, user, id string) (*sessionv1.Session, error) {
	resp, err := s.store.Get(ctx, &sessionv1.GetSessionRequest{Namespace: s.namespace(app), ClientKey: clientKey(user, id)})
	if err != nil {
		return nil, s.lookupErr(id, err)
	}
	return resp.GetSession(), nil
}

// Get reads a session: its state (without reading messages), then its
// events, filtered on the server (numRecent is its "last N", after its
// time filter, inclusive). The events and the state are of the same
// moment: were an append to come between the two reads, the events it
// added are left out, or, for a "last N" read, both are read again.
func (s *Service[E]) Get(ctx context.Context, app, user, id string, numRecent int, after time.Time) (*Handle[E], error) {
	if app == "" || user == "" || id == "" {
		return nil, fmt.Errorf("adk: app_name, user_id, session_id are required, got app_name: %q, user_id: %q, session_id: %q", app, user, id)
	}
	if numRecent < 0 {
		return nil, fmt.Errorf("adk: NumRecentEvents %d is negative", numRecent)
	}
	sess, err := s.find(ctx, app, user, id)
	if err != nil {
		return nil, err
	}
	h := s.handle(app, user, id, sess)
	// A "last N" read that raced an append is read again; after a few
	// tries the newer messages are dropped instead (fewer than N events,
	// still consistent with the state), so a busy session cannot starve
	// a reader.
	const tries = 8
	for try := 1; ; try++ {
		if err := s.readState(ctx, h); err != nil {
			return nil, err
		}
		evs, raced, err := s.readEvents(ctx, h.sid, h.next, numRecent, after)
		if err != nil {
			return nil, s.lookupErr(id, err)
		}
		if raced && try < tries {
			continue
		}
		h.events = evs
		return h, nil
	}
}

// readEvents reads the events of the session below sequence next (the
// state's), filtered as Get asks. raced reports a "last N" read that saw
// messages at or after next, which it had to drop.
func (s *Service[E]) readEvents(ctx context.Context, sid string, next int64, numRecent int, afterTime time.Time) (evs []*E, raced bool, err error) {
	var after *timestamppb.Timestamp
	if !afterTime.IsZero() {
		// ADK's After is inclusive, the server's after_time exclusive.
		after = timestamppb.New(afterTime.Add(-time.Nanosecond))
	}
	keep := func(m *sessionv1.Message) error {
		ev, err := s.v.Decode(m)
		if err == nil {
			evs = append(evs, ev)
		}
		return err
	}
	if n := numRecent; n > 0 && n <= maxLast {
		resp, err := s.store.ListMessages(ctx, &sessionv1.ListMessagesRequest{SessionId: sid, AfterTime: after, Last: int32(n)})
		if err != nil {
			return nil, false, err
		}
		for _, m := range resp.GetMessages() {
			if m.GetSequence() >= next {
				raced = true
				continue
			}
			if err := keep(m); err != nil {
				return nil, false, err
			}
		}
		return evs, raced, nil
	}
	// Every event (or more than one "last N" read returns): page in
	// sequence order up to next.
	for from := int64(0); from < next; {
		resp, err := s.store.ListMessages(ctx, &sessionv1.ListMessagesRequest{SessionId: sid, FromSequence: from, Limit: maxLast, AfterTime: after})
		if err != nil {
			return nil, false, err
		}
		if len(resp.GetMessages()) == 0 {
			break
		}
		for _, m := range resp.GetMessages() {
			if m.GetSequence() >= next {
				break
			}
			if err := keep(m); err != nil {
				return nil, false, err
			}
		}
		from = resp.GetNextSequence()
	}
	if n := numRecent; n > 0 && len(evs) > n {
		evs = evs[len(evs)-n:]
	}
	return evs, false, nil
}

// List returns the app's sessions (of one user, or of all when user is
// empty), with their state and without events, as ADK's services do. The
// listing is filtered on the server (namespace and actor name); each
// session's state is one more read, of its state row and scopes only.
func (s *Service[E]) List(ctx context.Context, app, user string) ([]*Handle[E], error) {
	if app == "" {
		return nil, fmt.Errorf("adk: app_name is required, got app_name: %q", app)
	}
	out := []*Handle[E]{}
	cursor := ""
	for {
		resp, err := s.store.List(ctx, &sessionv1.ListSessionsRequest{
			Namespace: s.namespace(app), ActorName: user, Limit: maxLast, Cursor: cursor,
		})
		if err != nil {
			return nil, fmt.Errorf("adk: list sessions of app %q: %w", app, err)
		}
		for _, sess := range resp.GetSessions() {
			m, ok := decodeMeta(sess.GetMetadataJson())
			if !ok || m.App != app || (user != "" && m.User != user) {
				continue
			}
			h := s.handle(m.App, m.User, m.Session, sess)
			err := s.readState(ctx, h)
			if errors.Is(err, s.v.NotFound) {
				continue // deleted since the listing
			}
			if err != nil {
				return nil, err
			}
			out = append(out, h)
		}
		if cursor = resp.GetNextCursor(); cursor == "" {
			return out, nil
		}
	}
}

// Delete removes a session and its events; deleting a missing session is a
// no-op, as in ADK's own services. App and user state stay.
func (s *Service[E]) Delete(ctx context.Context, app, user, id string) error {
	if app == "" || user == "" || id == "" {
		return fmt.Errorf("adk: app_name, user_id, session_id are required, got app_name: %q, user_id: %q, session_id: %q", app, user, id)
	}
	sess, err := s.find(ctx, app, user, id)
	if errors.Is(err, s.v.NotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	_, err = s.store.Delete(ctx, &sessionv1.DeleteSessionRequest{SessionId: sess.GetSessionId()})
	if err != nil && errs.CodeOf(err) != errs.NotFoundCode {
		return fmt.Errorf("adk: delete session %q: %w", id, err)
	}
	return nil
}
