package storetest

import (
	"fmt"
	"strings"

	sessionv1 "github.com/agentstate/agentstate/messages/agentstate/session/v1"
	"github.com/agentstate/agentstate/messages/errs"
	"github.com/agentstate/agentstate/persistence"
)

// quotaMap is a fixed set of quotas by namespace name.
type quotaMap map[string]persistence.Quota

func (m quotaMap) Quota(ns string) persistence.Quota { return m[ns] }

// inNamespace is a session of namespace ns (with msgs as an import's
// messages).
func (h *harness) inNamespace(ns string, msgs ...*sessionv1.Message) *persistence.CreateSession {
	return &persistence.CreateSession{Session: h.session(func(s *sessionv1.Session) { s.Namespace = ns }), Messages: msgs}
}

// wantQuotaError checks that err is FAILED_PRECONDITION naming the
// namespace and the quota.
func wantQuotaError(h *harness, err error, ns, quota string) {
	h.Helper()
	wantCode(h.T, err, errs.FailedPreconditionCode)
	if msg := errs.From(err).Msg; !strings.Contains(msg, fmt.Sprintf("namespace %q", ns)) || !strings.Contains(msg, quota) {
		h.Fatalf("the quota error does not name namespace %q and %q: %q", ns, quota, msg)
	}
}

// Per-namespace quotas (issue 28) are decided in the writer's transaction:
// a refused write stores nothing, the other namespaces' writes of the same
// batch are stored, and a delete frees its slot.
var quotaCases = []testCase{
	{"a namespace's sessions quota refuses the create past it, and nobody else's", func(h *harness) {
		h.store.SetQuotas(quotaMap{"team-a": {MaxSessions: 2}})
		first := h.inNamespace("team-a")
		h.ok(first)
		// One slot left, two creates in one transaction (an import among
		// them): the first takes it, the second is refused, team-b's
		// create beside them is stored.
		took, refused, other := h.inNamespace("team-a", h.msgs(2)...), h.inNamespace("team-a"), h.inNamespace("team-b")
		res := h.apply(took, refused, other)
		if res[0].Err != nil || res[2].Err != nil {
			h.Fatalf("the creates within the quotas: %v, %v", res[0].Err, res[2].Err)
		}
		wantQuotaError(h, res[1].Err, "team-a", "2 sessions")
		if _, err := h.r.GetSession(h.ctx, refused.Session.SessionId); errs.CodeOf(err) != errs.NotFoundCode {
			h.Fatalf("the refused session was stored: %v", err)
		}
		if n := len(h.messages(took.Session.SessionId)); n != 2 {
			h.Fatalf("the imported session holds %d messages, want 2", n)
		}
		// A delete frees its slot.
		h.ok(&persistence.DeleteSession{SessionID: first.Session.SessionId})
		h.ok(h.inNamespace("team-a"))
		wantQuotaError(h, h.apply(h.inNamespace("team-a"))[0].Err, "team-a", "sessions")
		// Quotas swapped (a reload) apply from the next transaction on.
		h.store.SetQuotas(nil)
		h.ok(h.inNamespace("team-a"))
	}},
	{"the default namespace's quota counts its sessions stored without a namespace", func(h *harness) {
		h.store.SetQuotas(quotaMap{persistence.DefaultScopeNamespace: {MaxSessions: 2}})
		h.ok(h.inNamespace(""))
		h.ok(h.inNamespace(persistence.DefaultScopeNamespace))
		wantQuotaError(h, h.apply(h.inNamespace(""))[0].Err, persistence.DefaultScopeNamespace, "2 sessions")
		wantQuotaError(h, h.apply(h.inNamespace(persistence.DefaultScopeNamespace))[0].Err, persistence.DefaultScopeNamespace, "2 sessions")
	}},
	{"a namespace's quota of keys per shared scope bounds its scopes alone", func(h *harness) {
		h.store.SetQuotas(quotaMap{"small": {MaxScopeKeys: 3}, "big": {MaxScopeKeys: persistence.MaxStateKeys * 4}})
		s := h.create()
		turn := func(sc string, keys ...string) persistence.Turn {
			d := set()
			for _, k := range keys {
				d.SetJson[k] = `1`
			}
			return persistence.Turn{Messages: h.msgs(1), Scopes: scope(sc, d)}
		}
		res := appended(h.ok(&persistence.AppendMessages{SessionID: s.SessionId, UpdatedAt: h.now(), Turns: []persistence.Turn{
			turn("app:small", "a", "b", "c"), turn("user:small/alice", "a", "b", "c", "d"), turn("app:other", "a", "b", "c", "d"),
		}}))
		if res.Turns[0].Err != nil || res.Turns[2].Err != nil {
			h.Fatalf("the turns within the quotas: %v, %v", res.Turns[0].Err, res.Turns[2].Err)
		}
		wantQuotaError(h, res.Turns[1].Err, "small", "3 keys per shared scope")
		if st := h.scopeState("user:small/alice"); st != "" && st != persistence.EmptyState {
			h.Fatalf("the refused scope was stored: %s", st)
		}
		// A quota above the bound of every state is that bound.
		big := make([]string, persistence.MaxStateKeys+1)
		for i := range big {
			big[i] = fmt.Sprintf("k%04d", i)
		}
		res = appended(h.ok(&persistence.AppendMessages{SessionID: s.SessionId, NextSequence: res.NextSequence, UpdatedAt: h.now(),
			Turns: []persistence.Turn{turn("app:big", big[:persistence.MaxStateKeys]...), turn("app:big", big[persistence.MaxStateKeys])}}))
		if res.Turns[0].Err != nil {
			h.Fatal(res.Turns[0].Err)
		}
		wantQuotaError(h, res.Turns[1].Err, "big", fmt.Sprintf("%d keys per shared scope", persistence.MaxStateKeys))
	}},
}
