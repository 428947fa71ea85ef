package storetest

import (
	"context"
	"sync"
	"testing"

	auditv1 "github.com/agentstate/agentstate/messages/agentstate/audit/v1"
	sessionv1 "github.com/agentstate/agentstate/messages/agentstate/session/v1"
	"github.com/agentstate/agentstate/messages/errs"
	"github.com/agentstate/agentstate/messages/ids"
	"github.com/agentstate/agentstate/persistence"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// The stores' own tests of opening and closing handles share these.

// CreateSession commits one session (with an audit entry) through a fresh
// writer of s and returns its id.
func CreateSession(t testing.TB, s persistence.Store) string {
	t.Helper()
	w, err := s.Writer()
	if err != nil {
		t.Fatalf("Writer: %v", err)
	}
	defer w.Release()
	id := ids.New()
	now := timestamppb.Now()
	res, err := w.Apply(context.Background(), []persistence.Command{&persistence.CreateSession{
		Session: &sessionv1.Session{SessionId: id, ActorName: "a", Namespace: "n", CreatedAt: now, UpdatedAt: now},
		Audit:   []*auditv1.AuditEntry{{EventId: ids.New(), EventType: "session_created", CreatedAt: now}},
	}})
	if err != nil || res[0].Err != nil {
		t.Fatalf("create session: %v %v", err, res)
	}
	return id
}

// AtOnce runs f(0) to f(n-1) on n goroutines released together, as
// openers racing each other, and returns when all have returned.
func AtOnce(n int, f func(i int)) {
	var start, done sync.WaitGroup
	start.Add(1)
	for i := range n {
		done.Add(1)
		go func() {
			defer done.Done()
			start.Wait()
			f(i)
		}()
	}
	start.Done()
	done.Wait()
}

// OneHandle fails the test unless every open succeeded (openErrs) and
// returned the same handle.
func OneHandle[S comparable](t testing.TB, stores []S, openErrs []error) {
	t.Helper()
	for i := range stores {
		if openErrs[i] != nil {
			t.Fatalf("Open %d: %v", i, openErrs[i])
		}
		if stores[i] != stores[0] {
			t.Fatalf("Open %d returned another handle", i)
		}
	}
}

// CheckClosed checks a handle after its last Close: its writer and its
// reads (of session id) answer UNAVAILABLE, and another Close is
// FAILED_PRECONDITION.
func CheckClosed(t testing.TB, s persistence.Store, id string) {
	t.Helper()
	if _, err := s.Writer(); errs.CodeOf(err) != errs.UnavailableCode {
		t.Fatalf("Writer after the last Close: %v, want UNAVAILABLE", err)
	}
	if _, err := s.Reader().GetSession(context.Background(), id); errs.CodeOf(err) != errs.UnavailableCode {
		t.Fatalf("read after the last Close: %v, want UNAVAILABLE", err)
	}
	if err := s.Close(); errs.CodeOf(err) != errs.FailedPreconditionCode {
		t.Fatalf("extra Close: %v, want FAILED_PRECONDITION", err)
	}
}
