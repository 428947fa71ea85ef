package server

import "time"

// Config is a node's settings: the flags of node serve, which binds each to
// a field (see cmd/node), or a program that embeds the node.
type Config struct {
	// Data is the database: a SQLite file, memory:NAME, or a postgres://
	// DSN; Synchronous is SQLite's commit durability (full or normal).
	Data, Synchronous string
	// GRPCAddr and HTTPAddr are the listen addresses of the gRPC API and
	// of /metrics, /healthz and /readyz ("" disables HTTP).
	GRPCAddr, HTTPAddr string
	// TLSCert and TLSKey serve the gRPC API over TLS; TokenFile holds the
	// bearer token every request must present.
	TLSCert, TLSKey, TokenFile string
	// RemoteAddr ("" = off) and RemoteAdvertise are the Proto.Actor remote
	// endpoint's; RemoteCert, RemoteKey and RemoteCA its mutual TLS.
	RemoteAddr, RemoteAdvertise string
	RemoteCert, RemoteKey       string
	RemoteCA                    string
	// RemoteInsecureLoopback lets the remote endpoint or the cluster run
	// without mutual TLS on a loopback address (InsecureRemoteFlag; tests
	// only). Without it, and without mutual TLS, they refuse to start.
	RemoteInsecureLoopback bool
	// MaxRecvBytes is the largest request accepted (gRPC and remote).
	MaxRecvBytes int
	// ShutdownTimeout bounds each shutdown phase; IdleTimeout passivates
	// idle owners (0: the default; negative: never).
	ShutdownTimeout, IdleTimeout time.Duration
	// Backlog and BacklogBytes bound what the writer has pending (in
	// commands and in bytes), BatchCommands and BatchBytes one of its
	// transactions (0: defaults).
	Backlog                   int
	BacklogBytes              int64
	BatchCommands, BatchBytes int
	AuditMessages             bool
	LogFormat, LogLevel       string
	ClusterName, Peers        string
	AMPort                    int
	ClusterWait               time.Duration
	// FeedPollInterval is how often the live feeds read the store for
	// commits of other nodes: 0 = DefaultFeedPollPostgres on PostgreSQL,
	// none on SQLite; negative = never.
	FeedPollInterval time.Duration
}

// DefaultConfig is the settings of `node serve` without flags: a SQLite
// file under ./data, both listeners on loopback, 4 MiB requests, a 30 s
// drain per shutdown phase. A program that embeds a node starts from it.
func DefaultConfig() *Config {
	return &Config{
		Data:            "./data/agentstate.db",
		Synchronous:     "full",
		GRPCAddr:        "127.0.0.1:7420",
		HTTPAddr:        "127.0.0.1:7421",
		MaxRecvBytes:    4 << 20,
		ShutdownTimeout: 30 * time.Second,
		LogFormat:       "text",
		LogLevel:        "info",
		ClusterWait:     15 * time.Second,
	}
}
