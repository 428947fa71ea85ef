package adk

import (
	"context"
	"errors"
	"fmt"
	"time"

	sessionv1 "github.com/agentstate/agentstate/messages/agentstate/session/v1"
	"github.com/agentstate/agentstate/messages/errs"
	"github.com/agentstate/agentstate/persistence"
	"google.golang.org/adk/platform"
	"google.golang.org/adk/session"
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

// Service is ADK's session.Service on agentstate.
type Service struct {
	store Store
	opts  Options
}

var _ session.Service = (*Service)(nil)

// New returns the ADK session service over store (see Store for the two
// kinds).
func New(store Store, opts Options) *Service {
	if opts.NamespacePrefix == "" {
		opts.NamespacePrefix = "adk:"
	}
	return &Service{store: store, opts: opts}
}

// maxLast is the most messages the server returns for one "last N" read.
const maxLast = 1000

// Create stores a new session, with the app and user parts of req.State
// applied to their shared scopes in the same transaction. A session id
// already taken for this app and user is an error.
func (s *Service) Create(ctx context.Context, req *session.CreateRequest) (*session.CreateResponse, error) {
	if req.AppName == "" || req.UserID == "" {
		return nil, fmt.Errorf("adk: app_name and user_id are required, got app_name: %q, user_id: %q", req.AppName, req.UserID)
	}
	id := req.SessionID
	if id == "" {
		id = platform.NewUUID(ctx)
	}
	d, err := splitDelta(req.State)
	if err != nil {
		return nil, err
	}
	meta, err := encodeMeta(req.AppName, req.UserID, id)
	if err != nil {
		return nil, err
	}
	cr := &sessionv1.CreateSessionRequest{
		ActorName:    req.UserID,
		Namespace:    s.namespace(req.AppName),
		ClientKey:    clientKey(req.UserID, id),
		MetadataJson: meta,
		StateDelta:   d.session,
		ScopeDeltas:  d.scopes(req.AppName, req.UserID),
	}
	if s.opts.SessionTTL > 0 {
		cr.Ttl = durationpb.New(s.opts.SessionTTL)
	}
	created, err := s.store.Create(ctx, cr)
	if err != nil {
		if errs.CodeOf(err) == errs.AlreadyExistsCode {
			return nil, fmt.Errorf("adk: session %q of app %q, user %q already exists: %w", id, req.AppName, req.UserID, err)
		}
		return nil, fmt.Errorf("adk: create session %q: %w", id, err)
	}
	h := &handle{app: req.AppName, user: req.UserID, id: id, sid: created.GetSession().GetSessionId(),
		updated: created.GetSession().GetUpdatedAt().AsTime()}
	st, err := s.readState(ctx, h)
	if err != nil {
		return nil, err
	}
	h.state, h.next = st.state, st.next
	return &session.CreateResponse{Session: h}, nil
}

type readState struct {
	state map[string]any
	next  int64
}

// readState reads a session's merged state and its next sequence: one read
// of the session's state row and the two scopes, never of its messages.
func (s *Service) readState(ctx context.Context, h *handle) (readState, error) {
	resp, err := s.store.GetState(ctx, &sessionv1.GetStateRequest{
		SessionId: h.sid,
		Scopes:    []string{scopeApp(h.app), scopeUser(h.app, h.user)},
	})
	if err != nil {
		return readState{}, s.lookupErr(h.id, err)
	}
	st, err := mergeState(h.app, h.user, resp)
	return readState{state: st, next: resp.GetNextSequence()}, err
}

func (s *Service) lookupErr(id string, err error) error {
	if errs.CodeOf(err) == errs.NotFoundCode {
		return fmt.Errorf("%w: %q: %w", session.ErrNotFound, id, err)
	}
	return fmt.Errorf("adk: session %q: %w", id, err)
}

// find resolves an ADK session to its agentstate session by client key.
func (s *Service) find(ctx context.Context, app, user, id string) (*sessionv1.Session, error) {
	resp, err := s.store.Get(ctx, &sessionv1.GetSessionRequest{Namespace: s.namespace(app), ClientKey: clientKey(user, id)})
	if err != nil {
		return nil, s.lookupErr(id, err)
	}
	return resp.GetSession(), nil
}

// Get reads a session: its state (without reading messages), then its
// events, filtered on the server (NumRecentEvents is its "last N", After
// its time filter). The events and the state are of the same moment: were
// an append to come between the two reads, the events it added are left
// out, or, for a "last N" read, both are read again.
func (s *Service) Get(ctx context.Context, req *session.GetRequest) (*session.GetResponse, error) {
	if req.AppName == "" || req.UserID == "" || req.SessionID == "" {
		return nil, fmt.Errorf("adk: app_name, user_id, session_id are required, got app_name: %q, user_id: %q, session_id: %q", req.AppName, req.UserID, req.SessionID)
	}
	if req.NumRecentEvents < 0 {
		return nil, fmt.Errorf("adk: NumRecentEvents %d is negative", req.NumRecentEvents)
	}
	sess, err := s.find(ctx, req.AppName, req.UserID, req.SessionID)
	if err != nil {
		return nil, err
	}
	h := &handle{app: req.AppName, user: req.UserID, id: req.SessionID, sid: sess.GetSessionId(),
		updated: sess.GetUpdatedAt().AsTime()}
	// A "last N" read that raced an append is read again; after a few
	// tries the newer messages are dropped instead (fewer than N events,
	// still consistent with the state), so a busy session cannot starve
	// a reader.
	const tries = 8
	for try := 1; ; try++ {
		st, err := s.readState(ctx, h)
		if err != nil {
			return nil, err
		}
		evs, raced, err := s.readEvents(ctx, h.sid, st.next, req)
		if err != nil {
			return nil, s.lookupErr(req.SessionID, err)
		}
		if raced && try < tries {
			continue
		}
		h.state, h.next, h.events = st.state, st.next, evs
		return &session.GetResponse{Session: h}, nil
	}
}

// readEvents reads the events of the session below sequence next (the
// state's), filtered as req asks. raced reports a "last N" read that saw
// messages at or after next, which it had to drop.
func (s *Service) readEvents(ctx context.Context, sid string, next int64, req *session.GetRequest) (evs []*session.Event, raced bool, err error) {
	var after *timestamppb.Timestamp
	if !req.After.IsZero() {
		// ADK's After is inclusive, the server's after_time exclusive.
		after = timestamppb.New(req.After.Add(-time.Nanosecond))
	}
	keep := func(m *sessionv1.Message) error {
		ev, err := decodeEvent(m)
		if err == nil {
			evs = append(evs, ev)
		}
		return err
	}
	if n := req.NumRecentEvents; n > 0 && n <= maxLast {
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
	if n := req.NumRecentEvents; n > 0 && len(evs) > n {
		evs = evs[len(evs)-n:]
	}
	return evs, false, nil
}

// List returns the app's sessions (of one user, or of all when UserID is
// empty), with their state and without events, as ADK's services do. The
// listing is filtered on the server (namespace and actor name); each
// session's state is one more read, of its state row and scopes only.
func (s *Service) List(ctx context.Context, req *session.ListRequest) (*session.ListResponse, error) {
	if req.AppName == "" {
		return nil, fmt.Errorf("adk: app_name is required, got app_name: %q", req.AppName)
	}
	out := []session.Session{}
	cursor := ""
	for {
		resp, err := s.store.List(ctx, &sessionv1.ListSessionsRequest{
			Namespace: s.namespace(req.AppName), ActorName: req.UserID, Limit: maxLast, Cursor: cursor,
		})
		if err != nil {
			return nil, fmt.Errorf("adk: list sessions of app %q: %w", req.AppName, err)
		}
		for _, sess := range resp.GetSessions() {
			m, ok := decodeMeta(sess.GetMetadataJson())
			if !ok || m.App != req.AppName || (req.UserID != "" && m.User != req.UserID) {
				continue
			}
			h := &handle{app: m.App, user: m.User, id: m.Session, sid: sess.GetSessionId(), updated: sess.GetUpdatedAt().AsTime()}
			st, err := s.readState(ctx, h)
			if errors.Is(err, session.ErrNotFound) {
				continue // deleted since the listing
			}
			if err != nil {
				return nil, err
			}
			h.state, h.next = st.state, st.next
			out = append(out, h)
		}
		if cursor = resp.GetNextCursor(); cursor == "" {
			return &session.ListResponse{Sessions: out}, nil
		}
	}
}

// Delete removes a session and its events; deleting a missing session is a
// no-op, as in ADK's own services. App and user state stay.
func (s *Service) Delete(ctx context.Context, req *session.DeleteRequest) error {
	if req.AppName == "" || req.UserID == "" || req.SessionID == "" {
		return fmt.Errorf("adk: app_name, user_id, session_id are required, got app_name: %q, user_id: %q, session_id: %q", req.AppName, req.UserID, req.SessionID)
	}
	sess, err := s.find(ctx, req.AppName, req.UserID, req.SessionID)
	if errors.Is(err, session.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	_, err = s.store.Delete(ctx, &sessionv1.DeleteSessionRequest{SessionId: sess.GetSessionId()})
	if err != nil && errs.CodeOf(err) != errs.NotFoundCode {
		return fmt.Errorf("adk: delete session %q: %w", req.SessionID, err)
	}
	return nil
}

// AppendEvent stores event as the session's next message, with its state
// delta applied in the same transaction: the session's keys to the
// session's state, app: and user: keys to the shared scopes; temp: keys
// are applied to the handle only. The append is conditional on the
// handle's next sequence, so an append through a handle that another
// writer overtook is refused with ErrStaleSession. Partial events are not
// stored. An event without an ID gets one.
func (s *Service) AppendEvent(ctx context.Context, cur session.Session, event *session.Event) error {
	if cur == nil {
		return fmt.Errorf("adk: session is nil")
	}
	if event == nil {
		return fmt.Errorf("adk: event is nil")
	}
	if event.Partial {
		return nil
	}
	h, ok := cur.(*handle)
	if !ok {
		return fmt.Errorf("adk: unexpected session type %T for session %q: AppendEvent takes the sessions this service returned", cur, cur.ID())
	}
	if event.ID == "" {
		event.ID = platform.NewUUID(ctx)
	}
	stored := withoutTemp(event)
	d, err := splitDelta(stored.Actions.StateDelta)
	if err != nil {
		return err
	}
	msg, err := encodeEvent(stored)
	if err != nil {
		return err
	}

	h.appendMu.Lock()
	defer h.appendMu.Unlock()
	expected := h.nextSequence()
	resp, err := s.store.Append(ctx, &sessionv1.AppendRequest{
		SessionId:            h.sid,
		Messages:             []*sessionv1.NewMessage{msg},
		StateDelta:           d.session,
		ScopeDeltas:          d.scopes(h.app, h.user),
		ExpectedNextSequence: &expected,
	})
	if appendErr := err; appendErr != nil {
		next, mismatch := persistence.NextSequenceOf(appendErr)
		if !mismatch {
			return s.lookupErr(h.id, appendErr)
		}
		// The session moved on. It may have moved on by this very event:
		// an earlier attempt whose answer was lost (OUTCOME_UNKNOWN)
		// committed it at the expected sequence.
		if ours, err := s.storedAt(ctx, h.sid, expected, event.ID); err != nil {
			return s.lookupErr(h.id, err)
		} else if !ours {
			return fmt.Errorf("%w: session %q: the handle was read at sequence %d, the session is at %d; get it again: %w",
				ErrStaleSession, h.id, expected, next, appendErr)
		}
		h.appended(event, stored, expected+1)
		return nil
	}
	h.appended(event, stored, resp.GetNextSequence())
	return nil
}

// storedAt reports whether the message at sequence seq is the event id.
func (s *Service) storedAt(ctx context.Context, sid string, seq int64, id string) (bool, error) {
	resp, err := s.store.ListMessages(ctx, &sessionv1.ListMessagesRequest{SessionId: sid, FromSequence: seq, Limit: 1})
	if err != nil {
		return false, err
	}
	ms := resp.GetMessages()
	return len(ms) == 1 && ms[0].GetSequence() == seq && ms[0].GetMessageId() == id, nil
}
