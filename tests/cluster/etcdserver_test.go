package cluster_test

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentstate/agentstate/tests/checker"
)

// etcdServer is one etcd process (Debian's etcd-server) on free loopback
// ports and a data directory of the test; Kill and Start restart it on
// both. Its methods are for the test's controlling goroutine.
type etcdServer struct {
	bin, dir, log string
	args          []string
	scheme        string
	client        *http.Client // for /health (TLS when the server has it)
	Endpoint      string       // host:port of its client URL
	cmd           *exec.Cmd
	exited        chan struct{}
}

// startEtcd starts etcd with extra flags (TLS, say: scheme is then https and
// client reaches its /health). Without the etcd binary the test skips, or
// fails when CI is set: .ci/run installs it.
func startEtcd(t *testing.T, ctx context.Context, scheme string, client *http.Client, extra ...string) *etcdServer {
	t.Helper()
	bin, err := exec.LookPath("etcd")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("etcd not found (Debian: apt-get install etcd-server): %v", err)
		}
		t.Skipf("etcd not found (Debian: apt-get install etcd-server): %v", err)
	}
	clientAddr, err := checker.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	peerAddr, err := checker.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	e := &etcdServer{bin: bin, dir: dir, log: filepath.Join(dir, "etcd.log"), scheme: scheme, client: client, Endpoint: clientAddr}
	clientURL, peerURL := scheme+"://"+clientAddr, "http://"+peerAddr
	e.args = append([]string{
		"--name", "test", "--data-dir", filepath.Join(dir, "data"),
		"--listen-client-urls", clientURL, "--advertise-client-urls", clientURL,
		"--listen-peer-urls", peerURL, "--initial-advertise-peer-urls", peerURL,
		"--initial-cluster", "test=" + peerURL, "--initial-cluster-state", "new",
		"--logger", "zap",
	}, extra...)
	if err := e.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		e.Kill()
		if t.Failed() {
			b, _ := os.ReadFile(e.log)
			if len(b) > 3000 {
				b = b[len(b)-3000:]
			}
			t.Logf("--- etcd log (tail) ---\n%s", b)
		}
	})
	return e
}

// Start starts etcd (again, on its data) and waits until /health says so.
func (e *etcdServer) Start(ctx context.Context) error {
	log, err := os.OpenFile(e.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	defer log.Close()
	cmd := exec.Command(e.bin, e.args...)
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start etcd: %w", err)
	}
	e.cmd, e.exited = cmd, make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(e.exited)
	}()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		if e.healthy(ctx) {
			return nil
		}
		select {
		case <-e.exited:
			return errors.New("etcd exited before it was healthy")
		case <-ctx.Done():
			return fmt.Errorf("etcd not healthy: %w", ctx.Err())
		case <-tick.C:
		}
	}
}

func (e *etcdServer) healthy(ctx context.Context) bool {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, e.scheme+"://"+e.Endpoint+"/health", nil)
	resp, err := e.client.Do(req)
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode == http.StatusOK && strings.Contains(string(b), `"true"`)
}

// Kill SIGKILLs etcd and waits until it is reaped.
func (e *etcdServer) Kill() {
	if e.cmd == nil {
		return
	}
	_ = e.cmd.Process.Kill()
	<-e.exited
	e.cmd = nil
}

// plainHTTP reaches a plaintext etcd's /health.
var plainHTTP = &http.Client{Timeout: time.Second}

// tlsHTTP reaches a TLS etcd's /health, trusting cfg.
func tlsHTTP(cfg *tls.Config) *http.Client {
	return &http.Client{Timeout: time.Second, Transport: &http.Transport{TLSClientConfig: cfg,
		DialContext: (&net.Dialer{Timeout: time.Second}).DialContext}}
}
