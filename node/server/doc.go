// Package server runs an agentstate node in a process: the store, the
// actor system (the writer, session and plan owners, the live feeds' hub,
// the cluster when configured), the gRPC API (whose feed streams
// node/feedstream serves, within a byte budget), the guarded Proto.Actor
// remote endpoint and HTTP /metrics, /healthz and /readyz. `node serve` is this package behind
// flags; a program may embed a node the same way:
//
//	cfg := server.DefaultConfig() // node serve's defaults
//	cfg.Data = "./state/agentstate.db"
//	log, _ := server.NewLogger(os.Stderr, cfg.LogFormat, cfg.LogLevel)
//	err := server.Serve(ctx, cfg, log) // until ctx ends or SIGTERM, then drains
//
// It is split by concern: node.go (start-up in order, shutdown in the
// reverse order), config.go (the settings), grpcserver.go, grpcdecode.go
// and interceptors.go (the API), connlimits.go, requestbudget.go and
// fdlimit_*.go (what gRPC connections, streams and requests may hold),
// streamtap.go (what each stream must pass on its headers: the token, the
// node-wide stream bound), feeds.go (the feeds' poll interval, metrics,
// and the gate that lets shutdown drain the writer while feeds stay open),
// auth.go (bearer token), remoteendpoint.go, remoteguard.go,
// remotesecurity.go and sentrequests.go (the Proto.Actor remote endpoint
// and its guard), cluster.go and clusterguard.go (cluster mode),
// httpserver.go and metrics.go (/metrics, /healthz, /readyz), logging.go
// and ratelog.go (the node's slog, the library's records through it, and
// rate-bounded warnings), redact.go (--data without its password) and
// tlsnames.go (the names in the node's own certificates).
package server
