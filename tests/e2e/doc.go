// Package e2e tests the node binary from the outside: it builds cmd/node,
// runs `node serve` as a child process on a temporary directory with
// free ports, and drives it with the CLI, a Go gRPC client and Proto.Actor
// remote peers (raw and real ones, in their own processes, because two
// remotes in one -race process fail in the library).
package e2e
