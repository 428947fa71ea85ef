package session

import (
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	sessionv1 "github.com/agentstate/agentstate/messages/agentstate/session/v1"
	"github.com/agentstate/agentstate/messages/errs"
	"github.com/agentstate/agentstate/messages/ids"
	"github.com/agentstate/agentstate/messages/jsonobj"
	"github.com/agentstate/agentstate/persistence"
)

// Validation turns a request as received into its normal form or a typed
// INVALID_ARGUMENT error. Normal forms are fresh messages (the caller's
// request is never modified), with defaults filled in, JSON compacted and
// every message id assigned, so that a session actor handed a normal form
// never has to reject it for its shape.

const defaultNamespace = "local"

// Paging limits of the list calls: 0 means the default, more than the
// maximum is clamped.
const (
	defaultPageSize = 100
	maxPageSize     = 1000
)

func checkText(field, s string, max int) error {
	if len(s) > max {
		return errs.InvalidArgument("%s is %d bytes; at most %d", field, len(s), max)
	}
	if !utf8.ValidString(s) {
		return errs.InvalidArgument("%s is not valid UTF-8", field)
	}
	if strings.IndexByte(s, 0) >= 0 {
		return errs.InvalidArgument("%s contains a NUL byte", field)
	}
	return nil
}

func normalizeMetadata(field, s string, max int) (string, error) {
	if len(s) > max {
		return "", errs.InvalidArgument("%s is %d bytes; at most %d", field, len(s), max)
	}
	return jsonobj.Normalize(field, s)
}

// normalizeCreate validates a create; an empty session_id gets a new ULID
// here, before routing, so the request has an owner.
func normalizeCreate(req *sessionv1.CreateSessionRequest, cfg Config) (*sessionv1.CreateSessionRequest, error) {
	id := req.GetSessionId()
	if id == "" {
		id = ids.New()
	} else if err := ids.Check("session_id", id); err != nil {
		return nil, err
	}
	ns := req.GetNamespace()
	if ns == "" {
		ns = defaultNamespace
	}
	if err := checkText("actor_name", req.GetActorName(), maxNameBytes); err != nil {
		return nil, err
	}
	if err := checkText("namespace", ns, maxNameBytes); err != nil {
		return nil, err
	}
	if err := checkText("automation", req.GetAutomation(), maxNameBytes); err != nil {
		return nil, err
	}
	md, err := normalizeMetadata("metadata_json", req.GetMetadataJson(), cfg.MaxContentBytes)
	if err != nil {
		return nil, err
	}
	if err := checkText("client_key", req.GetClientKey(), maxNameBytes); err != nil {
		return nil, err
	}
	exp, err := expiry(req.GetExpiresAt(), req.GetTtl(), time.Now())
	if err != nil {
		return nil, err
	}
	sd, scopes, err := normalizeDeltas(req.GetStateDelta(), req.GetScopeDeltas())
	if err != nil {
		return nil, err
	}
	return &sessionv1.CreateSessionRequest{
		SessionId:    id,
		ActorName:    req.GetActorName(),
		Namespace:    ns,
		Automation:   req.GetAutomation(),
		MetadataJson: md,
		ClientKey:    req.GetClientKey(),
		ExpiresAt:    exp,
		StateDelta:   sd,
		ScopeDeltas:  toScopeDeltas(scopes),
	}, nil
}

func checkRole(field string, r sessionv1.Role) error {
	switch r {
	case sessionv1.Role_ROLE_USER, sessionv1.Role_ROLE_ASSISTANT, sessionv1.Role_ROLE_SYSTEM, sessionv1.Role_ROLE_TOOL:
		return nil
	}
	return errs.InvalidArgument("%s is %v; want user, assistant, system or tool", field, r)
}

