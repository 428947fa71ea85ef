package server

import (
	"context"
	"testing"

	auditv1 "github.com/agentstate/agentstate/messages/agentstate/audit/v1"
	feedv1 "github.com/agentstate/agentstate/messages/agentstate/feed/v1"
	"google.golang.org/grpc/codes"
)

// Audit reads and the change feed return only entries of namespaces the
// principal reads, without naming a session: a principal of one namespace
// has its reads narrowed to it (by the stored, indexed namespace), one of
// several has them trimmed entry by entry, and a namespace it cannot read
// is refused. B's entries are invisible to A's principals and the other way
// round; the operator sees all.
func TestAuditReadsShowOnlyReadableNamespaces(t *testing.T) {
	readerA := testPrincipal{name: "reader-a", token: "tok-reader-a", roles: map[string]role{nsA: roleReader}}
	onlyB := testPrincipal{name: "only-b", token: "tok-only-b", roles: map[string]role{nsB: roleAdmin}}
	// Two grants: no single namespace to narrow to.
	multi := testPrincipal{name: "multi", token: "tok-multi", roles: map[string]role{nsB: roleReader, "c": roleReader}}
	operator := testPrincipal{name: "operator", token: "tok-operator", operator: true}
	n := startAuthNode(t, writeIdentities(t, t.TempDir(), rootPrincipal, readerA, onlyB, multi, operator), nil)
	ctx := context.Background()
	fa, fb := n.newFixtures(ctx, t)
	// The last entry of each namespace: a tail has seen everything of it
	// once it delivered the marker.
	marker := func(f *fixture) string {
		r, err := n.au.Record(as(ctx, rootPrincipal), &auditv1.RecordRequest{EventType: "resource_modified", SessionId: f.session, Sync: true})
		if err != nil {
			t.Fatal(err)
		}
		return r.GetEntry().GetEventId()
	}
	markA, markB := marker(fa), marker(fb)

	list := func(p testPrincipal, f *auditv1.Filter) ([]*auditv1.AuditEntry, codes.Code) {
		t.Helper()
		var out []*auditv1.AuditEntry
		cursor := ""
		for {
			l, err := n.au.List(as(ctx, p), &auditv1.ListRequest{Filter: f, AfterEventId: cursor, Limit: 3})
			if err != nil {
				return nil, codeOf(err)
			}
			out = append(out, l.GetEntries()...)
			if cursor = l.GetNextCursor(); cursor == "" {
				return out, codes.OK
			}
		}
	}
	namespaces := func(es []*auditv1.AuditEntry) map[string]int {
		m := map[string]int{}
		for _, e := range es {
			m[e.GetNamespace()]++
		}
		return m
	}
	all, _ := list(operator, nil)
	total := namespaces(all)
	if total[nsA] == 0 || total[nsB] == 0 {
		t.Fatalf("operator sees %v; want entries of both namespaces", total)
	}
	for _, c := range []struct {
		p    testPrincipal
		want string
	}{{readerA, nsA}, {onlyB, nsB}, {multi, nsB}} {
		got, code := list(c.p, nil)
		if code != codes.OK {
			t.Fatalf("%s lists without a filter: %v", c.p.name, code)
		}
		if ns := namespaces(got); len(ns) != 1 || ns[c.want] != total[c.want] {
			t.Errorf("%s lists entries of %v; want all %d of %q and nothing else", c.p.name, ns, total[c.want], c.want)
		}
		cnt, err := n.au.Count(as(ctx, c.p), &auditv1.CountRequest{Filter: &auditv1.Filter{Namespace: c.want}})
		if err != nil || cnt.GetCount() != int64(total[c.want]) {
			t.Errorf("%s counts %q: %v %v; want %d", c.p.name, c.want, cnt, err, total[c.want])
		}
	}
	// A namespace not granted is refused, listed or counted.
	if _, code := list(readerA, &auditv1.Filter{Namespace: nsB}); code != codes.PermissionDenied {
		t.Errorf("reader-a lists namespace b: %v, want PERMISSION_DENIED", code)
	}
	if _, err := n.au.Count(as(ctx, onlyB), &auditv1.CountRequest{Filter: &auditv1.Filter{Namespace: nsA}}); codeOf(err) != codes.PermissionDenied {
		t.Errorf("only-b counts namespace a: %v, want PERMISSION_DENIED", err)
	}
	// One namespace is narrowed to; several must be named to be counted.
	if c, err := n.au.Count(as(ctx, readerA), &auditv1.CountRequest{}); err != nil || c.GetCount() != int64(total[nsA]) {
		t.Errorf("reader-a counts without a filter: %v %v; want %d", c, err, total[nsA])
	}
	if _, err := n.au.Count(as(ctx, multi), &auditv1.CountRequest{}); codeOf(err) != codes.PermissionDenied {
		t.Errorf("multi counts without a filter: %v, want PERMISSION_DENIED", err)
	}

	// The change feed from the first entry, up to the principal's marker.
	tail := func(p testPrincipal, until string) map[string]int {
		t.Helper()
		c, cancel := context.WithCancel(as(ctx, p))
		defer cancel()
		st, err := feedv1.NewFeedServiceClient(n.conn).TailChanges(c, &feedv1.TailChangesRequest{})
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]int{}
		for {
			ev, err := st.Recv()
			if err != nil {
				t.Fatalf("%s tail: %v", p.name, err)
			}
			if e := ev.GetEntry(); e != nil {
				got[e.GetNamespace()]++
				if e.GetEventId() == until {
					return got
				}
			}
		}
	}
	if got := tail(readerA, markA); len(got) != 1 || got[nsA] != total[nsA] {
		t.Errorf("reader-a tails %v; want all %d of %q and nothing else", got, total[nsA], nsA)
	}
	for _, p := range []testPrincipal{onlyB, multi} {
		if got := tail(p, markB); len(got) != 1 || got[nsB] != total[nsB] {
			t.Errorf("%s tails %v; want all %d of %q and nothing else", p.name, got, total[nsB], nsB)
		}
	}
	// A server stream's refusal arrives with its first receive.
	st, err := feedv1.NewFeedServiceClient(n.conn).TailChanges(as(ctx, readerA), &feedv1.TailChangesRequest{
		Filter: &feedv1.ChangeFilter{Namespace: nsB}})
	if err == nil {
		_, err = st.Recv()
	}
	if codeOf(err) != codes.PermissionDenied {
		t.Errorf("reader-a tails namespace b: %v, want PERMISSION_DENIED", err)
	}
	// An entry of B is not found for A's reader.
	if _, err := n.au.Get(as(ctx, readerA), &auditv1.GetRequest{EventId: markB}); codeOf(err) != codes.NotFound {
		t.Errorf("reader-a gets b's entry: %v, want NOT_FOUND", err)
	}
}
