package checker

import (
	"fmt"
	"slices"
	"strings"
	"sync"

	auditv1 "github.com/agentstate/agentstate/messages/agentstate/audit/v1"
	planv1 "github.com/agentstate/agentstate/messages/agentstate/plan/v1"
	sessionv1 "github.com/agentstate/agentstate/messages/agentstate/session/v1"
	"google.golang.org/grpc/codes"
)

// Msg is one message of a turn as the client sent it. ID is the client's
// message id, which makes a retry idempotent.
type Msg struct {
	ID      string
	Role    sessionv1.Role
	Content string
}

// Turn is one Append request: its messages are stored together, with
// consecutive sequences, or not at all.
type Turn struct {
	Session  string
	Messages []Msg
	// Namespace is the session's ("" for "checker"): the shared scope
	// the turn writes is its app scope.
	Namespace string
}

// Request is the Append request that carries t.
func (t Turn) Request() *sessionv1.AppendRequest {
	req := &sessionv1.AppendRequest{SessionId: t.Session, StateDelta: turnDelta(t), ScopeDeltas: turnScope(t)}
	for _, m := range t.Messages {
		req.Messages = append(req.Messages, &sessionv1.NewMessage{MessageId: m.ID, Role: m.Role, Content: m.Content})
	}
	return req
}

// AppendAck is one acknowledged Append exactly as the node answered it.
// Nothing is validated when it is recorded: Check judges it.
type AppendAck struct {
	Client int
	Turn   Turn
	// Replay is true when the client re-sent a turn it had already seen
	// acknowledged, to test that the retry is answered with the original
	// sequences.
	Replay    bool
	Duplicate bool
	// Got holds the answered (message_id, sequence) pairs, in answer order.
	Got []MsgSeq
	// SentAt and AckedAt are ledger clock readings: before the turn's
	// first attempt was sent, and after its answer arrived. A turn acked
	// before another was first sent must have the lower sequences.
	SentAt, AckedAt int64
}

// MsgSeq is an acknowledged (message_id, sequence) pair.
type MsgSeq struct {
	ID  string
	Seq int64
}

// PlanAck is one acknowledged RecordError.
type PlanAck struct {
	Req    *planv1.RecordErrorRequest
	Record *planv1.ErrorRecord
}

// AuditAck is one acknowledged synchronous audit Record.
type AuditAck struct {
	Req  *auditv1.RecordRequest
	Resp *auditv1.RecordResponse
}

// Ledger is the clients' memory of what the node promised: every session
// created, every message sent, every acknowledgement. It is safe for
// concurrent use.
//
// Invariant: a message id is recorded as sent (AppendSent) before any
// acknowledgement of it, so any stored message the ledger never saw sent
// is a phantom. clock only grows, under mu, so its readings order events
// of different clients in real time.
type Ledger struct {
	mu           sync.Mutex
	clock        int64
	firstSent    map[string]int64 // session + "/" + first message id → clock at first send
	sessions     []string
	sessionSet   map[string]bool
	sent         map[string]map[string]Msg // session → message id → message
	appends      []AppendAck
	planAttempts map[string]int // plan (planRef) → RecordError attempts sent (acked or not)
	// planNamed: plan → record ids its requests named; planUnnamed: plan →
	// attempts of requests that named none (each may have stored a record).
	planNamed   map[string]map[string]bool
	planUnnamed map[string]int
	plans       []PlanAck
	audit       []AuditAck
	auditSent   map[string]*auditv1.RecordRequest // event id → request, for every attempt
	// falseUnavailable describes requests found stored although every
	// failed attempt of theirs had been answered "nothing stored".
	falseUnavailable []string
	// truncSent, truncAcked: session → the highest sequence a truncation
	// was sent through / acknowledged through (state.go).
	truncSent, truncAcked map[string]int64
	// ackedSeqs: session → acknowledged sequences above ackedPrefix;
	// ackedPrefix: session → the highest sequence s such that every
	// sequence <= s is acknowledged (-1: none).
	ackedSeqs   map[string]map[int64]bool
	ackedPrefix map[string]int64
	// keyed: the keyed batches (keyed.go).
	keyed keyedLedger
	// suffix: the suffix replacements (suffix.go).
	suffix suffixLedger
}

// NewLedger returns an empty ledger.
func NewLedger() *Ledger {
	return &Ledger{
		sessionSet:   make(map[string]bool),
		sent:         make(map[string]map[string]Msg),
		firstSent:    make(map[string]int64),
		planAttempts: make(map[string]int),
		planNamed:    make(map[string]map[string]bool),
		planUnnamed:  make(map[string]int),
		auditSent:    make(map[string]*auditv1.RecordRequest),
	}
}

// SessionCreated records that the node acknowledged creating id.
func (l *Ledger) SessionCreated(id string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.sessionSet[id] {
		return
	}
	l.sessionSet[id] = true
	l.sessions = append(l.sessions, id)
}