// normalizeMessage validates one message of a turn; a missing message_id is
// assigned here. Field names are formatted only on failure: this runs once
// per appended message.
func normalizeMessage(i int, m *sessionv1.NewMessage, cfg Config) (*sessionv1.NewMessage, error) {
	if m == nil {
		return nil, errs.InvalidArgument("messages[%d] is empty", i)
	}
	if err := checkRole("role", m.GetRole()); err != nil {
		return nil, errs.InvalidArgument("messages[%d].%s", i, errs.From(err).Msg)
	}
	if err := checkText("content", m.GetContent(), cfg.MaxContentBytes); err != nil {
		return nil, errs.InvalidArgument("messages[%d].%s", i, errs.From(err).Msg)
	}
	md := "{}"
	if s := m.GetMetadataJson(); s != "" {
		var err error
		if md, err = normalizeMetadata(fmt.Sprintf("messages[%d].metadata_json", i), s, cfg.MaxContentBytes); err != nil {
			return nil, err
		}
	}
	id := m.GetMessageId()
	if id == "" {
		id = ids.New()
	} else if err := checkMessageID(id); err != nil {
		return nil, errs.InvalidArgument("messages[%d].%s", i, errs.From(err).Msg)
	}
	if err := checkTime("event_time", m.GetEventTime()); err != nil {
		return nil, errs.InvalidArgument("messages[%d].%s", i, errs.From(err).Msg)
	}
	if err := checkItem(m); err != nil {
		return nil, errs.InvalidArgument("messages[%d].%s", i, errs.From(err).Msg)
	}
	return &sessionv1.NewMessage{Role: m.GetRole(), Content: m.GetContent(), MetadataJson: md, MessageId: id, EventTime: m.GetEventTime(),
		ItemKey: m.GetItemKey(), Kind: m.GetKind(), OnKeyConflict: m.GetOnKeyConflict()}, nil
}

// normalizeAppend validates a turn: 1..MaxTurnMessages messages (or none,
// when it carries a delta), each valid, no message id twice.
func normalizeAppend(req *sessionv1.AppendRequest, cfg Config) (*sessionv1.AppendRequest, error) {
	if err := ids.Check("session_id", req.GetSessionId()); err != nil {
		return nil, err
	}
	sd, scopes, err := normalizeDeltas(req.GetStateDelta(), req.GetScopeDeltas())
	if err != nil {
		return nil, err
	}
	if err := checkExpected("expected_next_sequence", req.ExpectedNextSequence); err != nil {
		return nil, err
	}
	n := len(req.GetMessages())
	if n == 0 && sd == nil && len(scopes) == 0 {
		return nil, errs.InvalidArgument("messages is empty; a turn has at least one message (or a state change)")
	}
	if n > cfg.MaxTurnMessages {
		return nil, errs.InvalidArgument("messages has %d entries; at most %d per turn", n, cfg.MaxTurnMessages)
	}
	out := &sessionv1.AppendRequest{SessionId: req.GetSessionId(), Messages: make([]*sessionv1.NewMessage, n),
		StateDelta: sd, ExpectedNextSequence: req.ExpectedNextSequence}
	if len(scopes) > 0 {
		out.ScopeDeltas = toScopeDeltas(scopes)
	}
	for i, m := range req.GetMessages() {
		nm, err := normalizeMessage(i, m, cfg)
		if err != nil {
			return nil, err
		}
		out.Messages[i] = nm
	}
	if i, j, dup := repeatedID(out.Messages); dup {
		return nil, errs.InvalidArgument("messages[%d].message_id %s repeats messages[%d]", i, out.Messages[i].MessageId, j)
	}
	if i, j, dup := repeatedKey(out.Messages); dup {
		return nil, errs.InvalidArgument("messages[%d].item_key %q repeats messages[%d]", i, out.Messages[i].ItemKey, j)
	}
	return out, nil
}

