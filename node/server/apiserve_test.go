package server

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net"
	"testing"

	auditv1 "github.com/agentstate/agentstate/messages/agentstate/audit/v1"
	planv1 "github.com/agentstate/agentstate/messages/agentstate/plan/v1"
	sessionv1 "github.com/agentstate/agentstate/messages/agentstate/session/v1"
	"github.com/agentstate/agentstate/node/client"
)

// serveAPI serves the API with services and opt on a loopback port, until
// the test's end, and returns it and its address.
func serveAPI(t *testing.T, services apiServices, opt apiOptions) (*apiServer, string) {
	t.Helper()
	a, err := newAPIServer(services, opt, newMetrics(), quietLog())
	if err != nil {
		t.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = a.srv.Serve(lis) }()
	t.Cleanup(a.srv.Stop)
	return a, lis.Addr().String()
}

// serveSessions serves the API with sessions svc (plans and audit
// unimplemented) on a loopback port and returns its address.
func serveSessions(t *testing.T, svc sessionv1.SessionServiceServer, opt apiOptions) string {
	t.Helper()
	_, addr := serveAPI(t, apiServices{
		Sessions: svc,
		Plans:    planv1.UnimplementedPlanServiceServer{},
		Audit:    auditv1.UnimplementedAuditServiceServer{},
	}, opt)
	return addr
}

// dialSessions is a sessions client of the API at addr that presents
// token; its connection closes at the test's end.
func dialSessions(t *testing.T, addr, token string) sessionv1.SessionServiceClient {
	t.Helper()
	conn, err := client.Dial(addr, client.Options{Token: token})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return sessionv1.NewSessionServiceClient(conn)
}

// floodAndHonest are the two admin principals of the fair-share tests:
// "flood", of the token "flood-token", and "honest", of "honest-token".
func floodAndHonest(t *testing.T) *identities {
	t.Helper()
	ids, err := parseIdentities([]byte(fmt.Sprintf(`{"principals": [
		{"name": "flood", "token_sha256": [%q], "grants": [{"namespace": "*", "role": "admin"}]},
		{"name": "honest", "token_sha256": [%q], "grants": [{"namespace": "*", "role": "admin"}]}]}`,
		tokenHash("flood-token"), tokenHash("honest-token"))))
	if err != nil {
		t.Fatal(err)
	}
	return ids
}

func tokenHash(tok string) string {
	h := sha256.Sum256([]byte(tok))
	return hex.EncodeToString(h[:])
}
