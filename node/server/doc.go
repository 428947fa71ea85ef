// Package server runs an agentstate node in a process: the store, the
// actor system (audit writer, session and plan owners, the cluster when
// configured), the gRPC API, the guarded Proto.Actor remote endpoint and
// HTTP /metrics, /healthz and /readyz. `node serve` is this package behind
// flags; a program may embed a node the same way:
//
//	cfg := server.DefaultConfig() // node serve's defaults
//	cfg.Data = "./state/agentstate.db"
//	log, _ := server.NewLogger(os.Stderr, cfg.LogFormat, cfg.LogLevel)
//	err := server.Serve(ctx, cfg, log) // until ctx ends or SIGTERM, then drains
//
// It is split by concern: node.go (start-up in order, shutdown in the
// reverse order), config.go (the settings), grpcserver.go, grpcdecode.go
// and interceptors.go (the API), streamtap.go (what each stream must pass
// on its headers: the token, the node-wide stream bound), auth.go (bearer
// token), remoteendpoint.go and remoteguard.go (the Proto.Actor remote
// endpoint and its guard), cluster.go and clusterguard.go (cluster mode),
// httpserver.go and metrics.go (/metrics, /healthz, /readyz), logging.go
// (the node's slog and the library's records through it), tlsnames.go and
// credfiles.go (TLS certificates' names, token and CA files, shared with
// the CLI).
package server