// repeatedID finds a message id given twice: messages[i] repeats
// messages[j], j < i. Turns are mostly one or two messages, so small ones
// are compared pairwise rather than through a map.
func repeatedID(msgs []*sessionv1.NewMessage) (i, j int, dup bool) {
	if len(msgs) <= 16 {
		for i := 1; i < len(msgs); i++ {
			for j := 0; j < i; j++ {
				if msgs[i].MessageId == msgs[j].MessageId {
					return i, j, true
				}
			}
		}
		return 0, 0, false
	}
	seen := make(map[string]int, len(msgs))
	for i, m := range msgs {
		if j, ok := seen[m.MessageId]; ok {
			return i, j, true
		}
		seen[m.MessageId] = i
	}
	return 0, 0, false
}

func checkTokenUsage(req *sessionv1.UpdateTokenUsageRequest) error {
	if err := ids.Check("session_id", req.GetSessionId()); err != nil {
		return err
	}
	return persistence.CheckTokenDelta(&sessionv1.TokenUsage{
		InputTokens: req.GetInputTokens(), OutputTokens: req.GetOutputTokens(), Cost: req.GetCost(),
	})
}

func normalizeLink(req *sessionv1.LinkPlanRequest) (*sessionv1.LinkPlanRequest, error) {
	if err := ids.Check("session_id", req.GetSessionId()); err != nil {
		return nil, err
	}
	p := req.GetPlan()
	if p == nil {
		return nil, errs.InvalidArgument("plan is missing")
	}
	if err := ids.CheckPlanID("plan.plan_id", p.GetPlanId()); err != nil {
		return nil, err
	}
	if err := checkText("plan.phase", p.GetPhase(), maxLabelBytes); err != nil {
		return nil, err
	}
	if err := checkText("plan.state", p.GetState(), maxLabelBytes); err != nil {
		return nil, err
	}
	return &sessionv1.LinkPlanRequest{
		SessionId: req.GetSessionId(),
		Plan:      &sessionv1.LinkedPlan{PlanId: p.GetPlanId(), Phase: p.GetPhase(), State: p.GetState()},
	}, nil
}

func pageSize(field string, limit int32) (int, error) {
	switch {
	case limit < 0:
		return 0, errs.InvalidArgument("%s %d is negative", field, limit)
	case limit == 0:
		return defaultPageSize, nil
	case limit > maxPageSize:
		return maxPageSize, nil
	}
	return int(limit), nil
}

// listFilter validates a List request. The cursor is the last session id
// of the previous page (ids order the listing), so it stays valid however
// many sessions are created meanwhile.
func listFilter(req *sessionv1.ListSessionsRequest) (persistence.SessionFilter, error) {
	f := persistence.SessionFilter{ActorName: req.GetActorName(), Namespace: req.GetNamespace(), State: req.GetState()}
	if err := checkText("actor_name", f.ActorName, maxNameBytes); err != nil {
		return f, err
	}
	if err := checkText("namespace", f.Namespace, maxNameBytes); err != nil {
		return f, err
	}
	switch f.State {
	case sessionv1.SessionState_SESSION_STATE_UNSPECIFIED, sessionv1.SessionState_SESSION_STATE_ACTIVE, sessionv1.SessionState_SESSION_STATE_CLOSED:
	default:
		return f, errs.InvalidArgument("state %v is not a session state", f.State)
	}
	if c := req.GetCursor(); c != "" {
		if err := ids.Check("cursor", c); err != nil {
			return f, err
		}
		f.AfterID = c
	}
	n, err := pageSize("limit", req.GetLimit())
	f.Limit = n
	return f, err
}

func checkListMessages(req *sessionv1.ListMessagesRequest) (from int64, limit int, err error) {
	if err := ids.Check("session_id", req.GetSessionId()); err != nil {
		return 0, 0, err
	}
	if req.GetFromSequence() < 0 {
		return 0, 0, errs.InvalidArgument("from_sequence %d is negative", req.GetFromSequence())
	}
	limit, err = pageSize("limit", req.GetLimit())
	return req.GetFromSequence(), limit, err
}
