package session

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"strings"
	"time"

	sessionv1 "github.com/agentstate/agentstate/messages/agentstate/session/v1"
	"github.com/agentstate/agentstate/messages/errs"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// SchemaVersion names the export format. Import accepts exactly this
// version; a new format gets a new version and an explicit conversion.
const SchemaVersion = "agentstate.session/1"

const checksumPrefix = "sha256:"

// exportDoc is the export format. Its canonical form is the compact
// encoding/json encoding of this struct with Checksum empty (so omitted),
// HTML characters not escaped. Field order is the struct's, and every value
// is a string (metadata too: the stored JSON text, as a string), an integer
// or a float64 (which encoding/json writes in its shortest round-tripping
// form). So decoding any JSON-equivalent document — other whitespace, key
// order or escapes — and encoding it again reproduces the canonical bytes
// exactly, and only a change of content changes the checksum. The checksum
// is "sha256:" and the hex SHA-256 of those bytes; the exported data is the
// same object with the checksum field added at the end.
type exportDoc struct {
	SchemaVersion string          `json:"schema_version"`
	Session       exportSession   `json:"session"`
	Messages      []exportMessage `json:"messages"`
	LinkedPlans   []exportLink    `json:"linked_plans"`
	Checksum      string          `json:"checksum,omitempty"`
}

type exportSession struct {
	SessionID    string       `json:"session_id"`
	ActorName    string       `json:"actor_name"`
	Namespace    string       `json:"namespace"`
	Automation   string       `json:"automation"`
	MetadataJSON string       `json:"metadata_json"`
	State        string       `json:"state"`
	TokenUsage   exportTokens `json:"token_usage"`
	MessageCount int64        `json:"message_count"`
	CreatedAt    string       `json:"created_at"`
	UpdatedAt    string       `json:"updated_at"`
	ClosedAt     string       `json:"closed_at,omitempty"`
}

type exportTokens struct {
	InputTokens  int64   `json:"input_tokens"`
	OutputTokens int64   `json:"output_tokens"`
	Cost         float64 `json:"cost"`
}

type exportMessage struct {
	MessageID    string `json:"message_id"`
	Sequence     int64  `json:"sequence"`
	Role         string `json:"role"`
	Content      string `json:"content"`
	MetadataJSON string `json:"metadata_json"`
	CreatedAt    string `json:"created_at"`
}

type exportLink struct {
	PlanID string `json:"plan_id"`
	Phase  string `json:"phase"`
	State  string `json:"state"`
}

var roleNames = map[sessionv1.Role]string{
	sessionv1.Role_ROLE_USER:      "user",
	sessionv1.Role_ROLE_ASSISTANT: "assistant",
	sessionv1.Role_ROLE_SYSTEM:    "system",
	sessionv1.Role_ROLE_TOOL:      "tool",
}

var stateNames = map[sessionv1.SessionState]string{
	sessionv1.SessionState_SESSION_STATE_ACTIVE: "active",
	sessionv1.SessionState_SESSION_STATE_CLOSED: "closed",
}

func lookup[K comparable](m map[K]string, name string) (K, bool) {
	for k, v := range m {
		if v == name {
			return k, true
		}
	}
	var zero K
	return zero, false
}

func formatTime(ts *timestamppb.Timestamp) string {
	if ts == nil {
		return ""
	}
	return ts.AsTime().UTC().Format(time.RFC3339Nano)
}

func parseTime(field, s string) (*timestamppb.Timestamp, error) {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return nil, errs.InvalidArgument("%s %q is not an RFC 3339 time", field, clip(s))
	}
	return timestamppb.New(t), nil
}

func clip(s string) string {
	if len(s) > 40 {
		return s[:40] + "..."
	}
	return s
}

func orEmptyObject(s string) string {
	if s == "" {
		return "{}"
	}
	return s
}