// AppendSent records that t is about to be sent (again). Call it before
// every attempt whose outcome may be unknown.
func (l *Ledger) AppendSent(t Turn) {
	l.mu.Lock()
	defer l.mu.Unlock()
	m := l.sent[t.Session]
	if m == nil {
		m = make(map[string]Msg)
		l.sent[t.Session] = m
	}
	for _, msg := range t.Messages {
		m[msg.ID] = msg
	}
	l.clock++
	if k := turnKey(t); k != "" {
		if _, ok := l.firstSent[k]; !ok {
			l.firstSent[k] = l.clock
		}
	}
}

func turnKey(t Turn) string {
	if len(t.Messages) == 0 {
		return ""
	}
	return t.Session + "/" + t.Messages[0].ID
}

// AppendAcked records the node's OK answer to t.
func (l *Ledger) AppendAcked(client int, t Turn, replay bool, resp *sessionv1.AppendResponse) {
	a := AppendAck{Client: client, Turn: t, Replay: replay, Duplicate: resp.GetDuplicate()}
	for _, m := range resp.GetMessages() {
		a.Got = append(a.Got, MsgSeq{ID: m.GetMessageId(), Seq: m.GetSequence()})
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.clock++
	a.SentAt, a.AckedAt = l.firstSent[turnKey(t)], l.clock
	l.appends = append(l.appends, a)
	l.ackSequences(t.Session, a.Got)
}

// PlanErrorSent records one attempt of req. A request that names its
// record (record_id) stores it at most once however often it is sent, so
// its retries are safe and a stored record of an unnamed id is a phantom.
// An attempt of a request without a record_id whose answer was lost may
// still have stored a record: those attempts bound how many records of
// unnamed ids a plan may hold.
func (l *Ledger) PlanErrorSent(req *planv1.RecordErrorRequest) {
	l.mu.Lock()
	defer l.mu.Unlock()
	plan := PlanRef(req.GetNamespace(), req.GetPlanId())
	l.planAttempts[plan]++
	if id := req.GetRecordId(); id != "" {
		if l.planNamed[plan] == nil {
			l.planNamed[plan] = make(map[string]bool)
		}
		l.planNamed[plan][id] = true
	} else {
		l.planUnnamed[plan]++
	}
}

// PlanErrorAcked records the node's OK answer to req.
func (l *Ledger) PlanErrorAcked(req *planv1.RecordErrorRequest, resp *planv1.RecordErrorResponse) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.plans = append(l.plans, PlanAck{Req: req, Record: resp.GetRecord()})
}

// AuditSent records one attempt of req, which names its event (event_id):
// however often it is sent, it may be stored once.
func (l *Ledger) AuditSent(req *auditv1.RecordRequest) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.auditSent[req.GetEventId()] = req
}

// RetryAnswered records how a request that is not a replay was finally
// answered: failed holds the codes of its failed attempts, duplicate says
// the answer was "stored already". A duplicate means one of the attempts
// was stored; if each of them was answered UNAVAILABLE or
// RESOURCE_EXHAUSTED — "nothing stored" — one of those answers was false:
// the lie that makes a client store a write twice when its request has no
// client id.
func (l *Ledger) RetryAnswered(what string, failed []codes.Code, duplicate bool) {
	if !duplicate || len(failed) == 0 {
		return
	}
	for _, c := range failed {
		if c != codes.Unavailable && c != codes.ResourceExhausted {
			return // an attempt's outcome was unknown: it may be the stored one
		}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.falseUnavailable = append(l.falseUnavailable, fmt.Sprintf("%s: answered as stored already, after attempts answered %v (nothing stored)", what, failed))
}

// AuditAcked records the node's OK answer to a synchronous audit Record.
func (l *Ledger) AuditAcked(req *auditv1.RecordRequest, resp *auditv1.RecordResponse) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.audit = append(l.audit, AuditAck{Req: req, Resp: resp})
}

// Sessions returns the acknowledged session ids, in creation order.
func (l *Ledger) Sessions() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.sessions)
}

// Plans returns every plan a RecordError was sent for (planRef), sorted.
func (l *Ledger) Plans() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for p := range l.planAttempts {
		out = append(out, p)
	}
	slices.Sort(out)
	return out
}

// AuditEventIDs returns the event ids of the acknowledged audit entries.
func (l *Ledger) AuditEventIDs() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, a := range l.audit {
		out = append(out, a.Resp.GetEntry().GetEventId())
	}
	return out
}

// PlanRef is the ledger's one string for plan planID of namespace ns: a
// plan is (namespace, plan id). Plan ids never contain '/', so
// splitPlanRef cuts it at the last one.
func PlanRef(ns, planID string) string { return ns + "/" + planID }

func splitPlanRef(ref string) (ns, planID string) {
	i := strings.LastIndexByte(ref, '/')
	return ref[:i], ref[i+1:]
}
