package e2e_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"path/filepath"
	"strings"
	"testing"
	"time"

	auditv1 "github.com/agentstate/agentstate/messages/agentstate/audit/v1"
	sessionv1 "github.com/agentstate/agentstate/messages/agentstate/session/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// TestTokenAndTLS runs a node with TLS and a bearer token: requests
// without the right token are UNAUTHENTICATED (CLI exit 9) and leave an
// auth_failure audit entry; with it they work; a plaintext client cannot
// talk to it at all.
func TestTokenAndTLS(t *testing.T) {
	p := newPKI(t)
	tokenFile := filepath.Join(t.TempDir(), "token")
	writeFile(t, tokenFile, "correct-horse-battery-staple\n")
	wrongFile := filepath.Join(t.TempDir(), "wrong")
	writeFile(t, wrongFile, "incorrect-horse")
	n := startNode(t, "--auth-token-file", tokenFile, "--tls-cert", p.NodeCert, "--tls-key", p.NodeKey)

	tlsFlags := []string{"--tls-ca", p.CA}
	n.cli(tlsFlags, "session", "list").fails(t, exitUnauthenticated, "UNAUTHENTICATED")
	n.cli(append(tlsFlags, "--token-file", wrongFile), "session", "list").fails(t, exitUnauthenticated, "UNAUTHENTICATED")
	var created sessionv1.CreateSessionResponse
	n.cli(append(tlsFlags, "--token-file", tokenFile), "session", "create", "--actor", "authed").ok(t, &created)
	// The token also comes from the environment.
	runCLI(t, []string{"AGENTSTATE_TOKEN_FILE=" + tokenFile, "AGENTSTATE_TLS_CA=" + p.CA},
		"session", "get", "--session", created.GetSession().GetSessionId(), "--addr", n.grpcAddr()).ok(t)
	// Plaintext against a TLS node: the connection fails, UNAVAILABLE.
	n.cli([]string{"--token-file", tokenFile, "--timeout", "3s"}, "session", "list").fails(t, 8, "UNAVAILABLE")

	// A Go client: every service, health included, needs the token.
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM([]byte(readFile(t, p.CA)))
	conn, err := grpc.NewClient(n.grpcAddr(), grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{RootCAs: pool})))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx := ctxT(t)
	if _, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{}); status.Code(err) != codes.Unauthenticated {
		t.Fatalf("health without token: %v, want UNAUTHENTICATED", err)
	}
	_, err = auditv1.NewAuditServiceClient(conn).Count(metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer nope"), &auditv1.CountRequest{})
	if st, _ := status.FromError(err); st.Code() != codes.Unauthenticated || strings.Contains(st.Message(), "correct-horse") {
		t.Fatalf("wrong token: %v, want UNAUTHENTICATED without the token in the message", err)
	}
	authed := metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer correct-horse-battery-staple")
	audit := auditv1.NewAuditServiceClient(conn)

	// Four rejections so far (2 CLI, health, Count). Their entries are
	// written off the request path, so wait for them with a deadline.
	const rejected = 4
	deadline := time.Now().Add(30 * time.Second)
	var entries []*auditv1.AuditEntry
	for {
		if _, err := audit.Flush(authed, &auditv1.FlushRequest{}); err != nil {
			t.Fatalf("Flush: %v", err)
		}
		l, err := audit.List(authed, &auditv1.ListRequest{Filter: &auditv1.Filter{EventType: "auth_failure"}, Limit: 100})
		if err != nil {
			t.Fatalf("List: %v", err)
		}
		entries = l.GetEntries()
		if len(entries) >= rejected || time.Now().After(deadline) {
			break
		}
		waitBriefly(authed)
	}
	if len(entries) != rejected {
		t.Fatalf("%d auth_failure entries, want %d", len(entries), rejected)
	}
	var methods []string
	for _, e := range entries {
		if e.GetUserIdentity() == "" || !strings.Contains(e.GetDetailsJson(), "reason") {
			t.Errorf("auth_failure entry %v lacks the peer or the reason", e)
		}
		methods = append(methods, e.GetDetailsJson())
	}
	all := strings.Join(methods, " ")
	for _, want := range []string{"SessionService/List", "Health/Check", "AuditService/Count", "missing bearer token", "wrong bearer token"} {
		if !strings.Contains(all, want) {
			t.Errorf("auth_failure entries do not mention %q: %s", want, all)
		}
	}
}

// waitBriefly paces a poll loop without sleeping on the test goroutine's
// clock alone: it returns after a short interval or when ctx ends.
func waitBriefly(ctx context.Context) {
	tm := time.NewTimer(50 * time.Millisecond)
	defer tm.Stop()
	select {
	case <-tm.C:
	case <-ctx.Done():
	}
}
