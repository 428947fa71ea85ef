// Package audittest holds the helpers shared by the tests that write
// through the writer (actors/writer) with the audit trail as their source
// of commands: the audit package's own tests and the writer's. It starts
// both on a file database, holds or fails the store's transactions on
// demand, and records what the writer reports.
package audittest

import (
	"context"
	"io"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/agentstate/agentstate/actors/audit"
	"github.com/agentstate/agentstate/actors/writer"
	auditv1 "github.com/agentstate/agentstate/messages/agentstate/audit/v1"
	"github.com/agentstate/agentstate/persistence"
	"github.com/agentstate/agentstate/persistence/sqlite"
	"github.com/asynkron/protoactor-go/actor"
)

// Quiet discards what the actors log.
var Quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// NewSystem is an actor system that logs nothing, shut down at cleanup.
func NewSystem(tb testing.TB) *actor.ActorSystem {
	tb.Helper()
	sys := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return Quiet }))
	tb.Cleanup(sys.Shutdown)
	return sys
}

// OpenFile opens a fresh file database (WAL, synchronous=FULL unless the
// query says otherwise) in a temporary directory.
func OpenFile(tb testing.TB, query string) (*sqlite.Store, string) {
	tb.Helper()
	path := filepath.Join(tb.TempDir(), "audit.db")
	st, err := sqlite.Open(path + query)
	if err != nil {
		tb.Fatalf("open %s: %v", path, err)
	}
	tb.Cleanup(func() { st.Close() })
	return st, path
}

// Start starts the writer and the audit service on store; the writer's
// Stop runs at cleanup, before the store closes and the system shuts down.
func Start(tb testing.TB, sys *actor.ActorSystem, store persistence.Store, cfg writer.Config, acfg ...audit.Config) *audit.Service {
	tb.Helper()
	svc, err := StartErr(sys, store, cfg, acfg...)
	if err != nil {
		tb.Fatalf("start: %v", err)
	}
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		svc.Writer().Stop(ctx)
	})
	return svc
}

// StartErr starts the writer and the audit service on store, with no
// cleanup: the caller stops the writer.
func StartErr(sys *actor.ActorSystem, store persistence.Store, cfg writer.Config, acfg ...audit.Config) (*audit.Service, error) {
	if cfg.Logger == nil {
		cfg.Logger = Quiet
	}
	w, err := writer.Start(sys, store, cfg)
	if err != nil {
		return nil, err
	}
	var ac audit.Config
	if len(acfg) > 0 {
		ac = acfg[0]
	}
	svc, err := audit.Start(sys, w, store.Reader(), ac)
	if err != nil {
		w.Stop(context.Background())
		return nil, err
	}
	return svc, nil
}

// ListAll pages through every entry matching f.
func ListAll(tb testing.TB, svc *audit.Service, f *auditv1.Filter) []*auditv1.AuditEntry {
	tb.Helper()
	var out []*auditv1.AuditEntry
	cursor := ""
	for {
		resp, err := svc.List(context.Background(), &auditv1.ListRequest{Filter: f, AfterEventId: cursor, Limit: audit.MaxListLimit})
		if err != nil {
			tb.Fatalf("list after %q: %v", cursor, err)
		}
		out = append(out, resp.Entries...)
		if resp.NextCursor == "" {
			return out
		}
		cursor = resp.NextCursor
	}
}

// Record records req and returns the entry it was answered with.
func Record(tb testing.TB, svc *audit.Service, req *auditv1.RecordRequest) *auditv1.AuditEntry {
	tb.Helper()
	resp, err := svc.Record(context.Background(), req)
	if err != nil {
		tb.Fatalf("record %v: %v", req, err)
	}
	return resp.Entry
}

// MustVerify fails the test unless the stored chain verifies.
func MustVerify(tb testing.TB, svc *audit.Service) *auditv1.VerifyResponse {
	tb.Helper()
	v, err := svc.Verify(context.Background(), &auditv1.VerifyRequest{})
	if err != nil {
		tb.Fatalf("verify: %v", err)
	}
	if !v.Ok {
		tb.Fatalf("verify: chain broken at %s after %d entries: %s", v.FirstBrokenEventId, v.EntriesChecked, v.Reason)
	}
	return v
}
