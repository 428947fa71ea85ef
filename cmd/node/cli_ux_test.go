package main

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"io"
	"log/slog"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/agentstate/agentstate/actors/plan"
	"github.com/agentstate/agentstate/node/server"
)

// startNode starts a node in this process on an in-memory database and
// returns its gRPC address.
func startNode(t *testing.T, edit func(*server.Config)) string {
	t.Helper()
	cfg := server.DefaultConfig()
	cfg.Data = "memory:" + strings.ReplaceAll(t.Name(), "/", "_")
	cfg.GRPCAddr, cfg.HTTPAddr = "127.0.0.1:0", ""
	cfg.ShutdownTimeout = 10 * time.Second
	if edit != nil {
		edit(cfg)
	}
	n, err := server.Start(cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Shutdown() })
	return n.GRPCAddr()
}

// cli runs the command line and returns its exit status, stdout and stderr.
func cli(args ...string) (int, string, string) {
	var out, errOut bytes.Buffer
	code := run(args, &out, &errOut)
	return code, out.String(), errOut.String()
}

// A mistyped subcommand below the root is "unknown command" with a
// suggestion, not "unknown flag" for the flags meant for it.
func TestSubcommandTypoIsUnknownCommand(t *testing.T) {
	for _, tc := range []struct {
		args           []string
		typo, group, s string
	}{
		{[]string{"session", "apend", "--session", "01JDQ6Z1V3T9Q2B8W4X5Y6Z7A8", "--content", "hi"}, "apend", "node session", "append"},
		{[]string{"session", "--addr", "127.0.0.1:1", "apend"}, "apend", "node session", "append"},
		{[]string{"session", "state", "gett", "--scope", "app:x"}, "gett", "node session state", "get"},
		{[]string{"audit", "lsit", "--after", "3"}, "lsit", "node audit", "list"},
		{[]string{"bench", "reprot", "--in", "x.json"}, "reprot", "node bench", "report"},
	} {
		code, _, stderr := cli(tc.args...)
		want := `unknown command "` + tc.typo + `" for "` + tc.group + `"`
		if code != exitUsage || !strings.Contains(stderr, want) || !strings.Contains(stderr, "Did you mean this?\n\t"+tc.s) ||
			strings.Contains(stderr, "unknown flag") {
			t.Errorf("%v: exit %d, stderr %q; want %d and %q suggesting %q", tc.args, code, stderr, exitUsage, want, tc.s)
		}
	}
	// A group without a subcommand still shows its help.
	if code, stdout, _ := cli("session"); code != 0 || !strings.Contains(stdout, "Available Commands") {
		t.Errorf("node session: exit %d, %q", code, stdout)
	}
}

// audit list --after takes an event id, audit tail --after a position:
// each says so when given the other.
func TestAuditAfterFlagsSayWhatTheyTake(t *testing.T) {
	code, _, stderr := cli("audit", "tail", "--after", "01JDQ6Z1V3T9Q2B8W4X5Y6Z7A8", "--addr", "127.0.0.1:1")
	if code != exitUsage || !strings.Contains(stderr, "audit tail --after takes a position") {
		t.Errorf("tail --after <event id>: exit %d, %q", code, stderr)
	}
	code, _, stderr = cli("audit", "list", "--after", "42", "--addr", "127.0.0.1:1")
	if code != exitUsage || !strings.Contains(stderr, "audit list --after takes an event id") {
		t.Errorf("list --after <position>: exit %d, %q", code, stderr)
	}
	for _, cmd := range []string{"list", "tail"} {
		_, stdout, _ := cli("audit", cmd, "--help")
		if !strings.Contains(stdout, "event id") || !strings.Contains(stdout, "position") {
			t.Errorf("audit %s --help does not tell event ids from positions:\n%s", cmd, stdout)
		}
	}
}

