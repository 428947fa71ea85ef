//go:build linux

package e2e_test

import (
	"net/http"
	"strings"
	"testing"

	sessionv1 "github.com/agentstate/agentstate/messages/agentstate/session/v1"
	"golang.org/x/sys/unix"
)

// TestReadyzFollowsFailingWrites makes every write of the node fail, as a
// full disk does (RLIMIT_FSIZE 0: the kernel refuses each write to any
// file; the checker's fault runs use the same), and checks that /readyz
// turns 503 naming the failure while /healthz stays 200 and reads still
// work, and that /readyz is 200 again once a write commits.
func TestReadyzFollowsFailingWrites(t *testing.T) {
	n := startNode(t)
	ctx := ctxT(t)
	s := sessionv1.NewSessionServiceClient(n.conn())
	cr, err := s.Create(ctx, &sessionv1.CreateSessionRequest{ActorName: "disk"})
	if err != nil {
		t.Fatal(err)
	}
	sid := cr.GetSession().GetSessionId()
	appendOne := func(content string) error {
		_, err := s.Append(ctx, &sessionv1.AppendRequest{SessionId: sid, Messages: []*sessionv1.NewMessage{
			{Role: sessionv1.Role_ROLE_USER, Content: content}}})
		return err
	}
	if code, body := n.httpGet("/readyz"); code != http.StatusOK {
		t.Fatalf("/readyz before the fault = %d %q", code, body)
	}

	pid := n.cmd.Process.Pid
	var lim unix.Rlimit
	if err := unix.Prlimit(pid, unix.RLIMIT_FSIZE, nil, &lim); err != nil {
		t.Fatal(err)
	}
	if err := unix.Prlimit(pid, unix.RLIMIT_FSIZE, &unix.Rlimit{Cur: 0, Max: lim.Max}, nil); err != nil {
		t.Fatal(err)
	}
	// The writer reports a transaction's outcome before it answers the
	// request, so once the append has failed /readyz knows.
	if err := appendOne("refused"); err == nil {
		t.Fatal("an append succeeded with every file write refused")
	}
	code, body := n.httpGet("/readyz")
	if code != http.StatusServiceUnavailable || !strings.Contains(body, "writes failing") {
		t.Fatalf("/readyz while writes fail = %d %q, want 503 saying writes are failing", code, body)
	}
	if code, body := n.httpGet("/healthz"); code != http.StatusOK {
		t.Fatalf("/healthz while writes fail = %d %q, want 200 (the process lives)", code, body)
	}
	if _, err := s.Get(ctx, &sessionv1.GetSessionRequest{SessionId: sid}); err != nil {
		t.Fatalf("a read while writes fail: %v", err)
	}

	if err := unix.Prlimit(pid, unix.RLIMIT_FSIZE, &lim, nil); err != nil {
		t.Fatal(err)
	}
	if err := appendOne("stored"); err != nil {
		t.Fatalf("an append after the fault was lifted: %v", err)
	}
	if code, body := n.httpGet("/readyz"); code != http.StatusOK {
		t.Fatalf("/readyz after a write committed again = %d %q, want 200", code, body)
	}
}
