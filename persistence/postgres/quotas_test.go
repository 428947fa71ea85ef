package postgres

import (
	"testing"

	"github.com/agentstate/agentstate/messages/errs"
	"github.com/agentstate/agentstate/messages/ids"
	"github.com/agentstate/agentstate/persistence"
)

type oneQuota persistence.Quota

func (q oneQuota) Quota(string) persistence.Quota { return persistence.Quota(q) }

// Two nodes' writers create in a namespace with one slot left: the second
// waits for the first's namespace lock until it commits, then counts its
// session and is refused. Without the lock both would count the slot free
// under READ COMMITTED and both commit.
func TestSessionsQuotaAcrossWriters(t *testing.T) {
	a, b := twoNodes(t)
	for _, n := range []*node{a, b} {
		n.store.SetQuotas(oneQuota{MaxSessions: 2})
	}
	a.ok(&persistence.CreateSession{Session: newSession(ids.New())})
	reached, release := holdCommit(t, a)
	first := applyAsync(a, &persistence.CreateSession{Session: newSession(ids.New())})
	<-reached
	second := newSession(ids.New())
	done := applyAsync(b, &persistence.CreateSession{Session: second})
	waitLockWait(t, b.pid, done)
	release()
	if got := <-first; got.err != nil || got.res[0].Err != nil {
		t.Fatalf("the create that took the last slot: %v %v", got.err, got.res)
	}
	got := <-done
	if got.err != nil {
		t.Fatal(got.err)
	}
	if errs.CodeOf(got.res[0].Err) != errs.FailedPreconditionCode {
		t.Fatalf("the other node's create for the same slot: %v, want FAILED_PRECONDITION", got.res[0].Err)
	}
	if _, err := b.store.Reader().GetSession(t.Context(), second.SessionId); errs.CodeOf(err) != errs.NotFoundCode {
		t.Fatalf("the refused session was stored: %v", err)
	}
}
