package e2e_test

import (
	"context"
	"crypto/tls"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	sessionv1 "github.com/agentstate/agentstate/messages/agentstate/session/v1"
)

// opensslOrSkip returns the openssl binary; without one the test skips,
// or fails under CI.
func opensslOrSkip(t *testing.T) string {
	t.Helper()
	bin, err := exec.LookPath("openssl")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("openssl is not installed; the TLS recipe test needs it")
		}
		t.Skip("openssl is not installed")
	}
	return bin
}

// runShell runs script with bash -e in dir.
func runShell(t *testing.T, dir, script string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-e", "-c", script)
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%v\n%s\nscript:\n%s", err, out, script)
	}
}

// tlsRecipe is the first sh block after the "TLS recipe" line of
// docs/OPERATIONS.md: the recipe operators copy.
func tlsRecipe(t *testing.T) string {
	t.Helper()
	return docRecipe(t, "A TLS recipe")
}

// docRecipe is the first sh block after the line of docs/OPERATIONS.md
// that starts with title.
func docRecipe(t *testing.T, title string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "docs", "OPERATIONS.md"))
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	i := strings.Index(doc, title)
	if i < 0 {
		t.Fatalf("docs/OPERATIONS.md has no %q", title)
	}
	rest := doc[i:]
	start := strings.Index(rest, "```sh\n")
	end := strings.Index(rest[start+6:], "```")
	if start < 0 || end < 0 {
		t.Fatalf("%q has no sh block", title)
	}
	return rest[start+6 : start+6+end]
}

// TestTLSRecipeWorks runs the TLS recipe of docs/OPERATIONS.md as written
// and serves with its certificates: the CLI reaches the API with --tls-ca,
// and a peer presenting node2's certificate gets through the remote
// endpoint's mutual TLS, verifying node1's. The node does not warn about
// its certificate.
func TestTLSRecipeWorks(t *testing.T) {
	opensslOrSkip(t)
	dir := t.TempDir()
	runShell(t, dir, tlsRecipe(t))
	f := func(name string) string { return filepath.Join(dir, name) }
	n := startNode(t, "--tls-cert", f("node1.pem"), "--tls-key", f("node1-key.pem"),
		"--remote-addr", "127.0.0.1:0", "--remote-tls-cert", f("node1.pem"), "--remote-tls-key", f("node1-key.pem"),
		"--remote-tls-ca", f("ca.pem"))
	var created sessionv1.CreateSessionResponse
	n.cli([]string{"--tls-ca", f("ca.pem")}, "session", "create", "--actor", "tls").ok(t, &created)
	// By name, as the recipe's clients would (localhost is in its SANs).
	port := n.grpcAddr()[strings.LastIndex(n.grpcAddr(), ":"):]
	runCLI(t, nil, "session", "get", "--session", created.GetSession().GetSessionId(),
		"--addr", "localhost"+port, "--tls-ca", f("ca.pem")).ok(t)

	stream, conn, err := rawStream(t, n.addrs["remote_addr"], f("ca.pem"), []tls.Certificate{loadPair(t, f("node2.pem"), f("node2-key.pem"))})
	if err != nil {
		t.Fatalf("open a stream to the remote endpoint with node2's certificate: %v", err)
	}
	defer conn.Close()
	resp, err := connect(stream)
	if err != nil || resp.GetConnectResponse() == nil {
		t.Fatalf("remote handshake with the recipe's certificates: %v, %v", resp, err)
	}
	if strings.Contains(n.logText(), "Common Name") {
		t.Fatalf("the node warned about the recipe's certificate:\n%s", n.logText())
	}
}

// TestCNOnlyCertificateIsExplained: a node serving a certificate that
// names its host only in the Common Name (what Go has refused since 1.15)
// warns when it starts, and the CLI's failure says what is wrong with the
// certificate instead of only "handshake failed".
func TestCNOnlyCertificateIsExplained(t *testing.T) {
	opensslOrSkip(t)
	dir := t.TempDir()
	runShell(t, dir, `
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 30 -subj "/CN=test CA" \
  -keyout ca-key.pem -out ca.pem -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign"
openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj "/CN=localhost" -keyout cn-key.pem -out cn.csr
printf 'extendedKeyUsage=serverAuth,clientAuth\n' > cn.ext
openssl x509 -req -in cn.csr -CA ca.pem -CAkey ca-key.pem -CAcreateserial -days 30 -extfile cn.ext -out cn.pem
`)
	f := func(name string) string { return filepath.Join(dir, name) }
	n := startNode(t, "--tls-cert", f("cn.pem"), "--tls-key", f("cn-key.pem"))
	if !strings.Contains(n.logText(), "only in the subject Common Name") {
		t.Errorf("the node did not warn about its CN-only certificate:\n%s", n.logText())
	}
	port := n.grpcAddr()[strings.LastIndex(n.grpcAddr(), ":"):]
	r := runCLI(t, nil, "session", "list", "--addr", "localhost"+port, "--tls-ca", f("ca.pem"), "--timeout", "5s")
	if r.code == 0 || !strings.Contains(r.stderr, "localhost") || !strings.Contains(r.stderr, "only in its subject Common Name") ||
		!strings.Contains(r.stderr, "Subject Alternative Name") {
		t.Fatalf("CLI against a CN-only certificate: exit %d, stderr %s; want the certificate explained", r.code, r.stderr)
	}
}
