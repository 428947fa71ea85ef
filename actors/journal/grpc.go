package journal

import (
	"context"

	sessionv1 "github.com/agentstate/agentstate/messages/agentstate/session/v1"
	"google.golang.org/grpc"
)

// OverGRPC returns the Sessions of a node reached over gRPC (a client of
// a connection made with node/client.Dial, say), so actors in another
// process persist through the node's group commit. opts go with every
// call. A call whose outcome the connection cannot tell is OUTCOME_UNKNOWN
// (node/client.OutcomeOptions) and panics like any failure: the recovery
// then reads whether it was stored.
func OverGRPC(c sessionv1.SessionServiceClient, opts ...grpc.CallOption) Sessions {
	return grpcSessions{c: c, opts: opts}
}

type grpcSessions struct {
	c    sessionv1.SessionServiceClient
	opts []grpc.CallOption
}

func (g grpcSessions) Get(ctx context.Context, r *sessionv1.GetSessionRequest) (*sessionv1.GetSessionResponse, error) {
	return g.c.Get(ctx, r, g.opts...)
}

func (g grpcSessions) Create(ctx context.Context, r *sessionv1.CreateSessionRequest) (*sessionv1.CreateSessionResponse, error) {
	return g.c.Create(ctx, r, g.opts...)
}

func (g grpcSessions) Append(ctx context.Context, r *sessionv1.AppendRequest) (*sessionv1.AppendResponse, error) {
	return g.c.Append(ctx, r, g.opts...)
}

func (g grpcSessions) ListMessages(ctx context.Context, r *sessionv1.ListMessagesRequest) (*sessionv1.ListMessagesResponse, error) {
	return g.c.ListMessages(ctx, r, g.opts...)
}

func (g grpcSessions) Truncate(ctx context.Context, r *sessionv1.TruncateRequest) (*sessionv1.TruncateResponse, error) {
	return g.c.Truncate(ctx, r, g.opts...)
}

func (g grpcSessions) PutSnapshot(ctx context.Context, r *sessionv1.PutSnapshotRequest) (*sessionv1.PutSnapshotResponse, error) {
	return g.c.PutSnapshot(ctx, r, g.opts...)
}

func (g grpcSessions) GetSnapshot(ctx context.Context, r *sessionv1.GetSnapshotRequest) (*sessionv1.GetSnapshotResponse, error) {
	return g.c.GetSnapshot(ctx, r, g.opts...)
}

func (g grpcSessions) DeleteSnapshot(ctx context.Context, r *sessionv1.DeleteSnapshotRequest) (*sessionv1.DeleteSnapshotResponse, error) {
	return g.c.DeleteSnapshot(ctx, r, g.opts...)
}
