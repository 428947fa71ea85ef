package session

import (
	"testing"

	sessionv1 "github.com/agentstate/agentstate/messages/agentstate/session/v1"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// fullSession sets every field of Session and of the messages in it.
func fullSession() *sessionv1.Session {
	return &sessionv1.Session{
		SessionId: "01J00000000000000000000000", ActorName: "a", Namespace: "n", Automation: "auto",
		MetadataJson: `{"k":1}`, State: sessionv1.SessionState_SESSION_STATE_CLOSED,
		TokenUsage:   &sessionv1.TokenUsage{InputTokens: 1, OutputTokens: 2, Cost: 0.5},
		LinkedPlans:  []*sessionv1.LinkedPlan{{PlanId: "p1", Phase: "ph", State: "st"}, {PlanId: "p2", Phase: "x", State: "y"}},
		MessageCount: 9, CreatedAt: &timestamppb.Timestamp{Seconds: 1, Nanos: 2}, UpdatedAt: &timestamppb.Timestamp{Seconds: 3, Nanos: 4},
		ClosedAt: &timestamppb.Timestamp{Seconds: 5, Nanos: 6}, ClientKey: "ck", ExpiresAt: &timestamppb.Timestamp{Seconds: 7, Nanos: 8},
		FirstSequence: 3,
	}
}

// unset names the fields of m (and of the messages in it) that are not
// set, so that a field added to Session shows up here until fullSession
// (and cloneSession) know it.
func unset(m protoreflect.Message, prefix string) []string {
	var out []string
	fields := m.Descriptor().Fields()
	for i := 0; i < fields.Len(); i++ {
		f := fields.Get(i)
		name := prefix + string(f.Name())
		if !m.Has(f) {
			out = append(out, name)
			continue
		}
		switch {
		case f.IsList() && f.Message() != nil:
			l := m.Get(f).List()
			for j := 0; j < l.Len(); j++ {
				out = append(out, unset(l.Get(j).Message(), name+"[].")...)
			}
		case f.Message() != nil && !f.IsMap():
			out = append(out, unset(m.Get(f).Message(), name+".")...)
		}
	}
	return out
}

func TestCloneSessionCopiesEveryField(t *testing.T) {
	s := fullSession()
	if missing := unset(s.ProtoReflect(), ""); len(missing) > 0 {
		t.Fatalf("fullSession leaves %v unset: set them, and copy them in cloneSession", missing)
	}
	c := cloneSession(s)
	if !proto.Equal(c, s) {
		t.Fatalf("clone differs:\n got %v\nwant %v", c, s)
	}
	// Nothing is shared: changing the clone leaves the original as it was.
	c.TokenUsage.InputTokens++
	c.LinkedPlans[0].Phase = "changed"
	c.CreatedAt.Seconds++
	c.UpdatedAt.Nanos++
	c.ClosedAt.Seconds++
	c.ExpiresAt.Seconds++
	if !proto.Equal(s, fullSession()) {
		t.Fatalf("changing the clone changed the original: %v", s)
	}
	if cloneSession(nil) != nil {
		t.Fatal("a nil session's clone is not nil")
	}
	empty := cloneSession(&sessionv1.Session{SessionId: "x"})
	if !proto.Equal(empty, &sessionv1.Session{SessionId: "x"}) {
		t.Fatalf("a sparse session's clone: %v", empty)
	}
}
