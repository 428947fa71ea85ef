package storetest

import (
	"context"
	"fmt"
	"testing"
	"time"

	auditv1 "github.com/agentstate/agentstate/messages/agentstate/audit/v1"
	sessionv1 "github.com/agentstate/agentstate/messages/agentstate/session/v1"
	"github.com/agentstate/agentstate/messages/errs"
	"github.com/agentstate/agentstate/messages/ids"
	"github.com/agentstate/agentstate/persistence"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// ReadOnlySwitch is implemented by stores that can make their writer fail
// every write with UNAVAILABLE, as a read-only database file would.
type ReadOnlySwitch interface {
	SetReadOnly(on bool) error
}

// PageLimiter is implemented by stores that can cap their size, so that a
// growing transaction fails with RESOURCE_EXHAUSTED, as on a full disk.
type PageLimiter interface {
	PageCount() (int64, error)
	SetMaxPageCount(n int64) error
}

// Run runs the conformance suite, one subtest per behaviour, each on a
// fresh store from open.
func Run(t *testing.T, open func(t *testing.T) persistence.Store) {
	groups := []struct {
		name  string
		cases []testCase
	}{
		{"sessions", sessionCases},
		{"append", appendCases},
		{"plans", planCases},
		{"plan namespaces", planNamespaceCases},
		{"audit", auditCases},
		{"audit ids", clientAuditCases},
		{"audit principals", auditPrincipalCases},
		{"batch", batchCases},
		{"pool", poolCases},
		{"reader", readerCases},
		{"staged", stagedCases},
		{"fencing", fencingCases},
		{"activation with its first write", foldedCases},
		{"times", timeCases},
		{"tokens", tokenCases},
		{"state and retention", stateCases},
		{"scope deltas in batches", scopeBatchCases},
		{"scope quota", scopeQuotaCases},
		{"namespace quotas", quotaCases},
		{"stored bytes", usageCases},
		{"feed", feedCases},
		{"keyed items", itemCases},
		{"suffix replacement", suffixCases},
		{"removed ids", removedIDCases},
		{"group delete", groupCases},
		{"scopes without a session", scopeCases},
	}
	for _, g := range groups {
		t.Run(g.name, func(t *testing.T) {
			for _, c := range g.cases {
				t.Run(c.name, func(t *testing.T) {
					c.run(newHarness(t, open))
				})
			}
		})
	}
}

type testCase struct {
	name string
	run  func(h *harness)
}

// harness is one subtest's store, its writer, and a clock that advances
// one millisecond (plus odd nanoseconds, to prove precision) per reading.
type harness struct {
	*testing.T
	ctx   context.Context
	store persistence.Store
	w     persistence.Writer
	r     persistence.Reader
	clock time.Time
}

func newHarness(t *testing.T, open func(t *testing.T) persistence.Store) *harness {
	s := open(t)
	w, err := s.Writer()
	if err != nil {
		s.Close()
		t.Fatalf("Writer: %v", err)
	}
	h := &harness{T: t, ctx: context.Background(), store: s, w: w, r: s.Reader(),
		clock: time.Date(2031, 3, 4, 5, 6, 7, 123456789, time.UTC)}
	t.Cleanup(func() {
		h.w.Release()
		if err := s.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return h
}

func (h *harness) now() time.Time {
	h.clock = h.clock.Add(time.Millisecond + 7)
	return h.clock
}

func (h *harness) ts() *timestamppb.Timestamp { return timestamppb.New(h.now()) }

// apply applies cmds and fails the test on a transaction-level error.
func (h *harness) apply(cmds ...persistence.Command) []persistence.Result {
	h.Helper()
	res, err := h.w.Apply(h.ctx, cmds)
	if err != nil {
		h.Fatalf("Apply: %v", err)
	}
	if len(res) != len(cmds) {
		h.Fatalf("Apply returned %d results for %d commands", len(res), len(cmds))
	}
	return res
}

// ok applies one command and fails the test unless it committed.
func (h *harness) ok(cmd persistence.Command) persistence.Result {
	h.Helper()
	res := h.apply(cmd)[0]
	if res.Err != nil {
		h.Fatalf("%T: %v", cmd, res.Err)
	}
	return res
}

// appendOK applies an append and returns its outcome, failing the test
// unless it committed.
func (h *harness) appendOK(c *persistence.AppendMessages) persistence.AppendResult {
	h.Helper()
	return c.ResultOf(h.ok(c))
}

// commands lists cs as Commands, for apply.
func commands[C persistence.Command](cs ...C) []persistence.Command {
	out := make([]persistence.Command, len(cs))
	for i, c := range cs {
		out[i] = c
	}
	return out
}

// fails applies one command and checks that it failed on its own with code.
func (h *harness) fails(cmd persistence.Command, code errs.Code) {
	h.Helper()
	wantCode(h.T, h.apply(cmd)[0].Err, code)
}

func wantCode(t *testing.T, err error, code errs.Code) {
	t.Helper()
	if err == nil {
		t.Fatalf("got no error, want %v", code)
	}
	if errs.CodeOf(err) != code {
		t.Fatalf("got %v (%v), want %v", errs.CodeOf(err), err, code)
	}
}

func (h *harness) entry(eventType string, mods ...func(*auditv1.AuditEntry)) *auditv1.AuditEntry {
	e := &auditv1.AuditEntry{EventId: ids.New(), EventType: eventType, DetailsJson: `{"k":"v"}`, CreatedAt: h.ts()}
	for _, m := range mods {
		m(e)
	}
	return e
}

func (h *harness) session(mods ...func(*sessionv1.Session)) *sessionv1.Session {
	now := h.ts()
	s := &sessionv1.Session{SessionId: ids.New(), ActorName: "actor", Namespace: "local", MetadataJson: "{}",
		State: sessionv1.SessionState_SESSION_STATE_ACTIVE, CreatedAt: now, UpdatedAt: now}
	for _, m := range mods {
		m(s)
	}
	return s
}

// create stores a new session (with msgs as its imported messages).
func (h *harness) create(msgs ...*sessionv1.Message) *sessionv1.Session {
	h.Helper()
	s := h.session()
	h.ok(&persistence.CreateSession{Session: s, Messages: msgs})
	return s
}

func (h *harness) msg(content string) *sessionv1.Message {
	return &sessionv1.Message{MessageId: ids.New(), Role: sessionv1.Role_ROLE_USER, Content: content,
		MetadataJson: "{}", CreatedAt: h.ts()}
}

func (h *harness) msgs(n int) []*sessionv1.Message {
	out := make([]*sessionv1.Message, n)
	for i := range out {
		out[i] = h.msg(fmt.Sprintf("message %d", i))
	}
	return out
}

func (h *harness) get(id string) *sessionv1.Session {
	h.Helper()
	s, err := h.r.GetSession(h.ctx, id)
	if err != nil {
		h.Fatalf("GetSession(%s): %v", id, err)
	}
	return s
}

func (h *harness) messages(id string) []*sessionv1.Message {
	h.Helper()
	ms, err := h.r.ListMessages(h.ctx, id, 0, 1000)
	if err != nil {
		h.Fatalf("ListMessages(%s): %v", id, err)
	}
	return ms
}

// scan returns every stored audit entry in commit order.
func (h *harness) scan() []*auditv1.AuditEntry {
	h.Helper()
	var out []*auditv1.AuditEntry
	after := int64(0)
	for {
		page, err := h.r.ScanAudit(h.ctx, after, 1000)
		if err != nil {
			h.Fatalf("ScanAudit: %v", err)
		}
		out = append(out, page...)
		if len(page) < 1000 {
			return out
		}
		after = page[len(page)-1].Position
	}
}