// state get --scope without --session reads the shared scope and prints
// only it, not an empty session.
func TestStateGetScopeOnly(t *testing.T) {
	addr := startNode(t, nil)
	code, stdout, stderr := cli("session", "create", "--actor", "a", "--addr", addr)
	if code != 0 {
		t.Fatalf("create: exit %d: %s", code, stderr)
	}
	var created struct {
		Session struct {
			SessionID string `json:"session_id"`
		} `json:"session"`
	}
	if err := json.Unmarshal([]byte(stdout), &created); err != nil {
		t.Fatalf("%v: %s", err, stdout)
	}
	if code, _, stderr := cli("session", "state", "update", "--session", created.Session.SessionID, "--scope", "app:x",
		"--set", "k=7", "--addr", addr); code != 0 {
		t.Fatalf("update: exit %d: %s", code, stderr)
	}
	code, stdout, stderr = cli("session", "state", "get", "--scope", "app:x", "--addr", addr)
	if code != 0 {
		t.Fatalf("get: exit %d: %s", code, stderr)
	}
	var got map[string]json.RawMessage
	if err := json.Unmarshal([]byte(stdout), &got); err != nil {
		t.Fatalf("%v: %s", err, stdout)
	}
	if _, ok := got["state_json"]; ok || len(got) != 1 || !strings.Contains(string(got["scopes"]), `"app:x"`) ||
		!strings.Contains(string(got["scopes"]), `\"k\":7`) {
		t.Fatalf("state get --scope: %s; want only the scope app:x with k=7", stdout)
	}
}

// A plaintext client against a node that serves TLS is told the node may
// require TLS, and which flag to use.
func TestPlaintextAgainstTLSHints(t *testing.T) {
	cert, key := selfSigned(t)
	addr := startNode(t, func(c *server.Config) { c.TLSCert, c.TLSKey = cert, key })
	code, _, stderr := cli("session", "get", "--session", "01JDQ6Z1V3T9Q2B8W4X5Y6Z7A8", "--addr", addr, "--timeout", "10s")
	if code != exitUnavailable || !strings.Contains(stderr, "the node may require TLS: use --tls-ca") {
		t.Fatalf("exit %d, stderr %q; want %d with a TLS hint", code, stderr, exitUnavailable)
	}
	// With TLS it is served (NOT_FOUND: the session does not exist).
	code, _, stderr = cli("session", "get", "--session", "01JDQ6Z1V3T9Q2B8W4X5Y6Z7A8", "--addr", addr, "--tls-ca", cert)
	if code != exitNotFound {
		t.Fatalf("with --tls-ca: exit %d, %s", code, stderr)
	}
}

// selfSigned writes a certificate for 127.0.0.1 (its own CA) and its key.
func selfSigned(t *testing.T) (certFile, keyFile string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "node"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, IsCA: true, BasicConstraintsValid: true,
		KeyUsage:    x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder}), 0o600); err != nil {
		t.Fatal(err)
	}
	return certFile, keyFile
}

// Every command the plans' recovery advice names, in its command or in
// backquotes in its hint, is a command of this CLI whose flags parse.
func TestRecoveryAdviceNamesCommandsOfThisCLI(t *testing.T) {
	const id = "01JDQ6Z1V3T9Q2B8W4X5Y6Z7A8"
	quoted := regexp.MustCompile("`([^`]+)`")
	var advice []plan.Decision
	for _, r := range plan.Table() {
		advice = append(advice, plan.Decide(r.Classification, id, 1, 3))
		if r.Retriable {
			advice = append(advice, plan.Decide(r.Classification, id, 4, 3)) // retries exhausted
		}
	}
	for _, d := range advice {
		commands := []string{d.Command}
		for _, m := range quoted.FindAllStringSubmatch(d.Hint, -1) {
			commands = append(commands, m[1])
		}
		for _, c := range commands {
			words := strings.Fields(c)
			if len(words) < 2 || words[0] != "node" {
				t.Errorf("advice %q names %q, not a node command", d.Hint, c)
				continue
			}
			root := newRootCommand(io.Discard, io.Discard)
			cmd, rest, err := root.Find(words[1:])
			if err != nil || !cmd.Runnable() || cmd == root {
				t.Errorf("%q: not a command of this CLI (%v)", c, err)
				continue
			}
			if err := cmd.ParseFlags(rest); err != nil || len(cmd.Flags().Args()) > 0 {
				t.Errorf("%q: flags do not parse: %v %v", c, err, cmd.Flags().Args())
			}
		}
	}
}