// newExportDoc builds the document of a session and all its messages
// (in sequence order).
func newExportDoc(s *sessionv1.Session, msgs []*sessionv1.Message) *exportDoc {
	d := &exportDoc{
		SchemaVersion: SchemaVersion,
		Session: exportSession{
			SessionID:    s.GetSessionId(),
			ActorName:    s.GetActorName(),
			Namespace:    s.GetNamespace(),
			Automation:   s.GetAutomation(),
			MetadataJSON: orEmptyObject(s.GetMetadataJson()),
			State:        stateNames[s.GetState()],
			TokenUsage: exportTokens{
				InputTokens:  s.GetTokenUsage().GetInputTokens(),
				OutputTokens: s.GetTokenUsage().GetOutputTokens(),
				Cost:         s.GetTokenUsage().GetCost(),
			},
			MessageCount: int64(len(msgs)),
			CreatedAt:    formatTime(s.GetCreatedAt()),
			UpdatedAt:    formatTime(s.GetUpdatedAt()),
			ClosedAt:     formatTime(s.GetClosedAt()),
		},
		Messages:    make([]exportMessage, len(msgs)),
		LinkedPlans: make([]exportLink, len(s.GetLinkedPlans())),
	}
	for i, m := range msgs {
		d.Messages[i] = exportMessage{
			MessageID:    m.GetMessageId(),
			Sequence:     m.GetSequence(),
			Role:         roleNames[m.GetRole()],
			Content:      m.GetContent(),
			MetadataJSON: orEmptyObject(m.GetMetadataJson()),
			CreatedAt:    formatTime(m.GetCreatedAt()),
		}
	}
	for i, l := range s.GetLinkedPlans() {
		d.LinkedPlans[i] = exportLink{PlanID: l.GetPlanId(), Phase: l.GetPhase(), State: l.GetState()}
	}
	return d
}

func encode(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, errs.Internal("encoding the export: %v", err)
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// canonical returns d's canonical bytes (d without its checksum).
func canonical(d *exportDoc) ([]byte, error) {
	c := *d
	c.Checksum = ""
	return encode(&c)
}

func checksumOf(canon []byte) string {
	sum := sha256.Sum256(canon)
	return checksumPrefix + hex.EncodeToString(sum[:])
}

// seal returns the exported data (the canonical object plus its checksum)
// and the checksum.
func seal(d *exportDoc) (data string, checksum string, err error) {
	canon, err := canonical(d)
	if err != nil {
		return "", "", err
	}
	sealed := *d
	sealed.Checksum = checksumOf(canon)
	out, err := encode(&sealed)
	if err != nil {
		return "", "", err
	}
	return string(out), sealed.Checksum, nil
}

// openExport parses data, checks its schema version and verifies its
// checksum against the canonical form of what was parsed. The checksum may
// be "sha256:<hex>" or bare hex, in either case. Unknown fields are refused:
// they would not be covered by the checksum.
func openExport(data string) (*exportDoc, error) {
	if data == "" {
		return nil, errs.InvalidArgument("data is empty; want an export")
	}
	dec := json.NewDecoder(strings.NewReader(data))
	dec.DisallowUnknownFields()
	var d exportDoc
	if err := dec.Decode(&d); err != nil {
		return nil, errs.InvalidArgument("data is not a session export: %v", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errs.InvalidArgument("data has content after the export object")
	}
	if d.SchemaVersion != SchemaVersion {
		return nil, errs.InvalidArgument("schema_version %q is not supported; want %q", clip(d.SchemaVersion), SchemaVersion)
	}
	got := strings.ToLower(strings.TrimPrefix(strings.ToLower(d.Checksum), checksumPrefix))
	if len(got) != sha256.Size*2 {
		return nil, errs.InvalidArgument("checksum %q is not a SHA-256 (\"sha256:<64 hex digits>\" or the bare hex)", clip(d.Checksum))
	}
	if _, err := hex.DecodeString(got); err != nil {
		return nil, errs.InvalidArgument("checksum %q is not hex", clip(d.Checksum))
	}
	canon, err := canonical(&d)
	if err != nil {
		return nil, err
	}
	if want := checksumOf(canon); checksumPrefix+got != want {
		return nil, errs.InvalidArgument("checksum verification failed: the data was changed after export (checksum %s, content hashes to %s)", d.Checksum, want)
	}
	return &d, nil
}
