package bench

import (
	"fmt"
	"strings"
	"time"
)

// Mode names a system under test.
type Mode = string

// The modes Run knows.
const (
	// ModeInProcess calls the sessions service's Go API in this process.
	ModeInProcess Mode = "inprocess"
	// ModeGRPC calls the sessions service over gRPC the way the Go
	// client does, appending on AppendBatches streams (one per
	// connection, shared by the clients: the appends waiting when a
	// stream is free to send travel in one message): at Config.Addr, or,
	// when Addr is empty, at a server this run starts on loopback.
	ModeGRPC Mode = "grpc"
	// ModeGRPCStream is ModeGRPC with one AppendStream message per
	// append (each client one stream at a time).
	ModeGRPCStream Mode = "grpc-stream"
	// ModeGRPCUnary is ModeGRPC with one unary Append call per append.
	ModeGRPCUnary Mode = "grpc-unary"
	// ModeBaseline is the seed design: count-then-insert on pooled
	// database/sql (see baseline.go).
	ModeBaseline Mode = "baseline"
	// ModeRaw is the SQLite ceiling: the same rows inserted by one
	// goroutine in transactions of RawBatch rows.
	ModeRaw Mode = "raw"
	// ModeRawClosed is the same as ModeRaw with transactions of as many
	// rows as the workload has callers (append i to session i mod S):
	// the largest transaction C closed-loop callers can share when each
	// append is answered only after its commit, so the most any store
	// that commits before it answers can get from SQLite at that
	// concurrency.
	ModeRawClosed Mode = "raw-closed"
)

// Modes lists Run's modes in the order reports show them.
var Modes = []Mode{ModeInProcess, ModeGRPC, ModeGRPCStream, ModeGRPCUnary, ModeBaseline, ModeRaw, ModeRawClosed}

// Defaults of the zero Config fields: workload W1 (64 sessions, 64
// callers in total).
const (
	DefaultSessions     = 64
	DefaultCallers      = 64
	DefaultAppends      = 65536
	DefaultMessageBytes = 256
	DefaultSynchronous  = "full"
	// RawBatch is the number of rows per transaction of the raw ceiling.
	RawBatch = 1000
	// maxClients bounds the callers: each is a goroutine and, for the
	// baseline, a waiter on a pooled connection.
	maxClients = 1 << 16
	// maxSessions bounds Sessions (each is created before the run).
	maxSessions = 1 << 20
	// maxMessageBytes is the sessions service's default content limit.
	maxMessageBytes = 1 << 20
)

// Config is one measurement.
type Config struct {
	Mode Mode
	// Sessions is the number of sessions written to (S).
	Sessions int
	// Callers is the number of concurrent callers in total (C), each a
	// closed loop with one append outstanding. Caller c's j-th append is
	// append i = c + j·C of the run and goes to session i mod S — except
	// for a PerClient target, whose caller c stays on session c mod S.
	Callers int
	// Clients is the older way to say Callers: concurrent callers per
	// session (Callers = Sessions × Clients). Ignored when Callers is set.
	Clients int
	// Appends is the total number of messages appended, spread evenly over
	// the callers.
	Appends int
	// Name labels the results (a Workload's name); optional.
	Name string
	// NewSessions makes every append go to a session its caller creates
	// just before it, in the timed window: the cost of a new session's
	// create plus first append. Sessions is then Appends.
	NewSessions bool
	// IdleTimeout passivates an in-process (or served) node's session
	// actors idle this long; 0 is the node's default. Short, it puts
	// activation and passivation on the path (workload W4).
	IdleTimeout time.Duration
	// MessageBytes is each message's content size.
	MessageBytes int
	// Synchronous is SQLite's durability: "full" (fsync per commit, the
	// default) or "normal". Ignored by grpc against a remote Addr (the
	// node decides).
	Synchronous string
	// Addr is a node's gRPC address for the gRPC modes;
	// empty starts one: with Serve, a process of its own, else a server in
	// this process.
	Addr string
	// Serve, when set, is the command line of `node serve` (program and
	// arguments); a gRPC mode without Addr starts it with a fresh
	// database, a loopback port and the run's durability, and adds its CPU
	// time to CPUPerAppend.
	Serve []string
	// ServeArgs are added to Serve's arguments (an authenticated node:
	// --auth-token-file or --auth-file); --log-level and --log-format are
	// the run's (the node's serving line is its readiness).
	ServeArgs []string
	// Token, when set, is presented as the bearer credential on every
	// gRPC connection.
	Token string
	// Postgres, when set, is a PostgreSQL server's postgres:// URL (of a
	// role that may create databases): the run measures the PostgreSQL
	// store instead of SQLite, on a database of its own created for the
	// run and dropped after it, and raw and raw-closed are PostgreSQL's
	// ceiling (raw_pg.go). Synchronous is then the server's (fsync and
	// synchronous_commit, as reported); baseline has no PostgreSQL variant.
	Postgres string
	// dbCPU, when set, reads the CPU time of the PostgreSQL backends of
	// the run's database (Result.DBCPUPerAppend).
	dbCPU func() time.Duration
	// DataDir holds the databases this run creates; empty means a
	// temporary directory removed afterwards.
	DataDir string
	// Progress, when set, is called from one goroutine about every
	// ProgressInterval and once at the end with the number of appends
	// answered so far (failed ones included) and the total.
	Progress func(done, total int)
}

