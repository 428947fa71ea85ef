package server

import (
	"fmt"
	"time"

	"github.com/agentstate/agentstate/node/appendstream"
	"github.com/agentstate/agentstate/node/feedstream"
)

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
	// bearer token every request must present (one principal with every
	// grant). AuthFile is the identities file instead (principals, their
	// credentials and grants; docs/OPERATIONS.md, Tenants); TLSClientCA
	// verifies the client certificates its principals present.
	TLSCert, TLSKey, TokenFile string
	AuthFile, TLSClientCA      string
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
	// MaxLiveActors bounds the session actors, and the plan actors, live
	// at once (0: directory.DefaultMaxOwners; negative: unbounded).
	MaxLiveActors int
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
	// GRPCAdvertise is the address clients reach this member's gRPC API
	// at (host:port), which a cluster member publishes to the others so
	// that they name it to clients whose sessions it owns
	// (sessionv1.OwnerHeader). Empty: the bound --grpc-addr, an
	// unspecified host replaced by the remote's advertised host.
	GRPCAdvertise string
	// Membership is how cluster members find each other: "automanaged"
	// (Peers and AMPort; the default when Peers is set) or "etcd" (the
	// Etcd* settings: servers, key prefix, TLS to them, credentials).
	Membership                         string
	EtcdEndpoints, EtcdPrefix          string
	EtcdTLSCA, EtcdTLSCert, EtcdTLSKey string
	EtcdUsername, EtcdPasswordFile     string
	// The gRPC server's limits (docs/OPERATIONS.md, Limits; 0: the
	// defaults): concurrent streams per connection, connections at once
	// (fitted to the open-file limit), how long a connection without
	// streams stays open, and how often a client may ping.
	GRPCMaxStreams, GRPCMaxConnections int
	GRPCIdleTimeout                    time.Duration
	GRPCKeepaliveMinTime               time.Duration
	// GRPCRequestBytes bounds the unary requests being decoded and
	// served at once, each counted twice its encoded size (0:
	// DefaultGRPCRequestBytes); past it a request is refused
	// RESOURCE_EXHAUSTED before it is decoded.
	GRPCRequestBytes int64
	// GRPCShareRate is the work per second (bytes, plus
	// fairshare.OpCost per operation) apportioned among the principals
	// using the node at once: each is held to an equal share of it while
	// another is active (fairshare.Pacer). 0: fairshare.DefaultRate.
	GRPCShareRate int64
	// GRPCMaxStreamsTotal bounds the gRPC streams open on all connections
	// together (0: DefaultGRPCMaxStreamsTotal); past it a stream is
	// refused RESOURCE_EXHAUSTED on its headers.
	GRPCMaxStreamsTotal int
	// What one AppendBatches stream may hold (0: the defaults of
	// appendstream.Limits): appends and bytes of requests in flight, and
	// how long a send of its outcomes may stay blocked (the client does
	// not read) before the stream ends.
	StreamMaxAppends  int
	StreamMaxBytes    int64
	StreamSendTimeout time.Duration
	// What all AppendBatches streams together may have being served (0:
	// appendstream's defaults): appends and bytes of requests.
	StreamTotalAppends int
	StreamTotalBytes   int64
	// FeedPollInterval is how often the live feeds read the store for
	// commits of other nodes: 0 = DefaultFeedPollPostgres on PostgreSQL,
	// none on SQLite; negative = never.
	FeedPollInterval time.Duration
	// What the gRPC feed streams may hold (0: feedstream's defaults): in
	// bytes, node-wide and per client connection, and how long a tail's
	// sent events may stay unread before it ends.
	FeedBytes, FeedConnBytes int64
	FeedStallTimeout         time.Duration
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

		GRPCMaxStreams:       DefaultGRPCMaxStreams,
		GRPCIdleTimeout:      DefaultGRPCIdleTimeout,
		GRPCKeepaliveMinTime: DefaultGRPCKeepaliveMinTime,
		GRPCRequestBytes:     DefaultGRPCRequestBytes,
		GRPCMaxStreamsTotal:  DefaultGRPCMaxStreamsTotal,
		StreamMaxAppends:     appendstream.DefaultMaxAppends,
		StreamMaxBytes:       appendstream.DefaultMaxBytes,
		StreamSendTimeout:    appendstream.DefaultSendTimeout,
		StreamTotalAppends:   appendstream.DefaultTotalAppends,
		StreamTotalBytes:     appendstream.DefaultTotalBytes,
		FeedBytes:            feedstream.DefaultTotalBytes,
		FeedConnBytes:        feedstream.DefaultConnBytes,
		FeedStallTimeout:     feedstream.DefaultStallTimeout,
	}
}

// connLimits are the gRPC server's limits of f, defaults filled in.
func (f *Config) connLimits() (connLimits, error) {
	l := connLimits{MaxStreams: f.GRPCMaxStreams, IdleTimeout: f.GRPCIdleTimeout, KeepaliveMinTime: f.GRPCKeepaliveMinTime}
	if l.MaxStreams < 0 || l.IdleTimeout < 0 || l.KeepaliveMinTime < 0 {
		return l, fmt.Errorf("--grpc-max-streams, --grpc-idle-timeout and --grpc-keepalive-min-time must not be negative")
	}
	if l.MaxStreams == 0 {
		l.MaxStreams = DefaultGRPCMaxStreams
	}
	if l.IdleTimeout == 0 {
		l.IdleTimeout = DefaultGRPCIdleTimeout
	}
	if l.KeepaliveMinTime == 0 {
		l.KeepaliveMinTime = DefaultGRPCKeepaliveMinTime
	}
	return l, nil
}

// streamLimits are what one AppendBatches stream may hold (zero fields:
// appendstream's defaults).
func (f *Config) streamLimits() (appendstream.Limits, error) {
	if f.StreamMaxAppends < 0 || f.StreamMaxBytes < 0 || f.StreamSendTimeout < 0 || f.StreamTotalAppends < 0 || f.StreamTotalBytes < 0 {
		return appendstream.Limits{}, fmt.Errorf("--stream-max-appends, --stream-max-bytes, --stream-send-timeout, --stream-total-appends and --stream-total-bytes must not be negative")
	}
	return appendstream.Limits{MaxAppends: f.StreamMaxAppends, MaxBytes: f.StreamMaxBytes, SendTimeout: f.StreamSendTimeout,
		TotalAppends: f.StreamTotalAppends, TotalBytes: f.StreamTotalBytes}, nil
}

// feedLimits are what the feed streams may hold (zero fields: feedstream's
// defaults).
func (f *Config) feedLimits() (feedstream.Limits, error) {
	if f.FeedBytes < 0 || f.FeedConnBytes < 0 || f.FeedStallTimeout < 0 {
		return feedstream.Limits{}, fmt.Errorf("--feed-bytes, --feed-conn-bytes and --feed-stall-timeout must not be negative")
	}
	return feedstream.Limits{TotalBytes: f.FeedBytes, ConnBytes: f.FeedConnBytes, StallTimeout: f.FeedStallTimeout}, nil
}
