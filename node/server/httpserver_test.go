package server

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentstate/agentstate/actors/writer"
	"github.com/agentstate/agentstate/messages/errs"
	"github.com/agentstate/agentstate/persistence"
	"github.com/agentstate/agentstate/persistence/postgres"
	"github.com/agentstate/agentstate/persistence/postgres/pgtest"
	"github.com/agentstate/agentstate/persistence/sqlite"
	"github.com/asynkron/protoactor-go/actor"
)

func get(t *testing.T, h http.Handler, path string) (int, string) {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
	return rec.Code, rec.Body.String()
}

// TestReadyzFollowsTheNodesLife: 503 while starting, 200 once started and
// the database answers, 503 when the database does not, 503 once draining
// (whatever the database says); /healthz is 200 throughout.
func TestReadyzFollowsTheNodesLife(t *testing.T) {
	var dbErr error
	r := &readiness{probe: probeNotFound(func(context.Context) error { return dbErr })}
	m := newMetrics()
	h := newHTTPHandler(m, r)
	step := func(name string, want int, mention string) {
		t.Helper()
		code, body := get(t, h, "/readyz")
		if code != want || !strings.Contains(body, mention) {
			t.Fatalf("%s: /readyz = %d %q, want %d mentioning %q", name, code, body, want, mention)
		}
		if code, _ := get(t, h, "/healthz"); code != http.StatusOK {
			t.Fatalf("%s: /healthz = %d", name, code)
		}
	}
	step("starting", http.StatusServiceUnavailable, "starting")
	r.started.Store(true)
	dbErr = errs.NotFound("no such entry") // the probe's key never exists: the database answered
	step("started", http.StatusOK, "ready")
	dbErr = errs.Unavailable("disk I/O error")
	step("database failing", http.StatusServiceUnavailable, "disk I/O error")
	dbErr = nil
	r.draining.Store(true)
	step("draining", http.StatusServiceUnavailable, "draining")

	m.gauges(func() int { return 3 }, func() int64 { return 4096 }, func() int { return 2 }, func() int { return 1 })
	code, body := get(t, h, "/metrics")
	for _, want := range []string{"agentstate_audit_backlog 3", "agentstate_writer_backlog_bytes 4096", `agentstate_active_actors{kind="session"} 2`, `agentstate_active_actors{kind="plan"} 1`} {
		if code != http.StatusOK || !strings.Contains(body, want) {
			t.Errorf("/metrics (%d) lacks %q", code, want)
		}
	}
}

func TestDataURLCreatesTheDirectory(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "a", "b")
	url, err := dataURL(filepath.Join(dir, "x.db"), "FULL")
	if err != nil {
		t.Fatal(err)
	}
	if st, err := os.Stat(dir); err != nil || !st.IsDir() {
		t.Fatalf("directory not created: %v", err)
	}
	if !strings.HasSuffix(url, "x.db?synchronous=full") {
		t.Fatalf("url = %q", url)
	}
	if _, err := dataURL("x.db", "sometimes"); err == nil {
		t.Fatal("a bad --synchronous was accepted")
	}
	if url, _ := dataURL("memory:m", "normal"); url != "memory:m?synchronous=normal" {
		t.Fatalf("memory url = %q", url)
	}
}

// TestReadyzFollowsWrites: /readyz is 503, with the reason, from a
// transaction of the writer that rolled back until one commits; while it
// is so, a check starts a probe write (one at a time), whose commit makes
// the node ready again with no client writing. /healthz stays 200.
func TestReadyzFollowsWrites(t *testing.T) {
	r := &readiness{}
	r.started.Store(true)
	probes := make(chan chan error)
	reported := make(chan struct{})
	r.writes.probeWrite = func(context.Context) error {
		outcome := make(chan error)
		probes <- outcome
		err := <-outcome
		r.writes.committed(err) // as the writer's Observer reports it
		reported <- struct{}{}
		return err
	}
	obs := writeObserver{newMetrics(), &r.writes}
	h := newHTTPHandler(obs.metrics, r)
	readyz := func(name string, want int, mention string) {
		t.Helper()
		code, body := get(t, h, "/readyz")
		if code != want || !strings.Contains(body, mention) {
			t.Fatalf("%s: /readyz = %d %q, want %d mentioning %q", name, code, body, want, mention)
		}
		if code, _ := get(t, h, "/healthz"); code != http.StatusOK {
			t.Fatalf("%s: /healthz = %d, want 200 (liveness)", name, code)
		}
	}
	obs.BatchCommitted(3, 100, 0, nil)
	readyz("writes commit", http.StatusOK, "ready")

	obs.BatchCommitted(3, 100, 0, errs.ResourceExhausted("database or disk is full"))
	readyz("a transaction rolled back", http.StatusServiceUnavailable, "writes failing since")
	probe := <-probes // that check started a probe
	readyz("probe in flight", http.StatusServiceUnavailable, "disk is full")
	select {
	case <-probes:
		t.Fatal("a second probe started while one was in flight")
	default:
	}
	probe <- nil
	<-reported
	readyz("the probe committed", http.StatusOK, "ready")
	if got := counterValue(t, obs.commitErrors); got != 1 {
		t.Fatalf("commit errors counted %v, want 1 (the metrics still see every transaction)", got)
	}
}

// The node's probe write is a real transaction of the writer: it
// commits on a working store (each of them), and its commit reaches
// readiness through the writer's Observer, making a node whose writes had
// failed ready again.
func TestProbeWriteCommitsThroughTheWriter(t *testing.T) {
	t.Run("sqlite", func(t *testing.T) {
		st, err := sqlite.Open("memory:probe-write")
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		probeWriteMakesReady(t, st)
	})
	t.Run("postgres", func(t *testing.T) {
		dsn := pgtest.Database(t, "agentstate_node_")
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		st, err := postgres.Open(ctx, dsn)
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		probeWriteMakesReady(t, st)
	})
}

func probeWriteMakesReady(t *testing.T, st persistence.Store) {
	sys := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return quietLog() }))
	defer sys.Shutdown()
	r := &readiness{}
	r.started.Store(true)
	svc, err := writer.Start(sys, st, writer.Config{Observer: writeObserver{newMetrics(), &r.writes}, Logger: quietLog()})
	if err != nil {
		t.Fatal(err)
	}
	defer svc.Stop(context.Background())
	r.writes.committed(errs.ResourceExhausted("database or disk is full")) // as a failed transaction reports it
	if code, _ := r.check(context.Background()); code != http.StatusServiceUnavailable {
		t.Fatalf("readiness after a failed transaction = %d", code)
	}
	for i := 0; i < 2; i++ { // a second activation of the key commits too
		if err := probeWriteThrough(svc)(context.Background()); err != nil {
			t.Fatalf("probe write %d: %v", i, err)
		}
	}
	if code, body := r.check(context.Background()); code != http.StatusOK {
		t.Fatalf("readiness after the probe committed = %d %q", code, body)
	}
}
