package sqlite

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	auditv1 "github.com/agentstate/agentstate/messages/audit/v1"
	"github.com/agentstate/agentstate/messages/ids"
	sessionv1 "github.com/agentstate/agentstate/messages/session/v1"
	"github.com/agentstate/agentstate/persistence"
	"google.golang.org/protobuf/types/known/timestamppb"
)

func TestSmoke(t *testing.T) {
	for _, url := range []string{filepath.Join(t.TempDir(), "x.db"), "memory:smoke"} {
		s, err := Open(url)
		if err != nil {
			t.Fatal(err)
		}
		w, err := s.Writer()
		if err != nil {
			t.Fatal(err)
		}
		now := timestamppb.Now()
		sid := ids.New()
		res, err := w.Apply(context.Background(), []persistence.Command{
			&persistence.CreateSession{Session: &sessionv1.Session{SessionId: sid, ActorName: "a", Namespace: "n", CreatedAt: now, UpdatedAt: now},
				Audit: []*auditv1.AuditEntry{{EventId: ids.New(), EventType: "session_created", CreatedAt: now}}},
			&persistence.AppendMessages{SessionID: sid, NextSequence: 0, UpdatedAt: time.Now(), Turns: []persistence.Turn{
				{Messages: []*sessionv1.Message{{MessageId: "m1", Content: "hi", CreatedAt: now}, {MessageId: "m2", CreatedAt: now}}}}},
			&persistence.AppendMessages{SessionID: sid, NextSequence: 2, UpdatedAt: time.Now(), Turns: []persistence.Turn{
				{Messages: []*sessionv1.Message{{MessageId: "m1", Content: "hi", CreatedAt: now}, {MessageId: "m2", CreatedAt: now}}}}},
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%+v", res)
		got, err := s.Reader().GetSession(context.Background(), sid)
		if err != nil {
			t.Fatal(err)
		}
		if got.MessageCount != 2 || !res[2].Turns[0].Duplicate {
			t.Fatalf("got %v %+v", got, res[2])
		}
		w.Release()
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
}
