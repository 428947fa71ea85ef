package session_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentstate/agentstate/actors/session"
	"github.com/agentstate/agentstate/actors/writer"
	commonv1 "github.com/agentstate/agentstate/messages/agentstate/common/v1"
	sessionv1 "github.com/agentstate/agentstate/messages/agentstate/session/v1"
	"github.com/agentstate/agentstate/messages/errs"
	"github.com/agentstate/agentstate/persistence/sqlite"
	"github.com/asynkron/protoactor-go/actor"
)

const time30s = 30 * time.Second

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// node is one process's worth of agentstate: store, writer, sessions.
type node struct {
	sys   *actor.ActorSystem
	store *sqlite.Store
	wr    *writer.Writer
	svc   *session.Service
}

var memSeq atomic.Int64

// memURL names a fresh shared in-memory database.
func memURL(tb testing.TB) string {
	name := strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' {
			return r
		}
		return '-'
	}, tb.Name())
	if len(name) > 40 {
		name = name[len(name)-40:]
	}
	return fmt.Sprintf("memory:%s-%d", name, memSeq.Add(1))
}

// fileURL names a fresh file database (WAL, synchronous=FULL).
func fileURL(tb testing.TB) string { return filepath.Join(tb.TempDir(), "sessions.db") }

// startNode starts everything on url. hook, when set, is installed as the
// session actors' accept hook before the first request. Cleanup stops it
// all in dependency order.
func startNode(tb testing.TB, url string, cfg session.Config, hook func(string, int, bool)) *node {
	tb.Helper()
	return startNodeWith(tb, url, writer.Config{}, cfg, hook)
}

func startNodeWith(tb testing.TB, url string, wcfg writer.Config, cfg session.Config, hook func(string, int, bool)) *node {
	tb.Helper()
	if wcfg.Logger == nil {
		wcfg.Logger = quiet
	}
	n := &node{sys: actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return quiet }))}
	var err error
	if n.store, err = sqlite.Open(url); err != nil {
		tb.Fatalf("open %s: %v", url, err)
	}
	if n.wr, err = writer.Start(n.sys, n.store, wcfg); err != nil {
		tb.Fatalf("writer.Start: %v", err)
	}
	if n.svc, err = session.Start(n.sys, n.wr, n.store.Reader(), cfg); err != nil {
		tb.Fatalf("session.Start: %v", err)
	}
	if hook != nil {
		session.OnAccept(n.svc, hook)
	}
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := n.svc.Stop(ctx); err != nil {
			tb.Errorf("sessions Stop: %v", err)
		}
		if err := n.wr.Stop(ctx); err != nil {
			tb.Errorf("writer Stop: %v", err)
		}
		n.store.Close()
		n.sys.Shutdown()
	})
	return n
}

func ctxT(tb testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	tb.Cleanup(cancel)
	return ctx
}

func (n *node) create(tb testing.TB, actorName string) string {
	tb.Helper()
	r, err := n.svc.Create(ctxT(tb), &sessionv1.CreateSessionRequest{ActorName: actorName})
	if err != nil {
		tb.Fatalf("create: %v", err)
	}
	return r.GetSession().GetSessionId()
}

func (n *node) get(tb testing.TB, id string) *sessionv1.Session {
	tb.Helper()
	r, err := n.svc.Get(ctxT(tb), &sessionv1.GetSessionRequest{SessionId: id})
	if err != nil {
		tb.Fatalf("get %s: %v", id, err)
	}
	return r.GetSession()
}

// messages reads every message of a session through the paged API.
func (n *node) messages(tb testing.TB, id string) []*sessionv1.Message {
	tb.Helper()
	var out []*sessionv1.Message
	from := int64(0)
	for {
		r, err := n.svc.ListMessages(ctxT(tb), &sessionv1.ListMessagesRequest{SessionId: id, FromSequence: from, Limit: 1000})
		if err != nil {
			tb.Fatalf("list messages %s from %d: %v", id, from, err)
		}
		if len(r.GetMessages()) == 0 {
			return out
		}
		out = append(out, r.GetMessages()...)
		from = r.GetNextSequence()
	}
}

func userMsg(content string) *sessionv1.NewMessage {
	return &sessionv1.NewMessage{Role: sessionv1.Role_ROLE_USER, Content: content}
}

func wantCode(tb testing.TB, err error, want errs.Code) {
	tb.Helper()
	if got := errs.CodeOf(err); got != want {
		tb.Fatalf("error %v: code %v, want %v", err, got, want)
	}
}

// checkDense fails unless msgs are exactly sequences 0..len-1 in order.
func checkDense(tb testing.TB, msgs []*sessionv1.Message) {
	tb.Helper()
	for i, m := range msgs {
		if m.GetSequence() != int64(i) {
			tb.Fatalf("message %d has sequence %d", i, m.GetSequence())
		}
	}
}

// remoteErr is the error a remote-style reply carries; it fails the test
// when the reply is not a *commonv1.Error.
func remoteErr(tb testing.TB, reply any) error {
	tb.Helper()
	e, ok := reply.(*commonv1.Error)
	if !ok {
		tb.Fatalf("reply %T %v, want a *commonv1.Error", reply, reply)
	}
	return errs.FromProto(e)
}
