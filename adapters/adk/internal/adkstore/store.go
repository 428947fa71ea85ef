package adkstore

import (
	"context"

	sessionv1 "github.com/agentstate/agentstate/messages/agentstate/session/v1"
	"google.golang.org/grpc"
)

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
type Store interface {
	Create(context.Context, *sessionv1.CreateSessionRequest) (*sessionv1.CreateSessionResponse, error)
	Get(context.Context, *sessionv1.GetSessionRequest) (*sessionv1.GetSessionResponse, error)
	List(context.Context, *sessionv1.ListSessionsRequest) (*sessionv1.ListSessionsResponse, error)
	Delete(context.Context, *sessionv1.DeleteSessionRequest) (*sessionv1.DeleteSessionResponse, error)
	Append(context.Context, *sessionv1.AppendRequest) (*sessionv1.AppendResponse, error)
	ListMessages(context.Context, *sessionv1.ListMessagesRequest) (*sessionv1.ListMessagesResponse, error)
	GetState(context.Context, *sessionv1.GetStateRequest) (*sessionv1.GetStateResponse, error)
}

// Remote is a Store over a node's gRPC API; opts apply to every call.
func Remote(c sessionv1.SessionServiceClient, opts ...grpc.CallOption) Store {
	return remote{c: c, opts: opts}
}

type remote struct {
	c    sessionv1.SessionServiceClient
	opts []grpc.CallOption
}

func (r remote) Create(ctx context.Context, req *sessionv1.CreateSessionRequest) (*sessionv1.CreateSessionResponse, error) {
	return r.c.Create(ctx, req, r.opts...)
}

func (r remote) Get(ctx context.Context, req *sessionv1.GetSessionRequest) (*sessionv1.GetSessionResponse, error) {
	return r.c.Get(ctx, req, r.opts...)
}

func (r remote) List(ctx context.Context, req *sessionv1.ListSessionsRequest) (*sessionv1.ListSessionsResponse, error) {
	return r.c.List(ctx, req, r.opts...)
}

func (r remote) Delete(ctx context.Context, req *sessionv1.DeleteSessionRequest) (*sessionv1.DeleteSessionResponse, error) {
	return r.c.Delete(ctx, req, r.opts...)
}

func (r remote) Append(ctx context.Context, req *sessionv1.AppendRequest) (*sessionv1.AppendResponse, error) {
	return r.c.Append(ctx, req, r.opts...)
}

func (r remote) ListMessages(ctx context.Context, req *sessionv1.ListMessagesRequest) (*sessionv1.ListMessagesResponse, error) {
	return r.c.ListMessages(ctx, req, r.opts...)
}

func (r remote) GetState(ctx context.Context, req *sessionv1.GetStateRequest) (*sessionv1.GetStateResponse, error) {
	return r.c.GetState(ctx, req, r.opts...)
}
