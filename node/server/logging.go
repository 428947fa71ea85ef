package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"
)

// newLogger makes the node's slog logger: format "text" or "json", level
// "debug", "info", "warn" or "error", written to w.
func NewLogger(w io.Writer, format, level string) (*slog.Logger, error) {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("--log-level %q: want debug, info, warn or error", level)
	}
	opts := &slog.HandlerOptions{Level: lv}
	switch strings.ToLower(format) {
	case "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	default:
		return nil, fmt.Errorf("--log-format %q: want text or json", format)
	}
}

// minLevel drops records below min: Proto.Actor logs every remote
// connection at INFO, which is noise at the node's INFO.
type minLevel struct {
	slog.Handler
	min slog.Level
}

func (h minLevel) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= h.min && h.Handler.Enabled(ctx, l)
}

func (h minLevel) WithAttrs(as []slog.Attr) slog.Handler {
	return minLevel{Handler: h.Handler.WithAttrs(as), min: h.min}
}

func (h minLevel) WithGroup(name string) slog.Handler {
	return minLevel{Handler: h.Handler.WithGroup(name), min: h.min}
}

// libraryLogger is the logger Proto.Actor (actor system, remote, cluster,
// automanaged provider) logs through: the node's handler (stderr, the
// chosen format), tagged component=protoactor, its INFO chatter (every
// connection, every topology hash) kept for --log-level debug, and its
// records re-levelled (libraryLevels).
func libraryLogger(log *slog.Logger) *slog.Logger {
	h := log.Handler()
	if !log.Enabled(context.Background(), slog.LevelDebug) {
		h = minLevel{Handler: h, min: slog.LevelWarn}
	}
	return slog.New(libraryLevels{Handler: h, repeats: &peerRepeats{last: map[string]time.Time{}}}).With("component", "protoactor")
}

// libraryLevels corrects the levels of the library's records: it logs
// normal cluster events as ERROR. A peer that does not answer its health
// poll or its remote (it is starting, restarting or gone: the topology
// handles it) is a WARN, once a minute per peer and message (the provider
// polls twice a second; the repeats are DEBUG); the provider's HTTP server
// closing at shutdown is INFO. Everything else keeps its level.
type libraryLevels struct {
	slog.Handler
	repeats *peerRepeats
}

// peerRepeatEvery is how often one peer's trouble is repeated at WARN.
const peerRepeatEvery = time.Minute

// peerRepeats remembers when each peer trouble was last logged at WARN.
type peerRepeats struct {
	mu   sync.Mutex
	last map[string]time.Time // message and peer -> last WARN
}

// warn says whether the trouble named key is due a WARN at now.
func (p *peerRepeats) warn(key string, now time.Time) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if t, ok := p.last[key]; ok && now.Sub(t) < peerRepeatEvery {
		return false
	}
	p.last[key] = now
	return true
}

// peerTrouble are the library's ERROR messages about a peer being
// unreachable.
var peerTrouble = map[string]bool{
	"Failure reaching nodes":                         true,
	"Couldn't request node health status":            true,
	"Bad connection to the node health status":       true,
	"Bad response from the node health status":       true,
	"Bad data from the node health status":           true,
	"EndpointWriter failed to connect":               true,
	"EndpointWriter lost connection":                 true,
	"EndpointWriter failed to create receive stream": true,
	"cluster.RequestFuture failed":                   true, // retried by the library, then by the Router
}

func (h libraryLevels) Handle(ctx context.Context, r slog.Record) error {
	if lv, ok := libraryLevel(r); ok && lv != r.Level {
		if lv == slog.LevelWarn && !h.repeats.warn(peerKey(r), r.Time) {
			lv = slog.LevelDebug
		}
		r.Level = lv
		if !h.Handler.Enabled(ctx, lv) {
			return nil
		}
	}
	return h.Handler.Handle(ctx, r)
}

// peerKey names a peer trouble: its message and the peer's address.
func peerKey(r slog.Record) string {
	key := r.Message
	r.Attrs(func(a slog.Attr) bool {
		switch a.Key {
		case "autoManMemberUrl", "address", "pid":
			key += " " + a.Value.String()
		}
		return true
	})
	return key
}

func libraryLevel(r slog.Record) (slog.Level, bool) {
	if r.Level != slog.LevelError {
		return 0, false
	}
	if peerTrouble[r.Message] {
		return slog.LevelWarn, true
	}
	if r.Message == "Automanaged server stopping..!" {
		closed := false
		r.Attrs(func(a slog.Attr) bool {
			if err, ok := a.Value.Any().(error); ok && errors.Is(err, http.ErrServerClosed) {
				closed = true
			}
			return !closed
		})
		if closed {
			return slog.LevelInfo, true
		}
	}
	return 0, false
}

func (h libraryLevels) WithAttrs(as []slog.Attr) slog.Handler {
	return libraryLevels{Handler: h.Handler.WithAttrs(as), repeats: h.repeats}
}

func (h libraryLevels) WithGroup(name string) slog.Handler {
	return libraryLevels{Handler: h.Handler.WithGroup(name), repeats: h.repeats}
}