func (c Config) withDefaults() Config {
	if c.Sessions == 0 {
		c.Sessions = DefaultSessions
	}
	if c.Callers == 0 && c.Clients > 0 {
		c.Callers = c.Sessions * c.Clients
	}
	if c.Callers == 0 {
		c.Callers = DefaultCallers
	}
	if c.NewSessions {
		c.Sessions = c.Appends
	}
	if c.Appends == 0 {
		c.Appends = DefaultAppends
	}
	if c.MessageBytes == 0 {
		c.MessageBytes = DefaultMessageBytes
	}
	c.Synchronous = strings.ToLower(c.Synchronous)
	if c.Synchronous == "" {
		c.Synchronous = DefaultSynchronous
	}
	return c
}

func (c Config) validate() error {
	switch {
	case c.Sessions < 1 || c.Callers < 1:
		return fmt.Errorf("bench: sessions and callers must be ≥ 1 (got S=%d, C=%d)", c.Sessions, c.Callers)
	case c.Callers > maxClients || c.Sessions > maxSessions:
		return fmt.Errorf("bench: S=%d, C=%d; at most %d sessions and %d callers", c.Sessions, c.Callers, maxSessions, maxClients)
	case c.Appends < 1:
		return fmt.Errorf("bench: appends must be ≥ 1 (got %d)", c.Appends)
	case c.MessageBytes < 1 || c.MessageBytes > maxMessageBytes:
		return fmt.Errorf("bench: message bytes must be 1..%d (got %d)", maxMessageBytes, c.MessageBytes)
	case c.Synchronous != "full" && c.Synchronous != "normal":
		return fmt.Errorf("bench: synchronous %q; want full or normal", c.Synchronous)
	}
	return nil
}

// ParseModes splits a comma-separated mode list and checks each name.
func ParseModes(list string) ([]Mode, error) {
	var out []Mode
	for _, m := range strings.Split(list, ",") {
		m = strings.TrimSpace(strings.ToLower(m))
		if m == "" {
			continue
		}
		known := false
		for _, k := range Modes {
			known = known || k == m
		}
		if !known {
			return nil, fmt.Errorf("bench: unknown mode %q (known: %s)", m, strings.Join(Modes, ", "))
		}
		out = append(out, m)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("bench: no mode given (known: %s)", strings.Join(Modes, ", "))
	}
	return out, nil
}

// Workload is one of the named workloads of issue 17: S sessions, C
// callers in total, append i to session i mod S.
type Workload struct {
	Name     string
	Sessions int
	Callers  int
	// NewSessions: see Config.NewSessions (Sessions is then the appends).
	NewSessions bool
	// IdleTimeout, when set, is the node's passivation for this workload.
	IdleTimeout time.Duration
	About       string
}

// ColdIdleTimeout is W4's passivation: far shorter than the time between
// two appends to one of its 10,000 sessions, so most appends find their
// session passivated and activate it again.
const ColdIdleTimeout = 100 * time.Millisecond

// Workloads are the named workloads, in report order.
var Workloads = []Workload{
	{Name: "W1", Sessions: 64, Callers: 64, About: "64 agents, one session each"},
	{Name: "W2", Sessions: 1, Callers: 16, About: "16 callers on one session"},
	{Name: "W3", Sessions: 1024, Callers: 256, About: "256 callers over 1,024 sessions"},
	{Name: "W4", Sessions: 10000, Callers: 64, IdleTimeout: ColdIdleTimeout,
		About: "64 callers over 10,000 sessions, most of them passivated (cold)"},
	{Name: "4096", Sessions: 64, Callers: 4096, About: "the older S=64×C=64: 64 senders on each of 64 sessions"},
	{Name: "new", Callers: 64, NewSessions: true, About: "64 callers, each creating a session and appending its first message"},
}

// ParseWorkloads splits a comma-separated list of workload names.
func ParseWorkloads(list string) ([]Workload, error) {
	var out []Workload
	for _, n := range strings.Split(list, ",") {
		n = strings.TrimSpace(n)
		if n == "" {
			continue
		}
		found := false
		for _, w := range Workloads {
			if strings.EqualFold(w.Name, n) {
				out, found = append(out, w), true
			}
		}
		if !found {
			var names []string
			for _, w := range Workloads {
				names = append(names, w.Name)
			}
			return nil, fmt.Errorf("bench: unknown workload %q (known: %s)", n, strings.Join(names, ", "))
		}
	}
	return out, nil
}
