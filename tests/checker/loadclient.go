package checker

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"

	auditv1 "github.com/agentstate/agentstate/messages/agentstate/audit/v1"
	planv1 "github.com/agentstate/agentstate/messages/agentstate/plan/v1"
	sessionv1 "github.com/agentstate/agentstate/messages/agentstate/session/v1"
	"github.com/agentstate/agentstate/messages/ids"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
)

// client is the state of one load client; only its goroutine touches it.
type client struct {
	ld   *Load
	id   int
	at   int // index of the target (node) the client calls now
	rng  *rand.Rand
	done []Turn // recently acknowledged turns, for replays
	// seen: session → the highest sequence acknowledged to this client
	// in it, for truncations.
	seen map[string]int64
	// lastSeq: first message id of a turn in done → its last sequence.
	lastSeq map[string]int64
	// batch: appends go over AppendBatches (see LoadConfig.BatchEvery).
	batch bool
	// suffixHistory: the client's replacement session as acknowledged;
	// suffixDone once a replacement there was refused for good
	// (suffix.go).
	suffixHistory []string
	suffixDone    bool
}

// probeEventType is the type of the load's audit entries: the node only
// accepts the event types of its registry, and a client's write of a
// resource is what this load stands for.
const probeEventType = "resource_modified"

var roles = []sessionv1.Role{sessionv1.Role_ROLE_USER, sessionv1.Role_ROLE_ASSISTANT, sessionv1.Role_ROLE_TOOL, sessionv1.Role_ROLE_SYSTEM}

func (c *client) append(ctx context.Context, n int) error {
	t := Turn{Session: c.ld.sessionIDs[c.rng.IntN(len(c.ld.sessionIDs))], Namespace: c.ld.cfg.Namespace}
	for k := range 1 + c.rng.IntN(c.ld.cfg.MaxTurn) {
		t.Messages = append(t.Messages, Msg{
			ID:      ids.New(),
			Role:    roles[c.rng.IntN(len(roles))],
			Content: fmt.Sprintf("client %d op %d msg %d %s", c.id, n, k, strings.Repeat("x", c.rng.IntN(256))),
		})
	}
	if err := c.send(ctx, t, false); err != nil {
		return err
	}
	const keep = 32
	if len(c.done) == keep {
		delete(c.lastSeq, c.done[0].Messages[0].ID)
		c.done = c.done[1:]
	}
	c.done = append(c.done, t)
	return nil
}

// replay re-sends a turn that was acknowledged before, perhaps before a
// crash: the answer must be the original sequences, marked duplicate.
func (c *client) replay(ctx context.Context, n int) error {
	t := c.done[c.rng.IntN(len(c.done))]
	c.ld.replays.RLock()
	if c.lastSeq[t.Messages[0].ID] <= c.ld.ledger.truncatedThrough(t.Session) {
		// Truncated: its ids are no longer stored, so it is not
		// replayable; an append instead.
		c.ld.replays.RUnlock()
		return c.append(ctx, n)
	}
	defer c.ld.replays.RUnlock()
	return c.send(ctx, t, true)
}

func (c *client) send(ctx context.Context, t Turn, replay bool) error {
	req := t.Request()
	var resp *sessionv1.AppendResponse
	var failed []codes.Code
	err := c.ld.call(ctx, "append to "+t.Session, &c.at, true, &failed, func(ctx context.Context, conn int, ready grpc.CallOption) error {
		c.ld.ledger.AppendSent(t)
		var err error
		if c.batch {
			resp, err = c.ld.targets[conn].batch.Append(ctx, req)
		} else {
			resp, err = c.ld.targets[conn].sessions.Append(ctx, req, ready)
		}
		if c.ld.cfg.OnAppend != nil {
			c.ld.cfg.OnAppend(conn, t.Session, err)
		}
		return err
	})
	if err != nil {
		return err
	}
	if !replay {
		c.ld.ledger.RetryAnswered("append of "+t.Messages[0].ID+" to "+t.Session, failed, resp.GetDuplicate())
	}
	c.ld.ledger.AppendAcked(c.id, t, replay, resp)
	if ms := resp.GetMessages(); len(ms) > 0 {
		if c.seen == nil {
			c.seen, c.lastSeq = map[string]int64{}, map[string]int64{}
		}
		last := ms[len(ms)-1].GetSequence()
		c.seen[t.Session] = max(c.seen[t.Session], last)
		c.lastSeq[t.Messages[0].ID] = last
	}
	if c.batch {
		c.ld.batchAcked.Add(1)
	}
	return nil
}

func (c *client) recordPlanError(ctx context.Context, n int) error {
	req := &planv1.RecordErrorRequest{
		// The load's plans are in its namespace: a tenant's are its own.
		Namespace: c.ld.cfg.Namespace,
		PlanId:    c.ld.planIDs[c.rng.IntN(len(c.ld.planIDs))],
		Phase:     planv1.Phase_PHASE_EXECUTE,
		StepId:    fmt.Sprintf("step-%d", c.rng.IntN(4)),
		ErrorType: "TimeoutError",
		Message:   fmt.Sprintf("client %d op %d: timed out", c.id, n),
		ActorName: "checker",
		// Named, so that every retry (also after an unknown outcome) is
		// safe: the node stores the record once and answers retries
		// with it.
		RecordId: ids.New(),
	}
	var resp *planv1.RecordErrorResponse
	var failed []codes.Code
	err := c.ld.call(ctx, "record error for "+req.PlanId, &c.at, true, &failed, func(ctx context.Context, conn int, ready grpc.CallOption) error {
		c.ld.ledger.PlanErrorSent(req)
		var err error
		resp, err = c.ld.targets[conn].plans.RecordError(ctx, req, ready)
		return err
	})
	if err != nil {
		return err
	}
	c.ld.ledger.RetryAnswered("plan record "+req.RecordId, failed, resp.GetDuplicate())
	c.ld.ledger.PlanErrorAcked(req, resp)
	return nil
}

func (c *client) recordAudit(ctx context.Context, n int) error {
	req := &auditv1.RecordRequest{
		EventType:   probeEventType,
		ActorName:   fmt.Sprintf("client-%d", c.id),
		DetailsJson: fmt.Sprintf(`{"client":%d,"op":%d}`, c.id, n),
		Sync:        true,
		// Named, so that every retry (also after an unknown outcome) is
		// safe: the node stores the entry once and answers retries with
		// it (duplicate=true).
		EventId: ids.New(),
	}
	if c.ld.tenant {
		// The entry belongs to the session's namespace: the tenant's.
		req.SessionId = c.ld.sessionIDs[c.rng.IntN(len(c.ld.sessionIDs))]
	}
	var resp *auditv1.RecordResponse
	var failed []codes.Code
	err := c.ld.call(ctx, "audit record", &c.at, true, &failed, func(ctx context.Context, conn int, ready grpc.CallOption) error {
		c.ld.ledger.AuditSent(req)
		var err error
		resp, err = c.ld.targets[conn].audit.Record(ctx, req, ready)
		return err
	})
	if err != nil {
		return err
	}
	c.ld.ledger.RetryAnswered("audit record "+req.EventId, failed, resp.GetDuplicate())
	c.ld.ledger.AuditAcked(req, resp)
	c.ld.mu.Lock()
	c.ld.audited = append(c.ld.audited, req.EventId)
	c.ld.mu.Unlock()
	return nil
}
