package e2e_test

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	planv1 "github.com/agentstate/agentstate/messages/agentstate/plan/v1"
	sessionv1 "github.com/agentstate/agentstate/messages/agentstate/session/v1"
)

const exitPermissionDenied = 12

func tokenHash(tok string) string {
	h := sha256.Sum256([]byte(tok))
	return hex.EncodeToString(h[:])
}

// identities is an --auth-file: "app" writes namespace team with the
// tokens given, "auditor" reads it, "other" is another tenant.
func identities(appTokens ...string) string {
	var hs []string
	for _, tok := range appTokens {
		hs = append(hs, `"`+tokenHash(tok)+`"`)
	}
	return `{"principals":[
  {"name":"app","token_sha256":[` + strings.Join(hs, ",") + `],"grants":[{"namespace":"team","role":"writer"}]},
  {"name":"auditor","token_sha256":["` + tokenHash("auditor-token") + `"],"grants":[{"namespace":"team","role":"reader"}]},
  {"name":"other","token_sha256":["` + tokenHash("other-token") + `"],"grants":[{"namespace":"other","role":"admin"}]}]}`
}

// replaceFile writes path's new content to a file renamed over it, so a
// reload never reads half of it.
func replaceFile(t *testing.T, path, content string) {
	t.Helper()
	writeFile(t, path+".new", content)
	if err := os.Rename(path+".new", path); err != nil {
		t.Fatal(err)
	}
}

// waitLog waits until the node logged want at least n times.
func (n *nodeProc) waitLog(want string, count int) {
	n.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	ctx := ctxT(n.t)
	for strings.Count(n.logText(), want) < count {
		if time.Now().After(deadline) {
			n.t.Fatalf("the node did not log %q %d times:\n%s", want, count, n.logText())
		}
		waitBriefly(ctx)
	}
}

// TestAuthFileTenantsAndTokenRotation runs a node with an --auth-file: a
// reader may read but not append (PERMISSION_DENIED, exit 12); a session
// of another namespace does not exist for the app (exit 4); a token is
// rotated with two SIGHUP reloads, the old one refused after the second;
// a reload of a broken file keeps the identities in force and says why.
func TestAuthFileTenantsAndTokenRotation(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "identities.json")
	writeFile(t, path, identities("old-token"))
	tok := func(name, value string) []string {
		f := filepath.Join(dir, name)
		writeFile(t, f, value)
		return []string{"--token-file", f}
	}
	oldTok, newTok, auditor, other := tok("old", "old-token"), tok("new", "new-token"), tok("auditor", "auditor-token"), tok("other", "other-token")
	n := startNode(t, "--auth-file", path)
	if !strings.Contains(n.logText(), `"auth":"auth-file"`) {
		t.Errorf("the serving line does not say how the node authenticates:\n%s", n.logText())
	}

	var created sessionv1.CreateSessionResponse
	n.cli(oldTok, "session", "create", "--actor", "a", "--namespace", "team").ok(t, &created)
	id := created.GetSession().GetSessionId()
	n.cli(auditor, "session", "get", "--session", id).ok(t)
	n.cli(auditor, "session", "append", "--session", id, "--role", "user", "--content", "hi").fails(t, exitPermissionDenied, "PERMISSION_DENIED")
	n.cli(oldTok, "session", "create", "--actor", "a", "--namespace", "elsewhere").fails(t, exitPermissionDenied, "PERMISSION_DENIED")
	// A session of a namespace app cannot read is, for app, missing.
	var theirs sessionv1.CreateSessionResponse
	n.cli(other, "session", "create", "--actor", "o", "--namespace", "other").ok(t, &theirs)
	n.cli(oldTok, "session", "get", "--session", theirs.GetSession().GetSessionId()).fails(t, exitNotFound, "NOT_FOUND")
	n.cli(oldTok, "session", "delete", "--yes", "--session", theirs.GetSession().GetSessionId()).fails(t, exitNotFound, "NOT_FOUND")
	// A plan is (namespace, plan id): one plan id is two plans in two
	// namespaces, and the other tenant's is, for app, missing.
	recordOn := func(tok []string, ns string) *planv1.ErrorRecord {
		t.Helper()
		var r planv1.RecordErrorResponse
		n.cli(tok, "plan", "record-error", "--namespace", ns, "--plan", "deploy", "--phase", "execute", "--type", "TimeoutError").ok(t, &r)
		return r.GetRecord()
	}
	if a, b := recordOn(oldTok, "team"), recordOn(other, "other"); a.GetSequence() != 0 || b.GetSequence() != 0 ||
		a.GetNamespace() != "team" || b.GetNamespace() != "other" {
		t.Fatalf("the first records of team's and other's plan deploy: %v, %v", a, b)
	}
	recordOn(oldTok, "team")
	var hist planv1.HistoryResponse
	n.cli(auditor, "plan", "history", "--namespace", "team", "--plan", "deploy").ok(t, &hist)
	if len(hist.GetRecords()) != 2 {
		t.Fatalf("team's plan deploy has %d records, want 2", len(hist.GetRecords()))
	}
	n.cli(auditor, "plan", "record-success", "--namespace", "team", "--plan", "deploy", "--phase", "execute").
		fails(t, exitPermissionDenied, "PERMISSION_DENIED")
	n.cli(oldTok, "plan", "history", "--namespace", "other", "--plan", "deploy").fails(t, exitNotFound, "NOT_FOUND")
	n.cli(oldTok, "plan", "policy", "--namespace", "other", "--plan", "deploy", "--max-retries", "1").fails(t, exitNotFound, "NOT_FOUND")
	hup := func() {
		if err := n.cmd.Process.Signal(syscall.SIGHUP); err != nil {
			t.Fatal(err)
		}
	}

	replaceFile(t, path, identities("old-token", "new-token"))
	hup()
	n.waitLog("auth reloaded", 1)
	n.cli(oldTok, "session", "get", "--session", id).ok(t)
	n.cli(newTok, "session", "get", "--session", id).ok(t)

	replaceFile(t, path, `{"principals": [`)
	hup()
	n.waitLog("auth reload failed", 1)
	n.cli(newTok, "session", "get", "--session", id).ok(t)

	replaceFile(t, path, identities("new-token"))
	hup()
	n.waitLog("auth reloaded", 2)
	n.cli(oldTok, "session", "get", "--session", id).fails(t, exitUnauthenticated, "UNAUTHENTICATED")
	n.cli(newTok, "session", "append", "--session", id, "--role", "user", "--content", "rotated").ok(t)
	if !n.alive() {
		t.Fatal("the node stopped on SIGHUP")
	}
}
