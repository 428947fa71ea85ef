package cluster_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	sessionv1 "github.com/agentstate/agentstate/messages/agentstate/session/v1"
	"github.com/agentstate/agentstate/messages/ids"
	"google.golang.org/grpc"
)

// TestClusterLogsGoThroughTheNode: two members start (each polling the
// other before it is up), serve a session across the cluster and stop on
// SIGTERM. Everything they print is the node's JSON log (Proto.Actor's
// records included; nothing such as a coloured "http server started" line
// on stdout), and none of these normal cluster events is an ERROR.
func TestClusterLogsGoThroughTheNode(t *testing.T) {
	dsn := database(t)
	ctx := runContext(t)
	ms := startClusterArgs(t, ctx, dsn, []string{"--log-format", "json", "--log-level", "info"}, "L", "L")
	callCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	sid := ids.New()
	if _, err := sessionv1.NewSessionServiceClient(ms[0].conn).Create(callCtx,
		&sessionv1.CreateSessionRequest{SessionId: sid, ActorName: "logs"}, grpc.WaitForReady(true)); err != nil {
		t.Fatal(err)
	}
	for i, m := range ms {
		if _, err := sessionv1.NewSessionServiceClient(m.conn).Append(callCtx, &sessionv1.AppendRequest{SessionId: sid,
			Messages: []*sessionv1.NewMessage{{Role: sessionv1.Role_ROLE_USER, Content: "hi", MessageId: ids.New()}}},
			grpc.WaitForReady(true)); err != nil {
			t.Fatalf("append via member %d: %v", i, err)
		}
	}
	for i, m := range ms {
		if err := m.Stop(30 * time.Second); err != nil {
			t.Fatalf("member %d: %v", i, err)
		}
	}
	for i, m := range ms {
		lines := 0
		for _, line := range strings.Split(m.LogTail(4<<20), "\n") {
			if line == "" || strings.HasPrefix(line, "=== checker:") {
				continue
			}
			lines++
			var rec struct{ Level, Msg string }
			if err := json.Unmarshal([]byte(line), &rec); err != nil {
				t.Errorf("member %d printed a line that is not its JSON log: %q", i, line)
				continue
			}
			if rec.Level == "ERROR" {
				t.Errorf("member %d logged a normal cluster event as ERROR: %s", i, line)
			}
		}
		if lines == 0 {
			t.Errorf("member %d logged nothing", i)
		}
	}
}
