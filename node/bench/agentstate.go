package bench

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	sessionv1 "github.com/agentstate/agentstate/messages/agentstate/session/v1"
	nodeclient "github.com/agentstate/agentstate/node/client"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// sessionAPI is the part of the sessions service the workload uses. The
// in-process *session.Service has it as is; grpcSessions adapts a client.
type sessionAPI interface {
	Create(context.Context, *sessionv1.CreateSessionRequest) (*sessionv1.CreateSessionResponse, error)
	Append(context.Context, *sessionv1.AppendRequest) (*sessionv1.AppendResponse, error)
	ListMessages(context.Context, *sessionv1.ListMessagesRequest) (*sessionv1.ListMessagesResponse, error)
}

// grpcSessions spreads calls over a few connections: one HTTP/2
// connection serializes its frames on one socket, which would measure the
// client's connection rather than the node. Appends go, by mode, over
// AppendBatches (ModeGRPC), AppendStream (ModeGRPCStream) or unary Append;
// appenders[i] uses clients[i]'s connection.
type grpcSessions struct {
	clients   []sessionv1.SessionServiceClient
	appenders []appender
	next      atomic.Uint64
}

// appender is a streaming append client: nodeclient.StreamClient or
// nodeclient.BatchClient.
type appender interface {
	Append(context.Context, *sessionv1.AppendRequest) (*sessionv1.AppendResponse, error)
	Close()
}

func newGRPCSessions(conns []*grpc.ClientConn, mode Mode) *grpcSessions {
	g := &grpcSessions{}
	for _, c := range conns {
		cl := sessionv1.NewSessionServiceClient(c)
		g.clients = append(g.clients, cl)
		switch mode {
		case ModeGRPC:
			g.appenders = append(g.appenders, nodeclient.NewBatchClient(cl))
		case ModeGRPCStream:
			g.appenders = append(g.appenders, nodeclient.NewStreamClient(cl))
		}
	}
	return g
}

func (g *grpcSessions) pick() int { return int(g.next.Add(1) % uint64(len(g.clients))) }

// close ends the append streams.
func (g *grpcSessions) close() {
	for _, a := range g.appenders {
		a.Close()
	}
}

func (g *grpcSessions) Create(ctx context.Context, r *sessionv1.CreateSessionRequest) (*sessionv1.CreateSessionResponse, error) {
	return g.clients[g.pick()].Create(ctx, r)
}

func (g *grpcSessions) Append(ctx context.Context, r *sessionv1.AppendRequest) (*sessionv1.AppendResponse, error) {
	if g.appenders != nil {
		return g.appenders[g.pick()].Append(ctx, r)
	}
	return g.clients[g.pick()].Append(ctx, r)
}

func (g *grpcSessions) ListMessages(ctx context.Context, r *sessionv1.ListMessagesRequest) (*sessionv1.ListMessagesResponse, error) {
	return g.clients[g.pick()].ListMessages(ctx, r)
}

// Retries of a refused append. A network sender is refused with
// RESOURCE_EXHAUSTED when the node's backlog is full, and may see
// UNAVAILABLE, or OUTCOME_UNKNOWN (DEADLINE_EXCEEDED) when an answer was
// lost; it retries with the same message id, which the node answers with
// the original sequence if the first attempt was stored after all.
const (
	maxAttempts  = 200
	firstBackoff = time.Millisecond
	maxBackoff   = 50 * time.Millisecond
)

// agentstate is the sessions service as a Target.
type agentstate struct {
	api sessionAPI
	// counter is nil when the node is not in this process.
	counter *commitCounter
	// cpu, when set, is the CPU time of the node's own process.
	cpu func() time.Duration
}

// ServerCPU is the CPU time of the node's process when it is not this one.
func (a *agentstate) ServerCPU() time.Duration {
	if a.cpu == nil {
		return 0
	}
	return a.cpu()
}

func (a *agentstate) Commits() (int64, time.Duration) {
	if a.counter == nil {
		return 0, 0
	}
	return a.counter.n.Load(), time.Duration(a.counter.busy.Load())
}

// createCallers is how many creates CreateSessions has in flight: W4's
// 10,000 sessions one at a time would take a commit each.
const createCallers = 64

func (a *agentstate) CreateSessions(ctx context.Context, n int) ([]string, error) {
	if n == 1 { // a new session's create, timed: no goroutine around it
		r, err := a.api.Create(ctx, &sessionv1.CreateSessionRequest{ActorName: "bench"})
		if err != nil {
			return nil, err
		}
		return []string{r.GetSession().GetSessionId()}, nil
	}
	out := make([]string, n)
	errs := make([]error, createCallers)
	var next atomic.Int64
	var wg sync.WaitGroup
	for w := range min(n, createCallers) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := int(next.Add(1) - 1); i < n; i = int(next.Add(1) - 1) {
				r, err := a.api.Create(ctx, &sessionv1.CreateSessionRequest{ActorName: "bench"})
				if err != nil {
					errs[w] = err
					return
				}
				out[i] = r.GetSession().GetSessionId()
			}
		}()
	}
	wg.Wait()
	return out, errors.Join(errs...)
}

func (a *agentstate) Append(ctx context.Context, sessionID string, m Message) (Ack, error) {
	role := sessionv1.Role_ROLE_USER
	if m.Assistant {
		role = sessionv1.Role_ROLE_ASSISTANT
	}
	req := &sessionv1.AppendRequest{SessionId: sessionID, Messages: []*sessionv1.NewMessage{
		{Role: role, Content: m.Content, MessageId: m.ID},
	}}
	ack := Ack{Seq: -1}
	backoff := firstBackoff
	for {
		ack.Attempts++
		r, err := a.api.Append(ctx, req)
		if err == nil {
			if len(r.GetMessages()) != 1 {
				return ack, fmt.Errorf("append answered %d messages for 1", len(r.GetMessages()))
			}
			ack.Seq = r.GetMessages()[0].GetSequence()
			return ack, nil
		}
		if c := status.Code(err); (c != codes.ResourceExhausted && c != codes.Unavailable && c != codes.DeadlineExceeded) ||
			ack.Attempts >= maxAttempts {
			return ack, err
		}
		// Client backoff before a retry, not synchronization.
		select {
		case <-time.After(backoff):
		case <-ctx.Done():
			return ack, ctx.Err()
		}
		backoff = min(2*backoff, maxBackoff)
	}
}

func (a *agentstate) ReadBack(ctx context.Context, sessionID string) ([]Stored, error) {
	var out []Stored
	from := int64(0)
	for {
		r, err := a.api.ListMessages(ctx, &sessionv1.ListMessagesRequest{SessionId: sessionID, FromSequence: from, Limit: 1000})
		if err != nil {
			return nil, err
		}
		for _, m := range r.GetMessages() {
			out = append(out, Stored{ID: m.GetMessageId(), Seq: m.GetSequence()})
		}
		if len(r.GetMessages()) == 0 || r.GetNextSequence() <= from {
			return out, nil
		}
		from = r.GetNextSequence()
	}
}
