package server

import (
	"log/slog"
	"sync"
	"time"
)

// warnLimiter writes the WARN lines of one kind of event (a refused gRPC
// call, a dropped remote envelope) at a bounded rate: at most burst lines
// per window; the lines beyond are counted, and once the window ends one
// line says how many were suppressed. A flood of hostile requests costs
// the log a few lines a second instead of one line per request, and the
// counts stay exact (the metrics count every event as well).
type warnLimiter struct {
	log    *slog.Logger
	msg    string
	window time.Duration
	burst  int

	mu         sync.Mutex
	windowEnd  time.Time
	written    int
	suppressed int64
	timer      *time.Timer // pending summary of this window, if any
}

// Default rate of each kind of WARN line: 5 per second, then a summary.
const (
	warnWindow = time.Second
	warnBurst  = 5
)

func newWarnLimiter(log *slog.Logger, msg string, window time.Duration, burst int) *warnLimiter {
	return &warnLimiter{log: log, msg: msg, window: window, burst: burst}
}

// Warn logs the limiter's message with args, unless this window's burst is
// spent; then it counts the line for the window's summary.
func (l *warnLimiter) Warn(args ...any) {
	now := time.Now()
	l.mu.Lock()
	if now.After(l.windowEnd) {
		l.windowEnd, l.written = now.Add(l.window), 0
	}
	if l.written < l.burst {
		l.written++
		l.mu.Unlock()
		l.log.Warn(l.msg, args...)
		return
	}
	l.suppressed++
	if l.timer == nil {
		l.timer = time.AfterFunc(l.windowEnd.Sub(now), l.summarize)
	}
	l.mu.Unlock()
}

// summarize writes the count of the lines suppressed in the window that
// just ended.
func (l *warnLimiter) summarize() {
	l.mu.Lock()
	n := l.suppressed
	l.suppressed, l.timer = 0, nil
	l.mu.Unlock()
	if n > 0 {
		l.log.Warn(l.msg+" (repeats suppressed)", "suppressed", n, "window", l.window)
	}
}
