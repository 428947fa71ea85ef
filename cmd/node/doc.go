// Command node is how agentstate runs as a service, and its command-line
// client.
//
//	node serve [flags]                  start a node (what `make run` runs)
//	node session create|get|list|...    talk to a running node over gRPC
//	node plan record-error|history|...
//	node audit list|count|get|verify|prune|...
//
// Every flag has an environment equivalent, AGENTSTATE_<FLAG> with dashes
// as underscores (--grpc-addr: AGENTSTATE_GRPC_ADDR); a flag given on the
// command line wins. `node <command> --help` lists them all.
//
// Client commands print protojson, one object per line, on stdout. A failed
// command prints {"error":{"code":...,"message":...}} on stderr and exits
// with the code's exit status (see exitCode in exit.go).
//
// The serve side is split by concern: serve.go (lifecycle and shutdown),
// grpcserver.go and interceptors.go (the API), auth.go (bearer token),
// remoteguard.go (the Proto.Actor remote endpoint and its guard),
// httpserver.go and metrics.go (/metrics, /healthz, /readyz).
//
// Every subcommand is added in newRootCommand (root.go); no file registers
// anything into package globals from init.
package main
