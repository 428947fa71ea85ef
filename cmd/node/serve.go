package main

import (
	"strings"

	"github.com/agentstate/agentstate/actors/placement"
	"github.com/agentstate/agentstate/node/server"
	"github.com/spf13/cobra"
)

func newServeCommand() *cobra.Command {
	f := server.DefaultConfig()
	c := &cobra.Command{
		Use:   "serve",
		Short: "Run a node: the actors, the gRPC API, metrics and (optionally) the Proto.Actor remote endpoint",
		Long: "serve opens (creating if missing) the database, starts the writer and the audit, session and plan actors, and serves\n" +
			"the gRPC API (sessions, plans, audit, health, reflection), HTTP /metrics, /healthz and /readyz, and,\n" +
			"with --remote-addr, the Proto.Actor remote endpoint (actors \"sessions\", \"plans\", \"audit\").\n\n" +
			"SIGTERM or SIGINT drains it: new work is refused, requests in flight finish, the writer commits\n" +
			"everything it accepted, the database is closed, and the process exits 0. A second signal kills it.",
	}
	fs := c.Flags()
	fs.StringVar(&f.Data, "data", f.Data, "database file (created with its directory if missing), memory:NAME, or a postgres:// DSN (PostgreSQL)")
	fs.StringVar(&f.Synchronous, "synchronous", f.Synchronous, "commit durability: full (fsync every commit) or normal (fsync at checkpoints)")
	fs.StringVar(&f.GRPCAddr, "grpc-addr", f.GRPCAddr, "gRPC API listen address")
	fs.StringVar(&f.HTTPAddr, "http-addr", f.HTTPAddr, `HTTP listen address for /metrics, /healthz, /readyz ("" disables)`)
	fs.StringVar(&f.TLSCert, "tls-cert", "", "PEM certificate for TLS on the gRPC API (with --tls-key)")
	fs.StringVar(&f.TLSKey, "tls-key", "", "PEM private key for TLS on the gRPC API (with --tls-cert)")
	fs.StringVar(&f.TokenFile, "auth-token-file", "", "file holding the bearer token every gRPC request must present (one principal with every grant)")
	fs.StringVar(&f.AuthFile, "auth-file", "", "identities file (JSON): principals, their credentials (token hashes, client certificate SANs) and grants per namespace; reloaded on SIGHUP (docs/OPERATIONS.md, Tenants)")
	fs.StringVar(&f.TLSClientCA, "tls-client-ca", "", "PEM CA bundle client certificates are verified against (principals of --auth-file with uri_sans or dns_sans; needs --tls-cert)")
	fs.IntVar(&f.MaxRecvBytes, "max-recv-bytes", f.MaxRecvBytes, "largest request accepted, in bytes (gRPC and remote); larger is RESOURCE_EXHAUSTED")
	fs.StringVar(&f.RemoteAddr, "remote-addr", "", `Proto.Actor remote endpoint listen address, host:port ("" = off)`)
	fs.StringVar(&f.RemoteAdvertise, "remote-advertise", "", "address peers reach the remote endpoint at (default: the bound address)")
	fs.StringVar(&f.RemoteCert, "remote-tls-cert", "", "PEM certificate of this node for mutual TLS on the remote endpoint")
	fs.StringVar(&f.RemoteKey, "remote-tls-key", "", "PEM private key for mutual TLS on the remote endpoint")
	fs.StringVar(&f.RemoteCA, "remote-tls-ca", "", "PEM CA bundle peers' certificates must chain to (mutual TLS)")
	fs.BoolVar(&f.RemoteInsecureLoopback, strings.TrimPrefix(server.InsecureRemoteFlag, "--"), false,
		"INSECURE, for tests: run the remote endpoint or the cluster without mutual TLS, on a loopback address only "+
			"(without it, and without --remote-tls-*, they refuse to start)")
	fs.DurationVar(&f.ShutdownTimeout, "shutdown-timeout", f.ShutdownTimeout, "how long each shutdown phase (requests in flight, then the actors' drain) may take")
	fs.DurationVar(&f.IdleTimeout, "idle-timeout", 0, "passivate a session or plan actor idle this long (0: default 5m; negative: never)")
	fs.IntVar(&f.MaxLiveActors, "max-live-actors", 0, "session actors, and plan actors, live at once; one more passivates the oldest-activated (0: default 20000; negative: unbounded)")
	fs.IntVar(&f.Backlog, "backlog", 0, "commands the writer may have pending before network senders get RESOURCE_EXHAUSTED (0: default 10000)")
	fs.Int64Var(&f.BacklogBytes, "backlog-bytes", 0, "bytes the writer's pending commands may carry before network senders get RESOURCE_EXHAUSTED (0: default 64 MiB)")
	fs.IntVar(&f.BatchCommands, "batch-max-commands", 0, "most commands in one group commit (0: default)")
	fs.IntVar(&f.BatchBytes, "batch-max-bytes", 0, "most bytes in one group commit (0: default)")
	fs.BoolVar(&f.AuditMessages, "audit-messages", false, "write a message_appended audit entry per stored message")
	fs.StringVar(&f.LogFormat, "log-format", f.LogFormat, "log format: text or json")
	fs.StringVar(&f.LogLevel, "log-level", f.LogLevel, "log level: debug, info, warn or error")
	fs.StringVar(&f.ClusterName, "cluster", "", `join the Proto.Actor cluster of this name (needs a shared store: --data postgres://..., and --peers with --am-port, or --membership etcd)`)
	fs.StringVar(&f.Peers, "peers", "", "every cluster member's host:am-port, this one included, comma-separated")
	fs.IntVar(&f.AMPort, "am-port", 0, "this member's automanaged port (listens on the remote's host, unauthenticated, read-only: firewall it to the members)")
	fs.StringVar(&f.GRPCAdvertise, "grpc-advertise", "", "host:port clients reach this member's gRPC API at, named to clients of the sessions and plans it owns (cluster; default: --grpc-addr's bound address, an unspecified host replaced by the remote's advertised host)")
	fs.DurationVar(&f.ClusterWait, "cluster-wait", f.ClusterWait, "how long /readyz waits for every peer to join before going ready anyway (automanaged)")
	fs.StringVar(&f.Membership, "membership", "", `how members find each other: automanaged (static --peers; the default with --peers) or etcd (members join and leave at runtime; the default with --etcd-endpoints)`)
	fs.StringVar(&f.EtcdEndpoints, "etcd-endpoints", "", "etcd servers of --membership etcd, host:port or URL, comma-separated")
	fs.StringVar(&f.EtcdPrefix, "etcd-prefix", "", `etcd key prefix; members register under PREFIX/CLUSTER/ (default "`+placement.DefaultEtcdPrefix+`")`)
	fs.StringVar(&f.EtcdTLSCA, "etcd-tls-ca", "", "PEM CA that signed etcd's server certificate (reach etcd over TLS; default with a client certificate: the system's roots)")
	fs.StringVar(&f.EtcdTLSCert, "etcd-tls-cert", "", "PEM client certificate for etcd (with --etcd-tls-key)")
	fs.StringVar(&f.EtcdTLSKey, "etcd-tls-key", "", "PEM key of --etcd-tls-cert")
	fs.StringVar(&f.EtcdUsername, "etcd-username", "", "etcd user (with --etcd-password-file)")
	fs.StringVar(&f.EtcdPasswordFile, "etcd-password-file", "", "file holding the etcd user's password (one line)")
	fs.DurationVar(&f.FeedPollInterval, "feed-poll-interval", 0, "how often the live feeds read the store for other nodes' commits (0: 100ms on PostgreSQL, never on SQLite; negative: never)")
	fs.Int64Var(&f.FeedBytes, "feed-bytes", f.FeedBytes, "bytes of events all gRPC feed tails together may hold (read and not sent, or sent and not yet read by their clients); past it a tail waits")
	fs.Int64Var(&f.FeedConnBytes, "feed-conn-bytes", f.FeedConnBytes, "bytes of events the gRPC feed tails of one client connection may hold; past it its tails wait")
	fs.DurationVar(&f.FeedStallTimeout, "feed-stall-timeout", f.FeedStallTimeout, "end a gRPC feed tail (RESOURCE_EXHAUSTED) and close its connection when its client read none of its sent events for this long")
	fs.IntVar(&f.GRPCMaxStreams, "grpc-max-streams", f.GRPCMaxStreams, "concurrent streams per gRPC connection; more are refused (REFUSED_STREAM) and clients queue them")
	fs.IntVar(&f.GRPCMaxStreamsTotal, "grpc-max-streams-total", f.GRPCMaxStreamsTotal, "gRPC streams open at once on all connections together; more are refused RESOURCE_EXHAUSTED before their request is read")
	fs.IntVar(&f.GRPCMaxConnections, "grpc-max-connections", 0, "gRPC connections accepted at once (0: 1024, lowered to fit the open-file limit less 128 descriptors kept for the database and other listeners)")
	fs.DurationVar(&f.GRPCIdleTimeout, "grpc-idle-timeout", f.GRPCIdleTimeout, "close a gRPC connection that has had no stream for this long (clients reconnect)")
	fs.DurationVar(&f.GRPCKeepaliveMinTime, "grpc-keepalive-min-time", f.GRPCKeepaliveMinTime, "shortest interval at which a client may ping; a client pinging more often is disconnected")
	fs.Int64Var(&f.GRPCRequestBytes, "grpc-request-bytes", f.GRPCRequestBytes, "bytes of unary gRPC requests decoded and served at once, each counted twice its size; past it a request is refused RESOURCE_EXHAUSTED undecoded")
	fs.Int64Var(&f.GRPCShareRate, "grpc-share-rate", f.GRPCShareRate, "work per second (bytes, plus 8 KiB per operation) shared equally among the principals using the node at once; a principal ahead of its share waits (0: 32 MiB)")
	fs.IntVar(&f.StreamMaxAppends, "stream-max-appends", f.StreamMaxAppends, "appends of one AppendBatches stream served at once; past it the node stops reading the stream")
	fs.Int64Var(&f.StreamMaxBytes, "stream-max-bytes", f.StreamMaxBytes, "bytes of requests of one AppendBatches stream served at once; past it the node stops reading the stream")
	fs.DurationVar(&f.StreamSendTimeout, "stream-send-timeout", f.StreamSendTimeout, "end an AppendBatches stream (RESOURCE_EXHAUSTED) when a send of its outcomes stays blocked this long: its client does not read")
	fs.IntVar(&f.StreamTotalAppends, "stream-total-appends", f.StreamTotalAppends, "appends of all AppendBatches streams together served at once; past it a stream that receives waits (flow control)")
	fs.Int64Var(&f.StreamTotalBytes, "stream-total-bytes", f.StreamTotalBytes, "bytes of requests of all AppendBatches streams together served at once; past it a stream that receives waits (flow control)")
	// Not a server setting: a diagnosis of this process (node bench cluster --profile-dir uses it).
	var cpuProfile string
	fs.StringVar(&cpuProfile, "cpuprofile", "", "write a CPU profile of this node to this file, from start until it drains (go tool pprof)")
	// Every flag of serve is a server setting.
	fromEnv(fs, "data", "synchronous", "grpc-addr", "http-addr", "tls-cert", "tls-key", "auth-token-file", "auth-file", "tls-client-ca",
		"max-recv-bytes", "remote-addr", "remote-advertise", "remote-tls-cert", "remote-tls-key", "remote-tls-ca",
		strings.TrimPrefix(server.InsecureRemoteFlag, "--"), "shutdown-timeout", "idle-timeout", "max-live-actors", "backlog", "backlog-bytes", "batch-max-commands", "batch-max-bytes", "audit-messages",
		"log-format", "log-level", "cluster", "peers", "am-port", "cluster-wait", "grpc-advertise",
		"membership", "etcd-endpoints", "etcd-prefix", "etcd-tls-ca", "etcd-tls-cert", "etcd-tls-key", "etcd-username", "etcd-password-file", "feed-poll-interval", "feed-bytes", "feed-conn-bytes", "feed-stall-timeout",
		"grpc-max-streams", "grpc-max-streams-total", "grpc-max-connections", "grpc-idle-timeout", "grpc-keepalive-min-time", "grpc-request-bytes", "grpc-share-rate",
		"stream-max-appends", "stream-max-bytes", "stream-send-timeout", "stream-total-appends", "stream-total-bytes", "cpuprofile")
	c.RunE = func(cmd *cobra.Command, _ []string) error {
		if cpuProfile != "" {
			stop, err := startCPUProfile(cpuProfile)
			if err != nil {
				return err
			}
			defer stop()
		}
		log, err := server.NewLogger(cmd.ErrOrStderr(), f.LogFormat, f.LogLevel)
		if err != nil {
			return usagef(cmd, "%v", err)
		}
		limitMemory(f) // the serving line shows it (gomemlimit_mib)
		return server.Serve(cmd.Context(), f, log)
	}
	return c
}
