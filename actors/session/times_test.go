package session_test

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"testing"
	"time"

	"github.com/agentstate/agentstate/actors/session"
	sessionv1 "github.com/agentstate/agentstate/messages/agentstate/session/v1"
	"github.com/agentstate/agentstate/messages/errs"
)

// TestImportTimesAreKeptExactlyOrRefused: an imported message time outside
// the stores' nanosecond range was rewritten (1600 stored as 2184); it is
// INVALID_ARGUMENT naming the message now, as is the epoch itself (stored
// as "unset"), while one just inside the range round-trips exactly.
func TestImportTimesAreKeptExactlyOrRefused(t *testing.T) {
	n := startNode(t, memURL(t), session.Config{}, nil)
	ctx := ctxT(t)
	id := n.create(t, "a")
	if _, err := n.svc.Append(ctx, &sessionv1.AppendRequest{SessionId: id, Messages: []*sessionv1.NewMessage{userMsg("m")}}); err != nil {
		t.Fatal(err)
	}
	ex, err := n.svc.Export(ctx, &sessionv1.ExportSessionRequest{SessionId: id})
	if err != nil {
		t.Fatal(err)
	}
	stored := `"created_at":"` + n.messages(t, id)[0].GetCreatedAt().AsTime().UTC().Format(time.RFC3339Nano) + `"`
	canon := strings.TrimSuffix(ex.GetData(), `,"checksum":"`+ex.GetChecksum()+`"}`) + "}"
	if strings.Count(canon, stored) == 0 {
		t.Fatalf("export lacks the message's %s", stored)
	}
	// The message's time is the last created_at of the export.
	at := strings.LastIndex(canon, stored)
	withTime := func(ts string) string {
		c := canon[:at] + `"created_at":"` + ts + `"` + canon[at+len(stored):]
		sum := sha256.Sum256([]byte(c))
		return strings.TrimSuffix(c, "}") + `,"checksum":"sha256:` + hex.EncodeToString(sum[:]) + `"}`
	}
	for _, ts := range []string{"1600-01-01T00:00:00Z", "2300-01-01T00:00:00Z", "0000-01-01T00:00:00Z", "1970-01-01T00:00:00Z"} {
		_, err := n.svc.Import(ctx, &sessionv1.ImportSessionRequest{Data: withTime(ts)})
		wantCode(t, err, errs.InvalidArgumentCode)
		if !strings.Contains(err.Error(), "messages[0].created_at") {
			t.Fatalf("import at %s refused for another reason: %v", ts, err)
		}
	}
	const edge = "1677-09-21T00:12:43.145224193Z"
	imp, err := n.svc.Import(ctx, &sessionv1.ImportSessionRequest{Data: withTime(edge)})
	if err != nil {
		t.Fatalf("import at %s: %v", edge, err)
	}
	if got := n.messages(t, imp.GetSession().GetSessionId())[0].GetCreatedAt().AsTime().UTC().Format(time.RFC3339Nano); got != edge {
		t.Fatalf("imported %s, stored %s", edge, got)
	}
}
