package main

import (
	"context"
	"errors"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/agentstate/agentstate/messages/errs"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// readiness is what /readyz reports: ready once the node has started
// (database open and migrated, actors running, listeners bound), until it
// begins draining, and only while the database answers a read.
type readiness struct {
	started  atomic.Bool
	draining atomic.Bool
	// probe reads the database; nil when it answered.
	probe func(ctx context.Context) error
}

func (r *readiness) check(ctx context.Context) (int, string) {
	switch {
	case r.draining.Load():
		return http.StatusServiceUnavailable, "draining: not accepting new work"
	case !r.started.Load():
		return http.StatusServiceUnavailable, "starting"
	}
	if r.probe != nil {
		ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		if err := r.probe(ctx); err != nil {
			return http.StatusServiceUnavailable, "database not readable: " + err.Error()
		}
	}
	return http.StatusOK, "ready"
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

// newHTTPHandler serves /metrics, /healthz (the process is alive) and
// /readyz (see readiness).
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
