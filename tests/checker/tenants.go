package checker

import (
	"context"
	"errors"
	"fmt"
	"time"

	auditv1 "github.com/agentstate/agentstate/messages/agentstate/audit/v1"
	feedv1 "github.com/agentstate/agentstate/messages/agentstate/feed/v1"
	planv1 "github.com/agentstate/agentstate/messages/agentstate/plan/v1"
	sessionv1 "github.com/agentstate/agentstate/messages/agentstate/session/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Tenant is one principal of a node with authentication: its share of the
// load (sessions, appends, state, truncations, plan errors, audit entries)
// runs in its own namespace through Conn, which presents its credential.
// Its principal needs admin on Namespace (truncations).
type Tenant struct {
	Name      string
	Namespace string
	Conn      grpc.ClientConnInterface
}

// loads are the loads of one run: one, or one per tenant, sharing a
// ledger (their sessions and ids are disjoint).
type loads []*Load

// newLoads is one load on conn without tenants, else one per tenant with
// a share of cfg's sessions and clients.
func newLoads(conn grpc.ClientConnInterface, l *Ledger, cfg LoadConfig, tenants []Tenant) loads {
	if len(tenants) == 0 {
		return loads{NewLoad(conn, l, cfg)}
	}
	cfg = cfg.withDefaults()
	var ls loads
	for i, t := range tenants {
		c := cfg
		c.Namespace = t.Namespace
		c.Sessions = max(1, cfg.Sessions/len(tenants))
		c.Clients = max(1, cfg.Clients/len(tenants))
		c.Seed = cfg.Seed + uint64(i)
		ld := NewLoad(t.Conn, l, c)
		ld.clientBase = i * c.Clients
		if i > 0 {
			// Every tenant records errors for the same plan ids: in
			// its own namespace they are its own plans, so a record
			// of another tenant in one is a leak (verdict: a record
			// no request of the plan named).
			ld.planIDs = ls[0].planIDs
		}
		ls = append(ls, ld)
	}
	return ls
}

func (ls loads) Setup(ctx context.Context) error {
	for _, ld := range ls {
		if err := ld.Setup(ctx); err != nil {
			return err
		}
	}
	return nil
}

// Run runs every load until stop is closed (Load.Run).
func (ls loads) Run(ctx context.Context, stop <-chan struct{}) error {
	errc := make(chan error, len(ls))
	for _, ld := range ls {
		go func() { errc <- ld.Run(ctx, stop) }()
	}
	var err error
	for range ls {
		err = errors.Join(err, <-errc)
	}
	return err
}

func (ls loads) Acked() int64 {
	var n int64
	for _, ld := range ls {
		n += ld.Acked()
	}
	return n
}

// WaitAcked waits until the loads acknowledged n operations in all, each
// at least one (so that a tenant that stalls is noticed), or ctx ends.
func (ls loads) WaitAcked(ctx context.Context, n int64) error {
	for {
		done := ls.Acked() >= n
		for _, ld := range ls {
			done = done && ld.Acked() > 0
		}
		if done {
			return nil
		}
		if err := pause(ctx, 5*time.Millisecond); err != nil { // polling counters, not synchronizing
			return fmt.Errorf("checker: %d of %d operations acknowledged: %w", ls.Acked(), n, err)
		}
	}
}

// Fill adds every load's figures to r.
func (ls loads) Fill(r *Report) {
	var sum Report
	for _, ld := range ls {
		var one Report
		ld.Fill(&one)
		sum.Attempts += one.Attempts
		sum.BatchAcked += one.BatchAcked
		sum.MaybeApplied += one.MaybeApplied
		sum.Failed += one.Failed
		r.Rejected += one.Rejected
		r.Problems = append(r.Problems, one.Problems[:min(len(one.Problems), maxProblems-len(r.Problems))]...)
	}
	r.Attempts, r.BatchAcked, r.MaybeApplied, r.Failed = sum.Attempts, sum.BatchAcked, sum.MaybeApplied, sum.Failed
}

// CheckIsolation reads, as each tenant's principal, everything the other
// tenants' loads wrote: each of their sessions must be NOT_FOUND (get,
// messages, state, export, tail, its audit entries), and absent from the
// tenant's session list; each of their audit entries NOT_FOUND; each of
// their plans (the same plan ids in their namespaces) NOT_FOUND. It counts
// every one the tenant could see in r.Leaked.
func CheckIsolation(ctx context.Context, tenants []Tenant, ls loads, r *Report) error {
	for i, t := range tenants {
		ss := sessionv1.NewSessionServiceClient(t.Conn)
		au := auditv1.NewAuditServiceClient(t.Conn)
		feeds := feedv1.NewFeedServiceClient(t.Conn)
		listed, err := listAll(ctx, ss)
		if err != nil {
			return fmt.Errorf("checker: %s lists its sessions: %w", t.Name, err)
		}
		for j, other := range ls {
			if j == i {
				continue
			}
			for _, sid := range other.sessionIDs {
				if listed[sid] {
					r.problem(&r.Leaked, "%s lists %s's session %s", t.Name, tenants[j].Name, sid)
				}
				for what, call := range map[string]func() error{
					"get": func() error { _, err := ss.Get(ctx, &sessionv1.GetSessionRequest{SessionId: sid}); return err },
					"messages": func() error {
						_, err := ss.ListMessages(ctx, &sessionv1.ListMessagesRequest{SessionId: sid})
						return err
					},
					"state":  func() error { _, err := ss.GetState(ctx, &sessionv1.GetStateRequest{SessionId: sid}); return err },
					"export": func() error { _, err := ss.Export(ctx, &sessionv1.ExportSessionRequest{SessionId: sid}); return err },
					"audit": func() error {
						_, err := au.List(ctx, &auditv1.ListRequest{Filter: &auditv1.Filter{SessionId: sid}})
						return err
					},
					"tail": func() error {
						st, err := feeds.TailSession(ctx, &feedv1.TailSessionRequest{SessionId: sid})
						if err == nil {
							_, err = st.Recv()
						}
						return err
					},
				} {
					if err := call(); status.Code(err) != codes.NotFound {
						r.problem(&r.Leaked, "%s's %s of %s's session %s: %v, want NOT_FOUND", t.Name, what, tenants[j].Name, sid, err)
					}
				}
			}
			pl := planv1.NewPlanServiceClient(t.Conn)
			for _, pid := range other.planIDs {
				ns := other.cfg.Namespace
				if _, err := pl.History(ctx, &planv1.HistoryRequest{Namespace: ns, PlanId: pid}); status.Code(err) != codes.NotFound {
					r.problem(&r.Leaked, "%s's history of %s's plan %s: %v, want NOT_FOUND", t.Name, tenants[j].Name, pid, err)
				}
				if _, err := pl.ErrorDetails(ctx, &planv1.ErrorDetailsRequest{Namespace: ns, PlanId: pid}); status.Code(err) != codes.NotFound {
					r.problem(&r.Leaked, "%s's error details of %s's plan %s: %v, want NOT_FOUND", t.Name, tenants[j].Name, pid, err)
				}
			}
			for _, id := range other.auditIDs() {
				if _, err := au.Get(ctx, &auditv1.GetRequest{EventId: id}); status.Code(err) != codes.NotFound {
					r.problem(&r.Leaked, "%s's get of %s's audit entry %s: %v, want NOT_FOUND", t.Name, tenants[j].Name, id, err)
				}
			}
		}
	}
	return nil
}

// listAll is every session ss's principal lists.
func listAll(ctx context.Context, ss sessionv1.SessionServiceClient) (map[string]bool, error) {
	seen := map[string]bool{}
	for cursor := ""; ; {
		page, err := ss.List(ctx, &sessionv1.ListSessionsRequest{Cursor: cursor, Limit: 500})
		if err != nil {
			return nil, err
		}
		for _, s := range page.GetSessions() {
			seen[s.GetSessionId()] = true
		}
		if page.GetNextCursor() == "" {
			return seen, nil
		}
		cursor = page.GetNextCursor()
	}
}
