package audit

import (
	"bytes"
	"encoding/json"
	"time"
	"unicode/utf8"

	auditv1 "github.com/agentstate/agentstate/messages/agentstate/audit/v1"
	"github.com/agentstate/agentstate/messages/errs"
	"github.com/agentstate/agentstate/messages/ids"
	"github.com/agentstate/agentstate/messages/jsonobj"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// Limits on what one entry may carry; larger input is INVALID_ARGUMENT.
const (
	MaxFieldBytes   = 1024    // each of plan_id ... user_identity
	MaxDetailsBytes = 1 << 20 // details_json as given
)

// NewEntry builds the entry req describes, ready to be committed: the event
// type is checked against the registry, details_json is normalized to a
// compact JSON object ("{}" when empty) with every secret masked, and the
// entry gets created_at = now and the request's event_id (a ULID the client
// chose, which makes a retry safe: see Service.Record) or a fresh ULID.
// Position, Hash and PrevHash stay zero; the writer sets them at commit.
//
// Session and plan actors call it to build the entries they commit with
// their state changes; Record calls it for stand-alone entries. It is safe
// for concurrent use and runs in the caller's goroutine.
func NewEntry(req *auditv1.RecordRequest, now time.Time) (*auditv1.AuditEntry, error) {
	return newEntry(req, now, false)
}

// NewOwnEntry is NewEntry for an entry whose details_json its caller
// rendered itself with encoding/json from a Go value (a struct or map)
// whose keys are fixed and none of them a secret key (IsSecretKey): such
// text is a compact JSON object already with nothing to mask, so it is
// stored as given ("{}" when empty) rather than normalized and masked a
// second time. Everything else is checked as by NewEntry. The plan actor
// builds its own events' entries this way, one per recorded error.
func NewOwnEntry(req *auditv1.RecordRequest, now time.Time) (*auditv1.AuditEntry, error) {
	return newEntry(req, now, true)
}

func newEntry(req *auditv1.RecordRequest, now time.Time, own bool) (*auditv1.AuditEntry, error) {
	if req == nil {
		return nil, errs.InvalidArgument("record request is missing")
	}
	eventID := req.GetEventId()
	if eventID == "" {
		eventID = ids.New()
	} else if err := ids.Check("event_id", eventID); err != nil {
		return nil, err
	}
	if req.GetEventType() == "" {
		return nil, errs.InvalidArgument("event_type is empty")
	}
	if !registry[req.GetEventType()] {
		return nil, errs.InvalidArgument("event_type %q is not a known audit event type", clip(req.GetEventType()))
	}
	fields := [...]struct{ name, v string }{
		{"plan_id", req.GetPlanId()}, {"session_id", req.GetSessionId()},
		{"project_name", req.GetProjectName()}, {"actor_name", req.GetActorName()},
		{"user_identity", req.GetUserIdentity()},
	}
	for _, f := range fields {
		if len(f.v) > MaxFieldBytes {
			return nil, errs.InvalidArgument("%s is %d bytes; at most %d", f.name, len(f.v), MaxFieldBytes)
		}
		if !utf8.ValidString(f.v) {
			return nil, errs.InvalidArgument("%s is not valid UTF-8", f.name)
		}
	}
	// An entry about a plan names it as the plan service does.
	if p := req.GetPlanId(); p != "" {
		if err := ids.CheckPlanID("plan_id", p); err != nil {
			return nil, err
		}
	}
	if n := len(req.GetDetailsJson()); n > MaxDetailsBytes {
		return nil, errs.InvalidArgument("details_json is %d bytes; at most %d", n, MaxDetailsBytes)
	}
	details := req.GetDetailsJson()
	if own {
		if details == "" {
			details = "{}"
		}
	} else {
		var err error
		if details, err = normalizeDetails(details); err != nil {
			return nil, err
		}
		if details, err = maskSecrets(details); err != nil {
			return nil, errs.InvalidArgument("details_json: %v", err)
		}
	}
	return &auditv1.AuditEntry{
		EventId:      eventID,
		EventType:    req.GetEventType(),
		PlanId:       req.GetPlanId(),
		SessionId:    req.GetSessionId(),
		ProjectName:  req.GetProjectName(),
		ActorName:    req.GetActorName(),
		UserIdentity: req.GetUserIdentity(),
		DetailsJson:  details,
		CreatedAt:    timestamppb.New(now),
	}, nil
}

// normalizeDetails is jsonobj.Normalize made cheap for the hot path: a
// valid object is compacted in one pass (json.Compact also rejects bad
// syntax and trailing data) without being decoded into maps; input that
// fails it (or nests too deeply: maskSecrets recurses per level) goes
// through jsonobj.Normalize, which gives the precise error.
func normalizeDetails(s string) (string, error) {
	if s == "" {
		return "{}", nil
	}
	if utf8.ValidString(s) && firstByte(s) == '{' && jsonobj.CheckDepth("details_json", s, jsonobj.MaxDepth) == nil {
		var buf bytes.Buffer
		buf.Grow(len(s))
		if json.Compact(&buf, []byte(s)) == nil {
			return buf.String(), nil
		}
	}
	return jsonobj.Normalize("details_json", s)
}

func firstByte(s string) byte {
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case ' ', '\t', '\n', '\r':
			continue
		}
		return s[i]
	}
	return 0
}

func clip(s string) string {
	if len(s) > 64 {
		return s[:64] + "..."
	}
	return s
}
