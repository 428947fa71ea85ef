package cluster_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentstate/agentstate/tests/checker"
	"github.com/agentstate/agentstate/tests/testpki"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// TestClusterEtcdTLSAndCredentials: etcd serves TLS only, asks for client
// certificates, and has authentication on. A member given the CA, a client
// certificate and the root user's password file joins and is ready; one
// with a wrong password refuses to start and says why.
func TestClusterEtcdTLSAndCredentials(t *testing.T) {
	ctx := runContext(t)
	pki := testpki.New(t)
	cert, key := pki.Leaf(t, "etcd") // server and client, for 127.0.0.1
	tlsCfg := etcdClientTLS(t, pki.CA, cert, key)
	etcd := startEtcd(t, ctx, "https", tlsHTTP(tlsCfg),
		"--cert-file", cert, "--key-file", key, "--trusted-ca-file", pki.CA, "--client-cert-auth")
	const password = "correct horse"
	enableEtcdAuth(t, ctx, etcd.Endpoint, tlsCfg, password)
	dsn := database(t)

	dir := t.TempDir()
	good, bad := filepath.Join(dir, "pw"), filepath.Join(dir, "wrong")
	if err := os.WriteFile(good, []byte(password+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bad, []byte("wrong\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	args := func(pwFile string) []string {
		return []string{"--data", dsn, "--cluster", "TLS", "--etcd-endpoints", etcd.Endpoint,
			"--etcd-tls-ca", pki.CA, "--etcd-tls-cert", cert, "--etcd-tls-key", key,
			"--etcd-username", "root", "--etcd-password-file", pwFile,
			"--log-level", "warn", "--insecure-remote-plaintext-loopback"}
	}
	ms := startMembers(t, ctx, [][]string{args(good)})
	if code, body := readyz(t, ms[0]); code != http.StatusOK {
		t.Fatalf("member over TLS with credentials: /readyz %d %q", code, body)
	}

	n, err := checker.StartNode(ctx, checker.NodeConfig{Binary: nodeBinary(t), Dir: t.TempDir(), Args: args(bad),
		ReadyTimeout: 30 * time.Second})
	if err == nil {
		n.Close()
		t.Fatal("a member with a wrong etcd password started")
	}
	if !strings.Contains(err.Error(), "etcd") || !strings.Contains(err.Error(), "authentication failed") {
		t.Fatalf("a wrong etcd password: %v, want it to name etcd's authentication", err)
	}
	for _, line := range strings.Split(err.Error(), "\n") {
		if strings.Contains(line, "authentication failed") {
			t.Logf("wrong password refused: %s", line)
			break
		}
	}
}

func etcdClientTLS(t *testing.T, ca, cert, key string) *tls.Config {
	t.Helper()
	pem, err := os.ReadFile(ca)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(pem)
	pair, err := tls.LoadX509KeyPair(cert, key)
	if err != nil {
		t.Fatal(err)
	}
	return &tls.Config{RootCAs: roots, Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12}
}

// enableEtcdAuth creates etcd's root user with password and turns
// authentication on.
func enableEtcdAuth(t *testing.T, ctx context.Context, endpoint string, tlsCfg *tls.Config, password string) {
	t.Helper()
	c, err := clientv3.New(clientv3.Config{Endpoints: []string{endpoint}, TLS: tlsCfg, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	if _, err := c.RoleAdd(ctx, "root"); err != nil && !strings.Contains(err.Error(), "already exists") {
		t.Fatal(err)
	}
	if _, err := c.UserAdd(ctx, "root", password); err != nil {
		t.Fatal(err)
	}
	if _, err := c.UserGrantRole(ctx, "root", "root"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.AuthEnable(ctx); err != nil {
		t.Fatal(err)
	}
}
