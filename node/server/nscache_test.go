package server

import (
	"context"
	"fmt"
	"testing"
	"time"

	sessionv1 "github.com/agentstate/agentstate/messages/agentstate/session/v1"
	"github.com/agentstate/agentstate/messages/errs"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// A remembered session costs no store read; misses are not remembered;
// the cache holds at most its bound and keeps what is used.
func TestNamespaceCacheRemembersFoundSessionsOnly(t *testing.T) {
	c := newNamespaceCache(4)
	reads := 0
	load := func(_ context.Context, id string) (string, error) {
		reads++
		if id == "missing" {
			return "", errs.NotFound("session %s not found", id)
		}
		return "ns-" + id, nil
	}
	ctx := context.Background()
	for i := 0; i < 3; i++ {
		ns, cached, err := c.get(ctx, "s1", load)
		if err != nil || ns != "ns-s1" || cached != (i > 0) {
			t.Fatalf("lookup %d: %q %v %v", i, ns, cached, err)
		}
		if _, _, err := c.get(ctx, "missing", load); status.Code(err) != codes.NotFound {
			t.Fatalf("missing: %v", err)
		}
	}
	if reads != 4 {
		t.Fatalf("%d store reads, want 1 for s1 and 3 for the missing id", reads)
	}
	for i := 0; i < 20; i++ {
		if _, _, err := c.get(ctx, fmt.Sprint("x", i), load); err != nil {
			t.Fatal(err)
		}
		if _, cached, _ := c.get(ctx, "s1", load); i > 0 && !cached {
			t.Fatalf("s1, used on every round, was dropped at round %d", i)
		}
		if n := c.len(); n > 4 {
			t.Fatalf("%d entries, bound 4", n)
		}
	}
}

// A session remembered and then deleted answers NOT_FOUND to every
// principal that could read it, whatever the method needs: the refusal a
// remembered namespace would give (PERMISSION_DENIED for a reader's
// append) is decided again from the store.
func TestDeletedSessionIsNotFoundDespiteTheCache(t *testing.T) {
	reader := testPrincipal{name: "reader-a", token: "tok-reader-a", roles: map[string]role{nsA: roleReader}}
	writer := testPrincipal{name: "writer-a", token: "tok-writer-a", roles: map[string]role{nsA: roleWriter}}
	stranger := testPrincipal{name: "only-b", token: "tok-only-b", roles: map[string]role{nsB: roleAdmin}}
	n := startAuthNode(t, writeIdentities(t, t.TempDir(), rootPrincipal, reader, writer, stranger), nil)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cr, err := n.ss.Create(as(ctx, rootPrincipal), &sessionv1.CreateSessionRequest{ActorName: "doomed"})
	if err != nil {
		t.Fatal(err)
	}
	id := cr.GetSession().GetSessionId()
	for _, p := range []testPrincipal{reader, writer} {
		if _, err := n.ss.ListMessages(as(ctx, p), &sessionv1.ListMessagesRequest{SessionId: id}); err != nil {
			t.Fatalf("%s reads the session: %v", p.name, err)
		}
	}
	app := func(p testPrincipal) error {
		_, err := n.ss.Append(as(ctx, p), &sessionv1.AppendRequest{SessionId: id,
			Messages: []*sessionv1.NewMessage{{Role: sessionv1.Role_ROLE_USER, Content: "x"}}})
		return err
	}
	if err := app(reader); status.Code(err) != codes.PermissionDenied {
		t.Fatalf("a reader's append before the delete: %v, want PERMISSION_DENIED", err)
	}
	if n.s.api.authz.namespaces.len() == 0 {
		t.Fatal("nothing remembered: the test would prove nothing")
	}
	if _, err := n.ss.Delete(as(ctx, rootPrincipal), &sessionv1.DeleteSessionRequest{SessionId: id}); err != nil {
		t.Fatal(err)
	}
	for _, p := range []testPrincipal{reader, writer, stranger} {
		if err := app(p); status.Code(err) != codes.NotFound {
			t.Errorf("%s appends to the deleted session: %v, want NOT_FOUND", p.name, err)
		}
		_, err := n.ss.Delete(as(ctx, p), &sessionv1.DeleteSessionRequest{SessionId: id})
		if status.Code(err) != codes.NotFound {
			t.Errorf("%s deletes the deleted session: %v, want NOT_FOUND", p.name, err)
		}
	}
}
