package adk

import (
	"context"
	"errors"
	"time"

	"github.com/agentstate/agentstate/adapters/adk/internal/adkstore"
	sessionv1 "github.com/agentstate/agentstate/messages/agentstate/session/v1"
	"google.golang.org/adk/v2/platform"
	"google.golang.org/adk/v2/session"
	"google.golang.org/grpc"
)

// ErrStaleSession refuses an AppendEvent through a session handle that is
// older than the stored session: another writer appended since the handle
// was read. Nothing was stored; Get the session again and retry. It is the
// v1 package's (adapters/adk) error too.
var ErrStaleSession = adkstore.ErrStaleSession

// ErrNotFound is in the error of a Get, an AppendEvent or a List that
// found no such session (ADK v2's session package has no error of its
// own for it; v1's is session.ErrNotFound).
var ErrNotFound = errors.New("session not found")

// Options configure a Service. The zero value is usable.
type Options = adkstore.Options

// Store is the part of agentstate's session API the ADK service uses. Two
// implementations serve it:
//
//   - embedded: the sessions service of an agentstate node in the same
//     process (actors.Node.Sessions() implements Store as it is);
//   - over gRPC: Remote(sessionv1.NewSessionServiceClient(conn)), with conn
//     from node/client.Dial.
//
// The service makes the same calls on either, so a test of one covers the
// logic of both; the suite runs against each.
type Store = adkstore.Store

// Remote is a Store over a node's gRPC API; opts apply to every call.
func Remote(c sessionv1.SessionServiceClient, opts ...grpc.CallOption) Store {
	return adkstore.Remote(c, opts...)
}

// Service is ADK v2's session.Service on agentstate.
type Service struct {
	core *adkstore.Service[session.Event]
}

var _ session.Service = (*Service)(nil)

// New returns the ADK session service over store (see Store for the two
// kinds).
func New(store Store, opts Options) *Service {
	return &Service{core: adkstore.New(store, opts, adkstore.Version[session.Event]{
		NotFound:   ErrNotFound,
		NoStateKey: session.ErrStateKeyNotExist,
		NewID:      platform.NewUUID,
		Decode:     decodeEvent,
		Encode:     encodeEvent,
		Fields: func(e *session.Event) (*string, bool, map[string]any, time.Time) {
			return &e.ID, e.Partial, e.Actions.StateDelta, e.Timestamp
		},
		WithDelta: func(e *session.Event, delta map[string]any) *session.Event {
			c := *e
			c.Actions.StateDelta = delta
			return &c
		},
	})}
}

// Create stores a new session, with the app and user parts of req.State
// applied to their shared scopes in the same transaction. A session id
// already taken for this app and user is an error.
func (s *Service) Create(ctx context.Context, req *session.CreateRequest) (*session.CreateResponse, error) {
	h, err := s.core.Create(ctx, req.AppName, req.UserID, req.SessionID, req.State)
	if err != nil {
		return nil, err
	}
	return &session.CreateResponse{Session: handle{h}}, nil
}

// Get reads a session: its state (without reading messages), then its
// events, filtered on the server (NumRecentEvents is its "last N", After
// its time filter). The events and the state are of the same moment.
func (s *Service) Get(ctx context.Context, req *session.GetRequest) (*session.GetResponse, error) {
	h, err := s.core.Get(ctx, req.AppName, req.UserID, req.SessionID, req.NumRecentEvents, req.After)
	if err != nil {
		return nil, err
	}
	return &session.GetResponse{Session: handle{h}}, nil
}

// List returns the app's sessions (of one user, or of all when UserID is
// empty), with their state and without events, as ADK's services do.
func (s *Service) List(ctx context.Context, req *session.ListRequest) (*session.ListResponse, error) {
	hs, err := s.core.List(ctx, req.AppName, req.UserID)
	if err != nil {
		return nil, err
	}
	out := make([]session.Session, len(hs))
	for i, h := range hs {
		out[i] = handle{h}
	}
	return &session.ListResponse{Sessions: out}, nil
}

// Delete removes a session and its events; deleting a missing session is a
// no-op, as in ADK's own services. App and user state stay.
func (s *Service) Delete(ctx context.Context, req *session.DeleteRequest) error {
	return s.core.Delete(ctx, req.AppName, req.UserID, req.SessionID)
}

// AppendEvent stores event as the session's next message, with its state
// delta applied in the same transaction: the session's keys to the
// session's state, app: and user: keys to the shared scopes; temp: keys
// are applied to the handle only. The append is conditional on the
// handle's next sequence, so an append through a handle that another
// writer overtook is refused with ErrStaleSession. Partial events are not
// stored. An event without an ID gets one.
func (s *Service) AppendEvent(ctx context.Context, cur session.Session, event *session.Event) error {
	return s.core.AppendEvent(ctx, cur, event)
}

// handle is the session.Session this package hands out (see
// adkstore.Handle): the shared handle with this version's types.
type handle struct {
	*adkstore.Handle[session.Event]
}

func (h handle) State() session.State   { return h.StateView() }
func (h handle) Events() session.Events { return h.EventList() }
