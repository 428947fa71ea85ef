// Command node is how agentstate runs as a service, and its command-line
// client.
//
//	node serve [flags]                  start a node (what `make run` runs)
//	node session create|get|list|...    talk to a running node over gRPC
//	node plan record-error|history|...
//	node audit list|count|get|verify|prune|...
//	node bench [report]                 measure appends/s and latency
//	node version                        the binary's module version and VCS revision
//
// Server and connection flags have an environment equivalent,
// AGENTSTATE_<FLAG> with dashes as underscores (--grpc-addr:
// AGENTSTATE_GRPC_ADDR); a flag given on the command line wins. `node
// <command> --help` lists them all.
//
// Client commands print protojson, one object per line, on stdout. A failed
// command prints {"error":{"code":...,"message":...}} on stderr and exits
// with the code's exit status (see exitCode in exit.go).
//
// This package is flag wiring only: `node serve` binds its flags to a
// server.Config and runs server.Serve (package node/server); the client
// commands dial with node/client and call the node through the generated
// gRPC clients; `node bench` runs node/bench.
//
// Every subcommand is added in newRootCommand (root.go); no file registers
// anything into package globals from init.
package main
