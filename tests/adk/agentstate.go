package main

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/agentstate/agentstate/actors"
	"github.com/agentstate/agentstate/actors/audit"
	sessionv1 "github.com/agentstate/agentstate/messages/session/v1"
	"github.com/agentstate/agentstate/persistence/sqlite"
	"github.com/asynkron/protoactor-go/actor"
)

// agentstateTarget is agentstate's sessions service in this process, as
// node bench's inprocess mode runs it.
type agentstateTarget struct {
	store   *sqlite.Store
	sys     *actor.ActorSystem
	node    *actors.Node
	commits commitCounter
}

// commitCounter counts committed transactions (the audit observer), for
// the mean batch.
type commitCounter struct{ n atomic.Int64 }

func (c *commitCounter) BatchCommitted(_, _ int, _ time.Duration, err error) {
	if err == nil {
		c.n.Add(1)
	}
}
func (c *commitCounter) AsyncRetried(int, error) {}
func (c *commitCounter) AsyncLost(int, error)    {}

func (a *agentstateTarget) Commits() int64 { return a.commits.n.Load() }

func openAgentstate(path, synchronous string) (*agentstateTarget, error) {
	store, err := sqlite.Open("file:" + path + "?synchronous=" + synchronous)
	if err != nil {
		return nil, err
	}
	sys := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger {
		return slog.New(slog.NewTextHandler(io.Discard, nil))
	}))
	a := &agentstateTarget{store: store, sys: sys}
	a.node, err = actors.Start(sys, store, actors.Config{Audit: audit.Config{Observer: &a.commits}})
	if err != nil {
		sys.Shutdown()
		return nil, errors.Join(err, store.Close())
	}
	return a, nil
}

func (a *agentstateTarget) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	err := a.node.Stop(ctx)
	a.sys.Shutdown()
	return errors.Join(err, a.store.Close())
}

func (a *agentstateTarget) CreateSessions(ctx context.Context, n int) ([]string, error) {
	out := make([]string, n)
	for i := range out {
		r, err := a.node.Sessions().Create(ctx, &sessionv1.CreateSessionRequest{ActorName: "bench"})
		if err != nil {
			return nil, err
		}
		out[i] = r.GetSession().GetSessionId()
	}
	return out, nil
}

func (a *agentstateTarget) NewClient(_ context.Context, sessionID string) (appender, error) {
	return &agentstateClient{a: a, id: sessionID}, nil
}

type agentstateClient struct {
	a  *agentstateTarget
	id string
}

func (c *agentstateClient) Append(ctx context.Context, m message) (int64, int, error) {
	role := sessionv1.Role_ROLE_USER
	if m.Assistant {
		role = sessionv1.Role_ROLE_ASSISTANT
	}
	r, err := c.a.node.Sessions().Append(ctx, &sessionv1.AppendRequest{SessionId: c.id,
		Messages: []*sessionv1.NewMessage{{Role: role, Content: m.Content, MessageId: m.ID}}})
	if err != nil {
		return -1, 1, err
	}
	return r.GetMessages()[0].GetSequence(), 1, nil
}

func (a *agentstateTarget) ReadBack(ctx context.Context, sessionID string) ([]stored, error) {
	var out []stored
	for from := int64(0); ; {
		r, err := a.node.Sessions().ListMessages(ctx, &sessionv1.ListMessagesRequest{SessionId: sessionID, FromSequence: from, Limit: 1000})
		if err != nil {
			return nil, err
		}
		for _, m := range r.GetMessages() {
			out = append(out, stored{ID: m.GetMessageId(), Seq: m.GetSequence()})
		}
		if len(r.GetMessages()) == 0 || r.GetNextSequence() <= from {
			return out, nil
		}
		from = r.GetNextSequence()
	}
}
