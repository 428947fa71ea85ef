package e2e_test

import (
	"path/filepath"
	"testing"

	sessionv1 "github.com/agentstate/agentstate/messages/agentstate/session/v1"
)

// TestTenantsRecipeWorks runs the TLS recipe and then the tenants recipe
// of docs/OPERATIONS.md as written, and serves with their files: each
// tenant authenticates by its certificate and works in its namespace
// only; "reporting" authenticates by the recipe's JWT (a JWKS-verified
// EdDSA token) and reads billing without writing it.
func TestTenantsRecipeWorks(t *testing.T) {
	opensslOrSkip(t)
	dir := t.TempDir()
	runShell(t, dir, tlsRecipe(t))
	runShell(t, dir, docRecipe(t, "A tenants recipe"))
	f := func(name string) string { return filepath.Join(dir, name) }
	n := startNode(t, "--auth-file", f("identities.json"), "--tls-cert", f("node1.pem"), "--tls-key", f("node1-key.pem"),
		"--tls-client-ca", f("ca.pem"))
	as := func(tenant string) []string {
		return []string{"--tls-ca", f("ca.pem"), "--tls-client-cert", f(tenant + ".pem"), "--tls-client-key", f(tenant + "-key.pem")}
	}
	reporting := []string{"--tls-ca", f("ca.pem"), "--token-file", f("reporting.jwt")}

	var created sessionv1.CreateSessionResponse
	n.cli(as("billing"), "session", "create", "--actor", "invoicer", "--namespace", "billing").ok(t, &created)
	id := created.GetSession().GetSessionId()
	n.cli(as("billing"), "session", "append", "--session", id, "--role", "user", "--content", "invoice 1").ok(t)
	n.cli(as("support"), "session", "get", "--session", id).fails(t, exitNotFound, "NOT_FOUND")
	n.cli(as("support"), "session", "create", "--actor", "x", "--namespace", "billing").fails(t, exitPermissionDenied, "PERMISSION_DENIED")
	n.cli(as("support"), "session", "create", "--actor", "helper", "--namespace", "support").ok(t)
	n.cli(reporting, "session", "get", "--session", id).ok(t)
	n.cli(reporting, "session", "append", "--session", id, "--role", "user", "--content", "no").fails(t, exitPermissionDenied, "PERMISSION_DENIED")
	n.cli([]string{"--tls-ca", f("ca.pem")}, "session", "get", "--session", id).fails(t, exitUnauthenticated, "UNAUTHENTICATED")
}
