package checker

import (
	"context"
	"fmt"

	auditv1 "github.com/agentstate/agentstate/messages/agentstate/audit/v1"
	planv1 "github.com/agentstate/agentstate/messages/agentstate/plan/v1"
	sessionv1 "github.com/agentstate/agentstate/messages/agentstate/session/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// readPage is the page size of the read-back. It is small on purpose, so
// that the checker also exercises the cursors.
const readPage = 250

// Observe reads back, through the node at conn, everything the ledger
// holds promises about. NOT_FOUND is an observation (recorded as absent);
// any other error aborts the read.
func Observe(ctx context.Context, conn grpc.ClientConnInterface, l *Ledger) (*Observed, error) {
	o := &Observed{
		Sessions: make(map[string]*SessionView),
		Plans:    make(map[string][]*planv1.ErrorRecord),
		Audit:    make(map[string]*auditv1.AuditEntry),
	}
	sessions := sessionv1.NewSessionServiceClient(conn)
	for _, sid := range l.Sessions() {
		v, err := readSession(ctx, sessions, sid)
		if err != nil {
			return nil, err
		}
		o.Sessions[sid] = v
	}
	var err error
	if o.Keyed, err = readMessages(ctx, sessions, l.KeyedSessions()); err != nil {
		return nil, err
	}
	if o.Suffix, err = readMessages(ctx, sessions, l.SuffixSessions()); err != nil {
		return nil, err
	}
	plans := planv1.NewPlanServiceClient(conn)
	for _, ref := range l.Plans() {
		ns, pid := splitPlanRef(ref)
		recs, err := readPlan(ctx, plans, ns, pid)
		if err != nil {
			return nil, err
		}
		o.Plans[ref] = recs
	}
	audit := auditv1.NewAuditServiceClient(conn)
	for _, id := range l.AuditEventIDs() {
		resp, err := audit.Get(ctx, &auditv1.GetRequest{EventId: id}, grpc.WaitForReady(true))
		if status.Code(err) == codes.NotFound {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("checker: audit get %s: %w", id, err)
		}
		o.Audit[id] = resp.GetEntry()
	}
	after := ""
	for {
		page, err := audit.List(ctx, &auditv1.ListRequest{Filter: &auditv1.Filter{EventType: probeEventType},
			AfterEventId: after, Limit: readPage}, grpc.WaitForReady(true))
		if err != nil {
			return nil, fmt.Errorf("checker: audit list after %q: %w", after, err)
		}
		o.AuditLog = append(o.AuditLog, page.GetEntries()...)
		if after = page.GetNextCursor(); after == "" {
			break
		}
	}
	chain, err := audit.Verify(ctx, &auditv1.VerifyRequest{}, grpc.WaitForReady(true))
	if err != nil {
		return nil, fmt.Errorf("checker: audit verify: %w", err)
	}
	o.Chain = chain
	return o, nil
}

// readMessages reads the messages of each of sids; a session the node
// does not know is absent from the map.
func readMessages(ctx context.Context, c sessionv1.SessionServiceClient, sids []string) (map[string][]*sessionv1.Message, error) {
	out := map[string][]*sessionv1.Message{}
	for _, sid := range sids {
		v, err := readSession(ctx, c, sid)
		if err != nil {
			return nil, err
		}
		if v != nil {
			out[sid] = v.Messages
		}
	}
	return out, nil
}

// readSession returns nil for a session the node does not know.
func readSession(ctx context.Context, c sessionv1.SessionServiceClient, sid string) (*SessionView, error) {
	got, err := c.Get(ctx, &sessionv1.GetSessionRequest{SessionId: sid}, grpc.WaitForReady(true))
	if status.Code(err) == codes.NotFound {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("checker: get session %s: %w", sid, err)
	}
	v := &SessionView{Session: got.GetSession()}
	if err := readState(ctx, c, v); err != nil {
		return nil, err
	}
	from := int64(0)
	for {
		page, err := c.ListMessages(ctx, &sessionv1.ListMessagesRequest{SessionId: sid, FromSequence: from, Limit: readPage},
			grpc.WaitForReady(true))
		if err != nil {
			return nil, fmt.Errorf("checker: list messages of %s from %d: %w", sid, from, err)
		}
		if len(page.GetMessages()) == 0 {
			return v, nil
		}
		v.Messages = append(v.Messages, page.GetMessages()...)
		// A cursor that does not advance would loop forever.
		if page.GetNextSequence() <= from {
			return nil, fmt.Errorf("checker: list messages of %s: cursor %d does not advance past %d", sid, page.GetNextSequence(), from)
		}
		from = page.GetNextSequence()
	}
}

func readPlan(ctx context.Context, c planv1.PlanServiceClient, ns, pid string) ([]*planv1.ErrorRecord, error) {
	var out []*planv1.ErrorRecord
	from := int64(0)
	for {
		page, err := c.History(ctx, &planv1.HistoryRequest{Namespace: ns, PlanId: pid, FromSequence: from, Limit: readPage},
			grpc.WaitForReady(true))
		if status.Code(err) == codes.NotFound {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("checker: history of plan %s from %d: %w", pid, from, err)
		}
		out = append(out, page.GetRecords()...)
		next := page.GetNextSequence()
		if next < 0 || len(page.GetRecords()) == 0 {
			return out, nil
		}
		if next <= from {
			return nil, fmt.Errorf("checker: history of plan %s: cursor %d does not advance past %d", pid, next, from)
		}
		from = next
	}
}
