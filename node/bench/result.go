package bench

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"time"
)

// Result is one measurement. Durations are nanoseconds in JSON.
//
// Invariant: Complete is true exactly when Missing, Duplicates, Gaps,
// OutOfOrder and Misplaced are all zero — every acknowledged message is
// stored, at the position it was acknowledged with, each session's
// positions are 0..n-1 without a repeat or hole, and a message answered
// before another was sent is stored before it (acknowledgement order).
type Result struct {
	Mode     Mode `json:"mode"`
	Sessions int  `json:"sessions"`
	// Callers is C, the concurrent callers in total. Results written
	// before it existed have only Clients, callers per session.
	Callers int `json:"callers,omitempty"`
	// Clients is callers per session when the run was configured so
	// (Config.Clients), else 0.
	Clients int `json:"clients"`
	// Name is the workload's name (W1…W4, 4096, new) when it was run as one.
	Name string `json:"workload_name,omitempty"`
	// NewSessions: each append went to a session created just before it,
	// and an append's figures (rate, latency, CPU) are its create's plus
	// its own (Config.NewSessions).
	NewSessions  bool   `json:"new_sessions,omitempty"`
	MessageBytes int    `json:"message_bytes"`
	Synchronous  string `json:"synchronous"`

	// Appends is the number of acknowledged appends; Errors the appends
	// that failed for good, Retries the extra attempts made on the way.
	Appends int `json:"appends"`
	Errors  int `json:"errors"`
	Retries int `json:"retries"`
	// FirstError is the first failure's text, for the report.
	FirstError string `json:"first_error,omitempty"`

	Duration      time.Duration `json:"duration_ns"`
	AppendsPerSec float64       `json:"appends_per_sec"`
	// Latency of one acknowledged append, attempts included; zero for raw
	// (which has no per-append answer).
	P50  time.Duration `json:"p50_ns"`
	P99  time.Duration `json:"p99_ns"`
	P999 time.Duration `json:"p999_ns"`
	// CPUPerAppend is the process's CPU time (user + system, every
	// goroutine: clients, server, actors, SQLite) in the timed window per
	// acknowledged append. Unlike the rate it hardly depends on what else
	// the machine runs.
	CPUPerAppend time.Duration `json:"cpu_per_append_ns"`
	// DBCPUPerAppend is, on PostgreSQL, the CPU time the server's backends
	// of the run's database used in the timed window per acknowledged
	// append (pg_cpu.go); 0 when unknown (SQLite, or a server elsewhere).
	DBCPUPerAppend time.Duration `json:"db_cpu_per_append_ns,omitempty"`
	// MeanBatch is appends per committed transaction, when the system
	// reports its commits; 0 when unknown.
	MeanBatch float64 `json:"mean_batch,omitempty"`
	// WriterBusy is the share of the timed window in which the store's
	// single writer was applying a transaction (0 when unknown). Near 1
	// the writer is the bottleneck; well below, what feeds it is.
	WriterBusy float64 `json:"writer_busy,omitempty"`

	// Verification after the run.
	Stored     int  `json:"stored"`
	Missing    int  `json:"missing"`
	Duplicates int  `json:"duplicates"`
	Gaps       int  `json:"gaps"`
	OutOfOrder int  `json:"out_of_order"`
	Misplaced  int  `json:"misplaced"`
	Unacked    int  `json:"unacked"`
	Complete   bool `json:"complete"`
}

// Workload names a result's shape, e.g. "W1 S=64×C=64" (C: callers in
// total).
func (r Result) Workload() string {
	w := workload(r.Sessions, r.TotalCallers())
	if r.NewSessions {
		w = fmt.Sprintf("S=new×C=%d", r.TotalCallers())
	}
	if r.Name != "" {
		w = r.Name + " " + w
	}
	return w
}

// OnPostgres reports whether the result was measured on PostgreSQL
// (Config.Postgres): its durability then names the server's settings.
func (r Result) OnPostgres() bool { return strings.HasPrefix(r.Synchronous, pgDurabilityPrefix) }

// TotalCallers is C, also for results that recorded callers per session.
func (r Result) TotalCallers() int {
	if r.Callers > 0 {
		return r.Callers
	}
	return r.Sessions * r.Clients
}

func newResult(cfg Config) Result {
	return Result{Mode: cfg.Mode, Name: cfg.Name, Sessions: cfg.Sessions, Callers: cfg.Callers, Clients: cfg.Clients,
		NewSessions: cfg.NewSessions, MessageBytes: cfg.MessageBytes, Synchronous: cfg.Synchronous}
}

// percentiles fills P50, P99 and P999 (nearest rank) and sorts lat.
func (r *Result) percentiles(lat []time.Duration) {
	if len(lat) == 0 {
		return
	}
	slices.Sort(lat)
	rank := func(q float64) time.Duration {
		i := int(math.Ceil(q*float64(len(lat)))) - 1
		return lat[max(0, min(i, len(lat)-1))]
	}
	r.P50, r.P99, r.P999 = rank(0.50), rank(0.99), rank(0.999)
}

// rate fills AppendsPerSec and, given the CPU time the window used,
// CPUPerAppend.
func (r *Result) rate(cpu time.Duration) {
	if r.Duration > 0 {
		r.AppendsPerSec = float64(r.Appends) / r.Duration.Seconds()
	}
	if r.Appends > 0 {
		r.CPUPerAppend = cpu / time.Duration(r.Appends)
	}
}
