package session

import (
	"context"
	"encoding/json"
	"time"

	"github.com/agentstate/agentstate/actors/audit"
	auditv1 "github.com/agentstate/agentstate/messages/agentstate/audit/v1"
	sessionv1 "github.com/agentstate/agentstate/messages/agentstate/session/v1"
	"github.com/agentstate/agentstate/messages/errs"
	"github.com/agentstate/agentstate/messages/ids"
	"github.com/agentstate/agentstate/persistence"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// importSession verifies an export and stores it as a new session, with
// its messages (sequences 0..n-1 in export order, original ids and
// timestamps) and plan links, in one transaction. The new session is
// active; its token totals are the exported ones. It serves the unary
// Import, whose data fits one request; ImportFrom takes any size.
func (s *Service) importSession(ctx context.Context, req *sessionv1.ImportSessionRequest) (*sessionv1.ImportSessionResponse, error) {
	d, sum, err := openExport(req.GetData())
	if err != nil {
		return nil, err
	}
	cmd, err := importCommand(d, ids.New(), time.Now().UTC(), s.env.cfg)
	if err != nil {
		return nil, err
	}
	// Apply takes its own backlog slot, waiting or not as ctx says.
	res, err := s.wr.Apply(ctx, cmd)
	if err == nil {
		err = res.Err
	}
	if err != nil {
		return nil, err
	}
	return &sessionv1.ImportSessionResponse{Session: cmd.Session, MessagesImported: int64(len(cmd.Messages)), Checksum: sum}, nil
}

// importCommand validates every field of d as the live calls would and
// builds the CreateSession of the new session id.
func importCommand(d *exportDoc, id string, now time.Time, cfg Config) (*persistence.CreateSession, error) {
	if d.Session.MessageCount != int64(len(d.Messages)) {
		return nil, errs.InvalidArgument("session.message_count is %d but the export has %d messages", d.Session.MessageCount, len(d.Messages))
	}
	sess, err := importHeader(d.Session, d.LinkedPlans, id, now, cfg)
	if err != nil {
		return nil, err
	}
	msgs, err := importMessages(d.Messages, d.Session.FirstSequence, id, cfg)
	if err != nil {
		return nil, err
	}
	state, snap, err := importStateAndSnapshot(d.Session)
	if err != nil {
		return nil, err
	}
	e, err := importedEntry(sess, d.Session.SessionID, now)
	if err != nil {
		return nil, err
	}
	return &persistence.CreateSession{Session: sess, Messages: msgs, Audit: []*auditv1.AuditEntry{e},
		State: state, Snapshot: snap}, nil
}

// importHeader validates the exported session and its links and returns
// the new session (id, active, created now) they make, its message_count
// the exported one.
func importHeader(ds exportSession, links []exportLink, id string, now time.Time, cfg Config) (*sessionv1.Session, error) {
	c, err := normalizeCreate(&sessionv1.CreateSessionRequest{
		SessionId:    id,
		ActorName:    ds.ActorName,
		Namespace:    ds.Namespace,
		Automation:   ds.Automation,
		MetadataJson: ds.MetadataJSON,
	}, cfg)
	if err != nil {
		return nil, errs.InvalidArgument("session: %s", errs.From(err).Msg)
	}
	// The export says what state the session had; the import makes it
	// active either way, but a state no export writes means the document
	// is not one.
	if _, ok := lookup(stateNames, ds.State); !ok {
		return nil, errs.InvalidArgument("session.state %q is not active or closed", clip(ds.State))
	}
	tu := ds.TokenUsage
	// Totals obey the rule of a delta: counts and cost not negative, the
	// cost finite (and so readable and exportable again).
	if err := persistence.CheckTokenDelta(&sessionv1.TokenUsage{InputTokens: tu.InputTokens, OutputTokens: tu.OutputTokens, Cost: tu.Cost}); err != nil {
		return nil, errs.InvalidArgument("session.token_usage: %s", errs.From(err).Msg)
	}
	if ds.MessageCount < 0 {
		return nil, errs.InvalidArgument("session.message_count is %d", ds.MessageCount)
	}
	if ds.FirstSequence < 0 {
		return nil, errs.InvalidArgument("session.first_sequence is %d", ds.FirstSequence)
	}
	if err := checkText("session.client_key", ds.ClientKey, maxNameBytes); err != nil {
		return nil, err
	}
	var expires *timestamppb.Timestamp
	if ds.ExpiresAt != "" {
		if expires, err = parseTime("session.expires_at", ds.ExpiresAt); err != nil {
			return nil, err
		}
		if err := checkTime("session.expires_at", expires); err != nil {
			return nil, errs.InvalidArgument("%s", errs.From(err).Msg)
		}
	}
	ts := timestamppb.New(now)
	sess := &sessionv1.Session{
		ClientKey:     ds.ClientKey,
		ExpiresAt:     expires,
		FirstSequence: ds.FirstSequence,
		SessionId:     id,
		ActorName:     c.ActorName,
		Namespace:     c.Namespace,
		Automation:    c.Automation,
		MetadataJson:  c.MetadataJson,
		State:         sessionv1.SessionState_SESSION_STATE_ACTIVE,
		TokenUsage:    &sessionv1.TokenUsage{InputTokens: tu.InputTokens, OutputTokens: tu.OutputTokens, Cost: tu.Cost},
		MessageCount:  ds.FirstSequence + ds.MessageCount,
		CreatedAt:     ts,
		UpdatedAt:     ts,
	}
	if sess.LinkedPlans, err = importLinks(links, id); err != nil {
		return nil, err
	}
	return sess, nil
}

// importLinks validates the exported plan links, one by one as LinkPlan
// would, and refuses a plan linked twice.
func importLinks(in []exportLink, id string) ([]*sessionv1.LinkedPlan, error) {
	var out []*sessionv1.LinkedPlan
	seenPlan := make(map[string]bool, len(in))
	for i, l := range in {
		n, err := normalizeLink(&sessionv1.LinkPlanRequest{
			SessionId: id, Plan: &sessionv1.LinkedPlan{PlanId: l.PlanID, Phase: l.Phase, State: l.State},
		})
		if err != nil {
			return nil, errs.InvalidArgument("linked_plans[%d]: %s", i, errs.From(err).Msg)
		}
		if seenPlan[l.PlanID] {
			return nil, errs.InvalidArgument("linked_plans[%d]: plan %s is linked twice", i, l.PlanID)
		}
		seenPlan[l.PlanID] = true
		out = append(out, n.Plan)
	}
	return out, nil
}

// importedEntry is the session_imported audit entry of sess.
func importedEntry(sess *sessionv1.Session, sourceID string, now time.Time) (*auditv1.AuditEntry, error) {
	return newEntry(audit.EventSessionImported, sess.SessionId, sess.ActorName, "", map[string]any{
		"source_session_id": sourceID, "messages": sess.MessageCount, "linked_plans": len(sess.LinkedPlans),
	}, now)
}

// importMessages validates all messages of a single-document import
// (importMessage) and refuses a message id used twice.
func importMessages(in []exportMessage, first int64, id string, cfg Config) ([]*sessionv1.Message, error) {
	out := make([]*sessionv1.Message, len(in))
	seen := make(map[string]int, len(in))
	for i, em := range in {
		m, err := importMessage(i, first, em, id, cfg)
		if err != nil {
			return nil, err
		}
		if j, dup := seen[m.MessageId]; dup {
			return nil, errs.InvalidArgument("messages[%d].message_id %s repeats messages[%d]", i, m.MessageId, j)
		}
		seen[m.MessageId] = i
		out[i] = m
	}
	// The store refuses a key twice too (persistence.CheckImportKeys);
	// here the refusal names the messages.
	if err := persistence.CheckImportKeys(id, out); err != nil {
		return nil, err
	}
	return out, nil
}

// importMessage validates the i-th exported message as an append would and
// returns the message to store (sequence first+i, its id and times kept).
// Uniqueness of its id is its caller's check.
func importMessage(i int, first int64, em exportMessage, id string, cfg Config) (*sessionv1.Message, error) {
	if em.Sequence != first+int64(i) {
		return nil, errs.InvalidArgument("messages[%d].sequence is %d; an export lists sequences first_sequence.. in order (%d)", i, em.Sequence, first+int64(i))
	}
	var event *timestamppb.Timestamp
	if em.EventTime != "" {
		var err error
		if event, err = parseTime("event_time", em.EventTime); err != nil {
			return nil, errs.InvalidArgument("messages[%d].%s", i, errs.From(err).Msg)
		}
	}
	role, ok := lookup(roleNames, em.Role)
	if !ok {
		return nil, errs.InvalidArgument("messages[%d].role %q is not user, assistant, system or tool", i, clip(em.Role))
	}
	if em.MessageID == "" {
		return nil, errs.InvalidArgument("messages[%d].message_id is empty", i)
	}
	nm, err := normalizeMessage(i, &sessionv1.NewMessage{
		Role: role, Content: em.Content, MetadataJson: em.MetadataJSON, MessageId: em.MessageID, EventTime: event,
		ItemKey: em.ItemKey, Kind: em.Kind,
	}, cfg)
	if err != nil {
		return nil, err
	}
	created, err := parseTime("created_at", em.CreatedAt)
	if err == nil {
		// Stored exactly or refused: never wrapped into another year.
		_, err = persistence.StoredNanos("created_at", created)
	}
	if err != nil {
		return nil, errs.InvalidArgument("messages[%d].%s", i, errs.From(err).Msg)
	}
	return &sessionv1.Message{
		SessionId:    id,
		MessageId:    nm.MessageId,
		Sequence:     first + int64(i),
		Role:         nm.Role,
		Content:      nm.Content,
		MetadataJson: nm.MetadataJson,
		CreatedAt:    created,
		EventTime:    nm.EventTime,
		ItemKey:      nm.ItemKey,
		Kind:         nm.Kind,
	}, nil
}

// importStateAndSnapshot validates an export's state (a JSON object within
// a state's bounds, as the deltas that made it were) and snapshot.
func importStateAndSnapshot(ds exportSession) (string, *sessionv1.Snapshot, error) {
	stateJSON, snap, err := stateAndSnapshotOf(ds)
	if err != nil {
		return "", nil, err
	}
	state := persistence.EmptyState
	if stateJSON != "" {
		// Decoding into raw values does not recurse into them (encoding/json
		// skips a raw value with its iterative scanner); NormalizeDelta
		// then bounds each value's depth (jsonobj.MaxDepth).
		var m map[string]json.RawMessage
		if err := json.Unmarshal([]byte(stateJSON), &m); err != nil || m == nil {
			return "", nil, errs.InvalidArgument("session.state_json is not a JSON object")
		}
		d := &sessionv1.StateDelta{SetJson: make(map[string]string, len(m))}
		for k, v := range m {
			d.SetJson[k] = string(v)
		}
		if d, err = persistence.NormalizeDelta("session.state_json", d); err != nil {
			return "", nil, err
		}
		if state, err = persistence.ApplyDelta("session.state_json", "", d); err != nil {
			return "", nil, err
		}
	}
	if snap != nil {
		if len(snap.GetData()) > persistence.MaxSnapshotBytes || snap.GetSequence() < -1 {
			return "", nil, errs.InvalidArgument("session.snapshot: sequence %d, %d bytes (at most %d)", snap.GetSequence(), len(snap.GetData()), persistence.MaxSnapshotBytes)
		}
		if err := snapshotInRange(snap.GetSequence(), ds.FirstSequence, ds.FirstSequence+ds.MessageCount); err != nil {
			return "", nil, errs.InvalidArgument("session.snapshot: %v", err)
		}
		if err := checkTime("session.snapshot.created_at", snap.GetCreatedAt()); err != nil {
			return "", nil, errs.InvalidArgument("%s", errs.From(err).Msg)
		}
	}
	return state, snap, nil
}
