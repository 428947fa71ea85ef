package e2e_test

import (
	"bytes"
	"context"
	"errors"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestServeReportsAStoreItCannotOpen: for each way the store can fail to
// open, `node serve` exits 1 with one line on stderr saying what it could
// not open and why: no panic, no stack, no password.
func TestServeReportsAStoreItCannotOpen(t *testing.T) {
	binaries(t)
	dir := t.TempDir()
	// make run creates ./data for its ./data/agentstate.db.
	if err := os.Mkdir(filepath.Join(dir, "data"), 0o750); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "notes.txt"), []byte(strings.Repeat("not a database\n", 100)), 0o600); err != nil {
		t.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	down := lis.Addr().String()
	lis.Close() // nothing listens there now
	cases := []struct {
		name, data string
		mention    []string
	}{
		{"a directory", "./data", []string{"--data ./data is a directory", "./data/agentstate.db"}},
		{"nothing", "", []string{"--data is empty", "./data/agentstate.db"}},
		{"a file that is not SQLite", "./notes.txt", []string{"open database ./notes.txt", "not a database"}},
		{"a PostgreSQL server that is down", "postgres://agentstate:s3cret@" + down + "/agentstate?connect_timeout=10",
			[]string{"open PostgreSQL store", down, "connection refused"}},
	}
	if base := os.Getenv("AGENTSTATE_TEST_POSTGRES"); base != "" {
		u, err := url.Parse(base)
		if err != nil {
			t.Fatal(err)
		}
		u.User = url.UserPassword(u.User.Username(), "s3cret")
		cases = append(cases, struct {
			name, data string
			mention    []string
		}{"a wrong PostgreSQL password", u.String(), []string{"open PostgreSQL store", "password authentication failed"}})
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			code, stderr := serveIn(t, dir, "--data", tc.data)
			if code != 1 {
				t.Fatalf("exit %d, want 1; stderr:\n%s", code, stderr)
			}
			lines := strings.Split(strings.TrimSpace(stderr), "\n")
			if len(lines) != 1 || strings.Contains(stderr, "panic") || strings.Contains(stderr, "goroutine") {
				t.Fatalf("stderr is not one line:\n%s", stderr)
			}
			if !strings.Contains(stderr, `"code":"LOCAL"`) || strings.Contains(stderr, "s3cret") {
				t.Fatalf("stderr %s: want a LOCAL error without the password", stderr)
			}
			for _, m := range tc.mention {
				if !strings.Contains(stderr, m) {
					t.Errorf("stderr %s does not say %q", stderr, m)
				}
			}
		})
	}
}

// serveIn runs `node serve` in dir with args (and free ports) and returns
// its exit code and stderr; it must exit by itself.
func serveIn(t *testing.T, dir string, args ...string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, cliBin, append([]string{"serve", "--grpc-addr", "127.0.0.1:0", "--http-addr", ""}, args...)...)
	cmd.Dir = dir
	cmd.Env = cleanEnv()
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("node serve %v did not exit: it served a store it should not open\n%s", args, stderr.String())
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode(), stderr.String()
	}
	if err != nil {
		t.Fatal(err)
	}
	return 0, stderr.String()
}
