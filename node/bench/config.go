package bench

import (
	"fmt"
	"strings"
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
)

// Modes lists Run's modes in the order reports show them.
var Modes = []Mode{ModeInProcess, ModeGRPC, ModeGRPCStream, ModeGRPCUnary, ModeBaseline, ModeRaw}

// Defaults of the zero Config fields: the S=64×C=64 workload.
const (
	DefaultSessions     = 64
	DefaultClients      = 64
	DefaultAppends      = 65536
	DefaultMessageBytes = 256
	DefaultSynchronous  = "full"
	// RawBatch is the number of rows per transaction of the raw ceiling.
	RawBatch = 1000
	// maxClients bounds Sessions×Clients: each client is a goroutine and,
	// for the baseline, a waiter on a pooled connection.
	maxClients = 1 << 16
	// maxMessageBytes is the sessions service's default content limit.
	maxMessageBytes = 1 << 20
)

// Config is one measurement.
type Config struct {
	Mode Mode
	// Sessions is the number of sessions written to.
	Sessions int
	// Clients is the number of concurrent clients per session.
	Clients int
	// Appends is the total number of messages appended, spread evenly over
	// the Sessions×Clients clients.
	Appends int
	// MessageBytes is each message's content size.
	MessageBytes int
	// Synchronous is SQLite's durability: "full" (fsync per commit, the
	// default) or "normal". Ignored by grpc against a remote Addr (the
	// node decides).
	Synchronous string
	// Addr is a node's gRPC address for the gRPC modes;
	// empty starts one here.
	Addr string
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
	if c.Clients == 0 {
		c.Clients = DefaultClients
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
	case c.Sessions < 1 || c.Clients < 1:
		return fmt.Errorf("bench: sessions and clients must be ≥ 1 (got %d×%d)", c.Sessions, c.Clients)
	case c.Sessions*c.Clients > maxClients:
		return fmt.Errorf("bench: sessions×clients = %d; at most %d", c.Sessions*c.Clients, maxClients)
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
