package e2e_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
)

// binDir holds the node binaries, built on first use (so a run that
// selects no test, such as the benchmark pass, builds nothing).
var (
	binDir    string
	buildOnce sync.Once
	buildErr  error
	// nodeBin serves; it is built with -race when the tests run with it,
	// so races in the serving node fail the test. cliBin is the same
	// command without -race, for the many short client runs (a -race
	// binary takes far longer to start).
	nodeBin, cliBin string
)

func TestMain(m *testing.M) {
	// The hostile-remote test re-runs this test binary as a Proto.Actor
	// peer: one remote per process.
	if os.Getenv(peerEnv) != "" {
		os.Exit(runPeer())
	}
	if os.Getenv(feedPeerEnv) != "" {
		os.Exit(runFeedPeer())
	}
	dir, err := os.MkdirTemp("", "agentstate-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binDir = dir
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// binaries builds the node binaries once and fails t if that failed.
func binaries(t *testing.T) {
	t.Helper()
	buildOnce.Do(func() {
		cli := filepath.Join(binDir, "node-cli")
		if buildErr = build(cli, false); buildErr != nil {
			return
		}
		node := cli
		if raceEnabled {
			node = filepath.Join(binDir, "node")
			if buildErr = build(node, true); buildErr != nil {
				return
			}
		}
		nodeBin, cliBin = node, cli
	})
	if buildErr != nil {
		t.Fatalf("building the node binary: %v", buildErr)
	}
}

func build(out string, race bool) error {
	args := []string{"build", "-o", out}
	if race {
		args = append(args, "-race")
	}
	args = append(args, "github.com/agentstate/agentstate/cmd/node")
	// go test puts its own GOROOT/bin first on the PATH it gives tests
	// (Go 1.19 and later), so "go" is the toolchain running this test.
	cmd := exec.Command("go", args...)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	return cmd.Run()
}
