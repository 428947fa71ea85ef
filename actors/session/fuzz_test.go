package session

import (
	"errors"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	sessionv1 "github.com/agentstate/agentstate/messages/agentstate/session/v1"
	"github.com/agentstate/agentstate/messages/errs"
	"github.com/agentstate/agentstate/messages/ids"
	"github.com/agentstate/agentstate/messages/jsonobj"
	"github.com/agentstate/agentstate/messages/principal"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// mustBeInvalidArgument fails unless err is nil or a typed INVALID_ARGUMENT:
// a validator may refuse input only with that code.
func mustBeInvalidArgument(t *testing.T, err error) {
	t.Helper()
	if err != nil && !errors.Is(err, errs.ErrInvalidArgument) {
		t.Fatalf("validator returned %T %v; want nil or INVALID_ARGUMENT", err, err)
	}
}

// FuzzNormalizeAppend: whatever a client sends, the validator either refuses
// it as INVALID_ARGUMENT or returns a turn every part of which the session
// actor and the store accept: known roles, UTF-8 content within the limit,
// JSON-object metadata, distinct valid message ids (a ULID, or since
// client message ids a client's own printable-ASCII id).
func FuzzNormalizeAppend(f *testing.F) {
	sid := ids.New()
	f.Add(sid, int32(1), "hello", "", "", int32(2), "hi", `{"a":1}`, ids.New())
	f.Add(sid, int32(0), "", "[]", "x", int32(9), "\xff", "null", "")
	f.Add("", int32(4), "tool output", `{"k":{"n":[1,2]}}`, ids.New(), int32(3), "", "{", "01HXM2A6K1P2E9Q9D4GQ7J4S7Z")
	cfg := Config{MaxContentBytes: 64}.withDefaults()
	f.Fuzz(func(t *testing.T, session string, r1 int32, c1, m1, id1 string, r2 int32, c2, m2, id2 string) {
		req := &sessionv1.AppendRequest{SessionId: session, Messages: []*sessionv1.NewMessage{
			{Role: sessionv1.Role(r1), Content: c1, MetadataJson: m1, MessageId: id1},
			{Role: sessionv1.Role(r2), Content: c2, MetadataJson: m2, MessageId: id2},
		}}
		out, err := normalizeAppend(req, cfg)
		mustBeInvalidArgument(t, err)
		if err != nil {
			return
		}
		seen := map[string]bool{}
		for i, m := range out.Messages {
			if m.Role < sessionv1.Role_ROLE_USER || m.Role > sessionv1.Role_ROLE_TOOL {
				t.Fatalf("messages[%d] accepted role %v", i, m.Role)
			}
			if !utf8.ValidString(m.Content) || len(m.Content) > cfg.MaxContentBytes || strings.IndexByte(m.Content, 0) >= 0 {
				t.Fatalf("messages[%d] accepted bad content (%d bytes)", i, len(m.Content))
			}
			if again, err := jsonobj.Normalize("m", m.MetadataJson); err != nil || again != m.MetadataJson {
				t.Fatalf("messages[%d] metadata %q is not a normalized object", i, m.MetadataJson)
			}
			if checkMessageID(m.MessageId) != nil || seen[m.MessageId] {
				t.Fatalf("messages[%d] id %q invalid or repeated", i, m.MessageId)
			}
			seen[m.MessageId] = true
		}
		if req.Messages[0].MetadataJson != m1 {
			t.Fatal("the caller's request was modified")
		}
	})
}

// FuzzNormalizeCreate: a create is refused as INVALID_ARGUMENT or comes out
// with a ULID, a namespace and a JSON-object metadata.
func FuzzNormalizeCreate(f *testing.F) {
	f.Add("", "planner", "", "", "")
	f.Add(ids.New(), "a\xffb", "ns", "auto", `{"x":true}`)
	f.Add("not-a-ulid", "", "local", "", "[1]")
	cfg := Config{}.withDefaults()
	f.Fuzz(func(t *testing.T, id, actor, ns, automation, md string) {
		out, err := normalizeCreate(&sessionv1.CreateSessionRequest{
			SessionId: id, ActorName: actor, Namespace: ns, Automation: automation, MetadataJson: md}, cfg)
		mustBeInvalidArgument(t, err)
		if err != nil {
			return
		}
		if ids.Check("id", out.SessionId) != nil || out.Namespace == "" {
			t.Fatalf("accepted create without a ULID or namespace: %v", out)
		}
		if _, err := jsonobj.Normalize("m", out.MetadataJson); err != nil {
			t.Fatalf("accepted metadata %q", out.MetadataJson)
		}
		for _, s := range []string{out.ActorName, out.Namespace, out.Automation} {
			if !utf8.ValidString(s) || strings.IndexByte(s, 0) >= 0 {
				t.Fatalf("accepted invalid UTF-8 or NUL %q", s)
			}
		}
	})
}

// FuzzImport: arbitrary data is refused as INVALID_ARGUMENT or is a sealed
// export whose messages become a dense 0..n-1 turn list; and a genuine export
// with one byte changed never imports unless the change keeps it equivalent.
func FuzzImport(f *testing.F) {
	s := &sessionv1.Session{SessionId: ids.New(), ActorName: "planner", Namespace: "local", MetadataJson: "{}",
		State: sessionv1.SessionState_SESSION_STATE_ACTIVE, TokenUsage: &sessionv1.TokenUsage{},
		CreatedAt: timestamppb.Now(), UpdatedAt: timestamppb.Now(), MessageCount: 2,
		LinkedPlans: []*sessionv1.LinkedPlan{{PlanId: "p1", Phase: "execute", State: "queued"}}}
	msgs := []*sessionv1.Message{
		{SessionId: s.SessionId, MessageId: ids.New(), Sequence: 0, Role: sessionv1.Role_ROLE_USER, Content: "hi", MetadataJson: "{}", CreatedAt: timestamppb.Now()},
		{SessionId: s.SessionId, MessageId: ids.New(), Sequence: 1, Role: sessionv1.Role_ROLE_ASSISTANT, Content: "hello", MetadataJson: `{"t":1}`, CreatedAt: timestamppb.Now()},
	}
	data, _, err := seal(newExportDoc(s, msgs))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(data)
	f.Add("")
	f.Add("{}")
	f.Add(`{"schema_version":"agentstate.session/1","checksum":"sha256:00"}`)
	cfg := Config{}.withDefaults()
	f.Fuzz(func(t *testing.T, data string) {
		d, _, err := openExport(data)
		mustBeInvalidArgument(t, err)
		if err != nil {
			return
		}
		c, err := importCommand(principal.Embedded, d, ids.New(), time.Now(), cfg)
		mustBeInvalidArgument(t, err)
		if err != nil {
			return
		}
		for i, m := range c.Messages {
			if m.Sequence != int64(i) || m.SessionId != c.Session.SessionId {
				t.Fatalf("imported message %d has sequence %d session %s", i, m.Sequence, m.SessionId)
			}
			if ids.Check("id", m.MessageId) != nil || !utf8.ValidString(m.Content) {
				t.Fatalf("imported an invalid message %v", m)
			}
		}
	})
}
