package session

import (
	"context"

	sessionv1 "github.com/agentstate/agentstate/messages/agentstate/session/v1"
	"github.com/agentstate/agentstate/messages/ids"
	"google.golang.org/grpc"
)

// The façade: sessionv1.SessionServiceServer for in-process and gRPC
// callers. Writes are validated here, in the caller's goroutine (cheap and
// parallel), admitted into the audit backlog, and handed to the session's
// actor. Reads go straight to the store's read-only connections: a write is
// answered only after it committed, so a read issued after an answer sees
// it.

var _ sessionv1.SessionServiceServer = (*Service)(nil)

func (s *Service) Create(ctx context.Context, req *sessionv1.CreateSessionRequest) (*sessionv1.CreateSessionResponse, error) {
	n, err := normalizeCreate(req, s.env.cfg)
	if err != nil {
		return nil, err
	}
	if req.GetSessionId() == "" {
		n.SessionId = s.newLocalID()
	}
	return routed[*sessionv1.CreateSessionResponse](ctx, s, n)
}

func (s *Service) Get(ctx context.Context, req *sessionv1.GetSessionRequest) (*sessionv1.GetSessionResponse, error) {
	return s.get(ctx, req)
}

func (s *Service) List(ctx context.Context, req *sessionv1.ListSessionsRequest) (*sessionv1.ListSessionsResponse, error) {
	return s.list(ctx, req)
}

func (s *Service) Close(ctx context.Context, req *sessionv1.CloseSessionRequest) (*sessionv1.CloseSessionResponse, error) {
	if err := ids.Check("session_id", req.GetSessionId()); err != nil {
		return nil, err
	}
	return routed[*sessionv1.CloseSessionResponse](ctx, s, &sessionv1.CloseSessionRequest{SessionId: req.GetSessionId()})
}

func (s *Service) Delete(ctx context.Context, req *sessionv1.DeleteSessionRequest) (*sessionv1.DeleteSessionResponse, error) {
	if err := ids.Check("session_id", req.GetSessionId()); err != nil {
		return nil, err
	}
	return routed[*sessionv1.DeleteSessionResponse](ctx, s, &sessionv1.DeleteSessionRequest{SessionId: req.GetSessionId()})
}

func (s *Service) Append(ctx context.Context, req *sessionv1.AppendRequest) (*sessionv1.AppendResponse, error) {
	n, err := normalizeAppend(req, s.env.cfg)
	if err != nil {
		return nil, err
	}
	return routed[*sessionv1.AppendResponse](ctx, s, n)
}

func (s *Service) ListMessages(ctx context.Context, req *sessionv1.ListMessagesRequest) (*sessionv1.ListMessagesResponse, error) {
	return s.listMessages(ctx, req)
}

func (s *Service) UpdateTokenUsage(ctx context.Context, req *sessionv1.UpdateTokenUsageRequest) (*sessionv1.UpdateTokenUsageResponse, error) {
	if err := checkTokenUsage(req); err != nil {
		return nil, err
	}
	n := &sessionv1.UpdateTokenUsageRequest{
		SessionId: req.GetSessionId(), InputTokens: req.GetInputTokens(), OutputTokens: req.GetOutputTokens(), Cost: req.GetCost(),
	}
	return routed[*sessionv1.UpdateTokenUsageResponse](ctx, s, n)
}

func (s *Service) LinkPlan(ctx context.Context, req *sessionv1.LinkPlanRequest) (*sessionv1.LinkPlanResponse, error) {
	n, err := normalizeLink(req)
	if err != nil {
		return nil, err
	}
	return routed[*sessionv1.LinkPlanResponse](ctx, s, n)
}

func (s *Service) Export(ctx context.Context, req *sessionv1.ExportSessionRequest) (*sessionv1.ExportSessionResponse, error) {
	return s.export(ctx, req)
}

// Import writes through the writer directly, not through a session
// actor: the new session's id is made here and nobody else knows it before
// the answer, so no session actor can own it yet.
func (s *Service) Import(ctx context.Context, req *sessionv1.ImportSessionRequest) (*sessionv1.ImportSessionResponse, error) {
	if s.closing.Load() {
		return nil, errUnavailableStopping()
	}
	ctx, cancel := context.WithTimeout(ctx, s.env.cfg.AskTimeout)
	defer cancel()
	return s.importSession(ctx, req)
}

// ExportStream is ExportTo on a gRPC stream: the node holds one page at a
// time, and HTTP/2 flow control holds it back while the client reads.
func (s *Service) ExportStream(req *sessionv1.ExportSessionRequest, stream grpc.ServerStreamingServer[sessionv1.ExportChunk]) error {
	return s.ExportTo(stream.Context(), req, stream.Send)
}

// ImportStream is ImportFrom on a gRPC stream.
func (s *Service) ImportStream(stream grpc.ClientStreamingServer[sessionv1.ImportChunk, sessionv1.ImportSessionResponse]) error {
	resp, err := s.ImportFrom(stream.Context(), stream.Recv)
	if err != nil {
		return err
	}
	return stream.SendAndClose(resp)
}
