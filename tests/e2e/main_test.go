package e2e_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
)

// nodeBin is the node binary built once for the whole package; with
// -race when the tests run with it, so races in the serving node fail the
// test. cliBin is the same command without -race, for the many short
// client runs (a -race binary takes far longer to start).
var nodeBin, cliBin string

func TestMain(m *testing.M) {
	// The hostile-remote test re-runs this test binary as a Proto.Actor
	// peer: one remote per process.
	if os.Getenv(peerEnv) != "" {
		os.Exit(runPeer())
	}
	dir, err := os.MkdirTemp("", "agentstate-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	nodeBin, cliBin = filepath.Join(dir, "node"), filepath.Join(dir, "node-cli")
	err = build(cliBin, false)
	if err == nil && raceEnabled {
		err = build(nodeBin, true)
	} else {
		nodeBin = cliBin
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "building the node binary: %v\n", err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

func build(out string, race bool) error {
	args := []string{"build", "-o", out}
	if race {
		args = append(args, "-race")
	}
	args = append(args, "github.com/agentstate/agentstate/cmd/node")
	cmd := exec.Command(goTool(), args...)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	return cmd.Run()
}

func goTool() string {
	if p := filepath.Join(runtime.GOROOT(), "bin", "go"); fileExists(p) {
		return p
	}
	return "go"
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}
