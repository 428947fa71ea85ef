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
	"github.com/agentstate/agentstate/persistence"
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
	// Issue 18's fields, each omitted when unset, so that an export of a
	// session without them has the bytes (and checksum) it always had.
	// message_count is the number of messages the export carries; their
	// sequences start at first_sequence.
	ClientKey     string          `json:"client_key,omitempty"`
	ExpiresAt     string          `json:"expires_at,omitempty"`
	FirstSequence int64           `json:"first_sequence,omitempty"`
	StateJSON     string          `json:"state_json,omitempty"`
	Snapshot      *exportSnapshot `json:"snapshot,omitempty"`
}

// exportSnapshot is the snapshot slot; data is base64 (encoding/json's
// []byte), which decodes and encodes back to the same bytes.
type exportSnapshot struct {
	Sequence  int64  `json:"sequence"`
	Data      []byte `json:"data"`
	CreatedAt string `json:"created_at"`
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
	EventTime    string `json:"event_time,omitempty"`
	// Omitted when empty, so an export of unkeyed messages is as before.
	ItemKey string `json:"item_key,omitempty"`
	Kind    string `json:"kind,omitempty"`
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
		Session:       exportSessionOf(s),
		Messages:      make([]exportMessage, len(msgs)),
		LinkedPlans:   exportLinksOf(s),
	}
	d.Session.MessageCount = int64(len(msgs))
	for i, m := range msgs {
		d.Messages[i] = exportMessageOf(m)
	}
	return d
}

// exportSessionOf is the export form of s; its message_count is s's.
func exportSessionOf(s *sessionv1.Session) exportSession {
	return exportSession{
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
		MessageCount:  s.GetMessageCount() - s.GetFirstSequence(),
		CreatedAt:     formatTime(s.GetCreatedAt()),
		UpdatedAt:     formatTime(s.GetUpdatedAt()),
		ClosedAt:      formatTime(s.GetClosedAt()),
		ClientKey:     s.GetClientKey(),
		ExpiresAt:     formatTime(s.GetExpiresAt()),
		FirstSequence: s.GetFirstSequence(),
	}
}

// withStateAndSnapshot adds a session's state and snapshot slot (as an
// export header carries them) to its export form.
func withStateAndSnapshot(ds exportSession, state string, snap *sessionv1.Snapshot) exportSession {
	if state != persistence.EmptyState {
		ds.StateJSON = state
	}
	if snap != nil {
		ds.Snapshot = &exportSnapshot{Sequence: snap.GetSequence(), Data: snap.GetData(), CreatedAt: formatTime(snap.GetCreatedAt())}
		if ds.Snapshot.Data == nil {
			ds.Snapshot.Data = []byte{}
		}
	}
	return ds
}

// headerOf is the export header of a session in its export form: the
// inverse of exportSessionOf and withStateAndSnapshot for what they carry.
func stateAndSnapshotOf(ds exportSession) (string, *sessionv1.Snapshot, error) {
	var snap *sessionv1.Snapshot
	if es := ds.Snapshot; es != nil {
		created, err := parseTime("session.snapshot.created_at", es.CreatedAt)
		if err != nil {
			return "", nil, err
		}
		snap = &sessionv1.Snapshot{Sequence: es.Sequence, Data: es.Data, CreatedAt: created}
	}
	return ds.StateJSON, snap, nil
}

// exportLinksOf is never nil, so that no links encode as [], as an export
// always wrote them.
func exportLinksOf(s *sessionv1.Session) []exportLink {
	out := make([]exportLink, len(s.GetLinkedPlans()))
	for i, l := range s.GetLinkedPlans() {
		out[i] = exportLink{PlanID: l.GetPlanId(), Phase: l.GetPhase(), State: l.GetState()}
	}
	return out
}

