package server

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	feedv1 "github.com/agentstate/agentstate/messages/agentstate/feed/v1"
	sessionv1 "github.com/agentstate/agentstate/messages/agentstate/session/v1"
	"github.com/agentstate/agentstate/node/client"
	"github.com/agentstate/agentstate/tests/testpki"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// writeFile replaces path's content the way an operator's tooling should:
// a new file renamed over the old, so a reload never reads half of it.
func writeFile(t *testing.T, path, content string) {
	t.Helper()
	tmp := path + ".new"
	if err := os.WriteFile(tmp, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

func appIdentities(tokens ...string) string {
	var hs []string
	for _, tok := range tokens {
		hs = append(hs, `"`+hashHex(tok)+`"`)
	}
	return `{"principals":[{"name":"app","token_sha256":[` + strings.Join(hs, ",") +
		`],"grants":[{"namespace":"local","role":"admin"}]}]}`
}

// Token rotation without downtime: add the new token, reload, switch to
// it, remove the old one, reload: the old token is refused after the
// second reload, and never before. A stream opened with the old token
// before the rotation keeps being served (reloads drop no connection), and
// a reload of a broken file keeps the identities in force.
func TestTokenRotation(t *testing.T) {
	path := filepath.Join(t.TempDir(), "identities.json")
	writeFile(t, path, appIdentities("old"))
	n := startAuthNode(t, path, nil)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	old, next := testPrincipal{name: "app", token: "old"}, testPrincipal{name: "app", token: "new"}
	call := func(p testPrincipal) codes.Code {
		_, err := n.ss.List(as(ctx, p), &sessionv1.ListSessionsRequest{})
		return status.Code(err)
	}
	cr, err := n.ss.Create(as(ctx, old), &sessionv1.CreateSessionRequest{ActorName: "rotating"})
	if err != nil {
		t.Fatal(err)
	}
	tail, err := feedv1.NewFeedServiceClient(n.conn).TailSession(as(ctx, old), &feedv1.TailSessionRequest{SessionId: cr.GetSession().GetSessionId()})
	if err != nil {
		t.Fatal(err)
	}
	if got := call(next); got != codes.Unauthenticated {
		t.Fatalf("the new token before it was added: %v", got)
	}

	writeFile(t, path, appIdentities("old", "new"))
	if err := n.s.reloadAuth(); err != nil {
		t.Fatal(err)
	}
	if a, b := call(old), call(next); a != codes.OK || b != codes.OK {
		t.Fatalf("with both tokens: old %v, new %v; want both OK", a, b)
	}

	writeFile(t, path, `{"principals":[`) // a broken edit
	if err := n.s.reloadAuth(); err == nil || !strings.Contains(err.Error(), "previous ones stay in force") {
		t.Fatalf("reload of a broken file: %v", err)
	}
	if a, b := call(old), call(next); a != codes.OK || b != codes.OK {
		t.Fatalf("after a failed reload: old %v, new %v; want both OK", a, b)
	}

	writeFile(t, path, appIdentities("new"))
	if err := n.s.reloadAuth(); err != nil {
		t.Fatal(err)
	}
	if a, b := call(old), call(next); a != codes.Unauthenticated || b != codes.OK {
		t.Fatalf("after the old token was removed: old %v, new %v; want UNAUTHENTICATED, OK", a, b)
	}
	// The stream admitted with the old token still delivers.
	if _, err := n.ss.Append(as(ctx, next), &sessionv1.AppendRequest{SessionId: cr.GetSession().GetSessionId(),
		Messages: []*sessionv1.NewMessage{{Role: sessionv1.Role_ROLE_USER, Content: "after the rotation"}}}); err != nil {
		t.Fatal(err)
	}
	ev, err := tail.Recv()
	if err != nil || ev.GetMessage().GetContent() != "after the rotation" {
		t.Fatalf("the stream opened before the rotation: %v, %v", ev, err)
	}
}

// Principals authenticate by client certificate: a URI SAN (SPIFFE id) or
// a DNS SAN of a certificate the node's --tls-client-ca verified; a
// certificate naming no principal, or of another CA, is no credential.
func TestClientCertificatePrincipals(t *testing.T) {
	pki := testpki.New(t)
	nodeCert, nodeKey := pki.Leaf(t, "node")
	spiffeCert, spiffeKey := pki.ClientLeaf(t, "spiffe", nil, []string{"spiffe://example.org/ns/a/sa/app"})
	dnsCert, dnsKey := pki.ClientLeaf(t, "dns", []string{"Worker.Example.org"}, nil)
	strangerCert, strangerKey := pki.ClientLeaf(t, "stranger", []string{"stranger.example.org"}, nil)
	rogueCert, rogueKey := pki.RogueLeaf(t, "rogue")
	path := filepath.Join(t.TempDir(), "identities.json")
	writeFile(t, path, `{"principals":[
		{"name":"spiffe-reader","uri_sans":["spiffe://example.org/ns/a/sa/app"],"grants":[{"namespace":"local","role":"reader"}]},
		{"name":"dns-writer","dns_sans":["worker.example.org"],"grants":[{"namespace":"local","role":"writer"}]},
		{"name":"root","token_sha256":["`+hashHex("tok-root")+`"],"operator":true,"grants":[{"namespace":"*","role":"admin"}]}]}`)

	// Without --tls-client-ca the file cannot work: refused at start.
	cfg := DefaultConfig()
	cfg.Data, cfg.GRPCAddr, cfg.HTTPAddr, cfg.AuthFile = "memory:"+t.Name()+"-nocA", "127.0.0.1:0", "", path
	if s, err := startServer(cfg, quietLog()); err == nil || !strings.Contains(err.Error(), "--tls-client-ca") {
		if s != nil {
			s.shutdown(time.Second)
		}
		t.Fatalf("start without --tls-client-ca: %v", err)
	}

	pool := x509.NewCertPool()
	ca, _ := os.ReadFile(pki.CA)
	pool.AppendCertsFromPEM(ca)
	tlsTo := func(cert, key string) client.Options {
		o := client.Options{RootCAs: pool, ServerName: "localhost"}
		if cert != "" {
			c, err := tls.LoadX509KeyPair(cert, key)
			if err != nil {
				t.Fatal(err)
			}
			o.Certificates = []tls.Certificate{c}
		}
		return o
	}
	n := startAuthNode(t, path, func(c *Config) { c.TLSCert, c.TLSKey, c.TLSClientCA = nodeCert, nodeKey, pki.CA }, tlsTo("", ""))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cr, err := n.ss.Create(as(ctx, rootPrincipal), &sessionv1.CreateSessionRequest{ActorName: "certs"})
	if err != nil {
		t.Fatal(err)
	}
	id := cr.GetSession().GetSessionId()
	appendAs := func(o client.Options) (read, write codes.Code) {
		conn, err := client.Dial(n.s.grpcAddr, o)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		ss := sessionv1.NewSessionServiceClient(conn)
		_, rerr := ss.Get(ctx, &sessionv1.GetSessionRequest{SessionId: id})
		_, werr := ss.Append(ctx, &sessionv1.AppendRequest{SessionId: id, Messages: []*sessionv1.NewMessage{{Role: sessionv1.Role_ROLE_USER, Content: "x"}}})
		return status.Code(rerr), status.Code(werr)
	}
	for _, c := range []struct {
		name        string
		opt         client.Options
		read, write codes.Code
	}{
		{"SPIFFE id of a reader", tlsTo(spiffeCert, spiffeKey), codes.OK, codes.PermissionDenied},
		{"DNS SAN of a writer, other case", tlsTo(dnsCert, dnsKey), codes.OK, codes.OK},
		{"a certificate naming no principal", tlsTo(strangerCert, strangerKey), codes.Unauthenticated, codes.Unauthenticated},
		{"no certificate, no token", tlsTo("", ""), codes.Unauthenticated, codes.Unauthenticated},
	} {
		if r, w := appendAs(c.opt); r != c.read || w != c.write {
			t.Errorf("%s: read %v, append %v; want %v, %v", c.name, r, w, c.read, c.write)
		}
	}
	// A certificate of another CA fails the handshake: no call is made.
	if r, _ := appendAs(tlsTo(rogueCert, rogueKey)); r == codes.OK || r == codes.PermissionDenied {
		t.Errorf("a rogue certificate: read %v", r)
	}
}

// A node without --auth-file or --auth-token-file says at start that it
// authenticates nobody, and has nothing to reload.
func TestNodeWithoutAuthSaysSo(t *testing.T) {
	logs := &lockedWriter{}
	log, err := NewLogger(logs, "json", "info")
	if err != nil {
		t.Fatal(err)
	}
	cfg := DefaultConfig()
	cfg.Data, cfg.GRPCAddr, cfg.HTTPAddr = "memory:"+t.Name(), "127.0.0.1:0", ""
	s, err := startServer(cfg, log)
	if err != nil {
		t.Fatal(err)
	}
	defer s.shutdown(10 * time.Second)
	if err := s.reloadAuth(); err == nil || !strings.Contains(err.Error(), "nothing to reload") {
		t.Errorf("reload without authentication: %v", err)
	}
	out := logs.String()
	if !strings.Contains(out, `"auth":"none"`) || !strings.Contains(out, "authenticates nobody") {
		t.Errorf("the start does not say the node authenticates nobody:\n%s", out)
	}
}

// lockedWriter is a log destination read while the node may still write.
type lockedWriter struct {
	mu sync.Mutex
	b  strings.Builder
}

func (w *lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

func (w *lockedWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}
