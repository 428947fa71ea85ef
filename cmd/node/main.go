// Command node runs agentstate as a service (node serve) and talks to a
// running node over gRPC (node session|plan|audit ...). See doc.go.
package main

import (
	"os"
)

func main() {
	tuneGC()
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}