func exportMessageOf(m *sessionv1.Message) exportMessage {
	return exportMessage{
		MessageID:    m.GetMessageId(),
		Sequence:     m.GetSequence(),
		Role:         roleNames[m.GetRole()],
		Content:      m.GetContent(),
		MetadataJSON: orEmptyObject(m.GetMetadataJson()),
		CreatedAt:    formatTime(m.GetCreatedAt()),
		EventTime:    formatTime(m.GetEventTime()),
		ItemKey:      m.GetItemKey(),
		Kind:         m.GetKind(),
	}
}

// canonicalWriter writes the canonical form of an export part by part:
// begin, one message at a time, end. The bytes are exactly canonical(d) of
// the whole document (encoding/json encodes a nested value as it encodes
// the value alone), so a stream's checksum is the single document's, and
// computing it takes one message at a time.
type canonicalWriter struct {
	w   io.Writer
	n   int64
	err error
}

func (c *canonicalWriter) write(b []byte) {
	if c.err == nil {
		_, c.err = c.w.Write(b)
	}
}

func (c *canonicalWriter) value(v any) {
	if c.err != nil {
		return
	}
	b, err := encode(v)
	if err != nil {
		c.err = err
		return
	}
	c.write(b)
}

func (c *canonicalWriter) begin(s exportSession) error {
	c.write([]byte(`{"schema_version":`))
	c.value(SchemaVersion)
	c.write([]byte(`,"session":`))
	c.value(s)
	c.write([]byte(`,"messages":[`))
	return c.err
}

func (c *canonicalWriter) message(m exportMessage) error {
	if c.n > 0 {
		c.write([]byte(","))
	}
	c.value(m)
	c.n++
	return c.err
}

func (c *canonicalWriter) end(links []exportLink) error {
	if links == nil {
		links = []exportLink{}
	}
	c.write([]byte(`],"linked_plans":`))
	c.value(links)
	c.write([]byte("}"))
	return c.err
}

// newHashingWriter is a canonicalWriter into a SHA-256 (and into also,
// when not nil); sum returns the checksum of what was written.
func newHashingWriter(also io.Writer) (*canonicalWriter, func() string) {
	h := sha256.New()
	var w io.Writer = h
	if also != nil {
		w = io.MultiWriter(h, also)
	}
	return &canonicalWriter{w: w}, func() string { return checksumPrefix + hex.EncodeToString(h.Sum(nil)) }
}

// checkChecksum compares a stated checksum ("sha256:<hex>" or the bare hex,
// either case) with the computed one.
func checkChecksum(stated, computed string) error {
	got := strings.ToLower(strings.TrimPrefix(strings.ToLower(stated), checksumPrefix))
	if len(got) != sha256.Size*2 {
		return errs.InvalidArgument("checksum %q is not a SHA-256 (\"sha256:<64 hex digits>\" or the bare hex)", clip(stated))
	}
	if _, err := hex.DecodeString(got); err != nil {
		return errs.InvalidArgument("checksum %q is not hex", clip(stated))
	}
	if checksumPrefix+got != computed {
		return errs.InvalidArgument("checksum verification failed: the data was changed after export (checksum %s, content hashes to %s)", stated, computed)
	}
	return nil
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
// checksum against the canonical form of what was parsed, which it returns. The checksum may
// be "sha256:<hex>" or bare hex, in either case. The parse is strict
// (decodeStrict): a duplicate key, a key in another case or an unknown
// field would make the import something other than what the file shows,
// and is not covered by the checksum.
func openExport(data string) (*exportDoc, string, error) {
	if data == "" {
		return nil, "", errs.InvalidArgument("data is empty; want an export")
	}
	var d exportDoc
	if err := decodeStrict([]byte(data), &d); err != nil {
		return nil, "", errs.InvalidArgument("data is not a session export: %s", errs.From(err).Msg)
	}
	if d.SchemaVersion != SchemaVersion {
		return nil, "", errs.InvalidArgument("schema_version %q is not supported; want %q", clip(d.SchemaVersion), SchemaVersion)
	}
	canon, err := canonical(&d)
	if err != nil {
		return nil, "", err
	}
	sum := checksumOf(canon)
	if err := checkChecksum(d.Checksum, sum); err != nil {
		return nil, "", err
	}
	return &d, sum, nil
}
