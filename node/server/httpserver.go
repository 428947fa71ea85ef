package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agentstate/agentstate/actors/writer"
	"github.com/agentstate/agentstate/messages/errs"
	"github.com/agentstate/agentstate/persistence"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// readiness is what /readyz reports: ready once the node has started
// (database open and migrated, actors running, listeners bound), until it
// begins draining, only while the database answers a read, and only while
// writes commit: from a transaction of the writer that rolled back
// until one commits again (writes), since a node whose every write fails
// (a full disk, a read-only file, a store that refuses them) must be taken
// out of rotation even though it still reads.
type readiness struct {
	started  atomic.Bool
	draining atomic.Bool
	// probe reads the database; nil when it answered.
	probe  func(ctx context.Context) error
	writes writeHealth
	// split, when set, says why this cluster member is cut off from
	// peers that are up (see watchSplit).
	split atomic.Pointer[string]
	// membership, when set, says why this cluster member should take no
	// new work ("" when none: placement.Member.Membership).
	membership func() string
}

func (r *readiness) check(ctx context.Context) (int, string) {
	switch {
	case r.draining.Load():
		return http.StatusServiceUnavailable, "draining: not accepting new work"
	case !r.started.Load():
		return http.StatusServiceUnavailable, "starting"
	}
	if why := r.split.Load(); why != nil {
		return http.StatusServiceUnavailable, *why
	}
	if r.membership != nil {
		if why := r.membership(); why != "" {
			return http.StatusServiceUnavailable, why
		}
	}
	if r.probe != nil {
		ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		if err := r.probe(ctx); err != nil {
			return http.StatusServiceUnavailable, "database not readable: " + err.Error()
		}
	}
	if since, err := r.writes.failure(); err != nil {
		return http.StatusServiceUnavailable, fmt.Sprintf("writes failing since %s: %v",
			since.UTC().Format(time.RFC3339), err)
	}
	return http.StatusOK, "ready"
}

// writeHealth is the outcome of the writer's latest transaction.
//
// A node out of rotation gets no writes, so while writes fail each check
// of readiness starts a probe write (one at a time, through the writer,
// a real commit), whose success makes the node ready again without any
// client writing to it.
type writeHealth struct {
	mu      sync.Mutex
	err     error     // the latest transaction's error; nil once one commits
	since   time.Time // when the current run of failures began
	probing atomic.Bool
	// probeWrite commits a write that changes nothing a client sees;
	// nil: no probe.
	probeWrite func(ctx context.Context) error
}

// committed records a transaction's outcome (nil: it committed).
func (w *writeHealth) committed(err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if err != nil && w.err == nil {
		w.since = time.Now()
	}
	w.err = err
}

// failure returns when the failing writes began failing and their error
// (nil when the latest transaction committed), starting a probe write
// when they fail.
func (w *writeHealth) failure() (time.Time, error) {
	w.mu.Lock()
	err, since := w.err, w.since
	w.mu.Unlock()
	if err != nil && w.probeWrite != nil && w.probing.CompareAndSwap(false, true) {
		go func() {
			defer w.probing.Store(false)
			ctx, cancel := context.WithTimeout(context.Background(), probeWriteTimeout)
			defer cancel()
			// Its outcome reaches committed like any transaction's.
			_ = w.probeWrite(ctx)
		}()
	}
	return since, err
}

// probeWriteTimeout bounds a probe write's wait, which includes the
// writer's back-off between failed transactions.
const probeWriteTimeout = 30 * time.Second

// probeKey is the session id the probe write activates: not a ULID, so
// no session has it.
const probeKey = "readiness-probe"

// probeWriteThrough is the probe write through the writer: a new
// fencing epoch for probeKey, a real write and commit that no client reads.
func probeWriteThrough(w *writer.Writer) func(ctx context.Context) error {
	return func(ctx context.Context) error {
		_, err := w.Apply(ctx, &persistence.Activate{Kind: persistence.OwnerSession, ID: probeKey})
		return err
	}
}

// writeObserver is the writer's Observer: the metrics, and each
// transaction's outcome for readiness.
type writeObserver struct {
	*metrics
	writes *writeHealth
}

func (o writeObserver) BatchCommitted(commands, bytes int, dur time.Duration, err error) {
	o.metrics.BatchCommitted(commands, bytes, dur, err)
	o.writes.committed(err)
}

// probeNotFound turns a lookup of a key that never exists into a
// readiness probe: NOT_FOUND means the database answered.
func probeNotFound(lookup func(ctx context.Context) error) func(ctx context.Context) error {
	return func(ctx context.Context) error {
		err := lookup(ctx)
		if err == nil || errors.Is(err, errs.ErrNotFound) {
			return nil
		}
		return err
	}
}

// newHTTPHandler serves /metrics, /healthz and /readyz (see readiness).
// /healthz is liveness: the process runs and serves HTTP. It stays 200
// while writes fail: a restart frees no disk and makes no file writable,
// and a node that restarts in a loop serves not even its reads.
func newHTTPHandler(m *metrics, ready *readiness) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{Registry: m.reg}))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = w.Write([]byte("ok\n"))
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, req *http.Request) {
		code, msg := ready.check(req.Context())
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.WriteHeader(code)
		_, _ = w.Write([]byte(msg + "\n"))
	})
	return mux
}
