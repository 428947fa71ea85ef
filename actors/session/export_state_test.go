package session_test

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/agentstate/agentstate/actors/session"
	sessionv1 "github.com/agentstate/agentstate/messages/agentstate/session/v1"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// Export and import keep a session's state, snapshot slot, truncation
// point, client key, expiry and event times, through each of the three
// ways (unary document, chunk stream, JSON Lines file); the copy exports
// with the original's checksum.
func TestExportImportKeepsStateSnapshotAndTruncation(t *testing.T) {
	nd := startNode(t, memURL(t), session.Config{ExpirySweepInterval: -1}, nil)
	ctx := ctxT(t)
	exp := time.Now().Add(time.Hour).UTC()
	c, err := nd.svc.Create(ctx, &sessionv1.CreateSessionRequest{Namespace: "ex", ClientKey: "k1", ExpiresAt: timestamppb.New(exp),
		StateDelta: delta("a", `{"b":[1,"<x>"]}`)})
	if err != nil {
		t.Fatal(err)
	}
	id := c.GetSession().GetSessionId()
	at := time.Date(2030, 5, 6, 7, 8, 9, 10, time.UTC)
	for i := range 6 {
		if _, err := nd.svc.Append(ctx, &sessionv1.AppendRequest{SessionId: id, StateDelta: delta(fmt.Sprint("k", i), fmt.Sprint(i)),
			Messages: []*sessionv1.NewMessage{{Role: sessionv1.Role_ROLE_USER, Content: fmt.Sprint(i), MessageId: fmt.Sprint("ev-", i),
				EventTime: timestamppb.New(at.Add(time.Duration(i) * time.Second))}}}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := nd.svc.Truncate(ctx, &sessionv1.TruncateRequest{SessionId: id, ThroughSequence: 2}); err != nil {
		t.Fatal(err)
	}
	if _, err := nd.svc.PutSnapshot(ctx, &sessionv1.PutSnapshotRequest{SessionId: id, Sequence: 2, Data: []byte{0, 1, 2, 255}}); err != nil {
		t.Fatal(err)
	}
	ex, err := nd.svc.Export(ctx, &sessionv1.ExportSessionRequest{SessionId: id})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"first_sequence":3`, `"client_key":"k1"`, `"state_json":`, `"snapshot":`, `"event_time":`, `"message_count":3`} {
		if !strings.Contains(ex.GetData(), want) {
			t.Fatalf("export lacks %s: %s", want, ex.GetData())
		}
	}
	origState := nd.state(t, id)
	origSnap, err := nd.svc.GetSnapshot(ctx, &sessionv1.GetSnapshotRequest{SessionId: id})
	if err != nil || origSnap.GetSnapshot() == nil {
		t.Fatalf("snapshot: %v %v", origSnap, err)
	}
	origMsgs := nd.messages(t, id)
	chunks := exportChunks(t, nd, id)
	var file bytes.Buffer
	if _, err := nd.svc.ExportFile(ctx, &sessionv1.ExportSessionRequest{SessionId: id}, &file); err != nil {
		t.Fatal(err)
	}
	// The client key is unique in its namespace: an import of the
	// session while it exists is refused; once it is gone, each way
	// restores it (and the copy is deleted before the next).
	if im, err := nd.svc.Import(ctx, &sessionv1.ImportSessionRequest{Data: ex.GetData()}); err == nil {
		t.Fatalf("an import whose client key is taken was accepted: %v", im)
	}
	if _, err := nd.svc.Delete(ctx, &sessionv1.DeleteSessionRequest{SessionId: id}); err != nil {
		t.Fatal(err)
	}
	check := func(how string, im *sessionv1.ImportSessionResponse, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", how, err)
		}
		cp := nd.get(t, im.GetSession().GetSessionId())
		if cp.GetFirstSequence() != 3 || cp.GetMessageCount() != 6 || cp.GetClientKey() != "k1" || !cp.GetExpiresAt().AsTime().Equal(exp) {
			t.Fatalf("%s: copy %v", how, cp)
		}
		if st := nd.state(t, cp.GetSessionId()); st.GetStateJson() != origState.GetStateJson() || st.GetNextSequence() != 6 {
			t.Fatalf("%s: state %v, original %v", how, st, origState)
		}
		sb, err := nd.svc.GetSnapshot(ctx, &sessionv1.GetSnapshotRequest{SessionId: cp.GetSessionId()})
		if err != nil || !proto.Equal(origSnap.GetSnapshot(), sb.GetSnapshot()) {
			t.Fatalf("%s: snapshot %v, original %v", how, sb, origSnap)
		}
		mb := nd.messages(t, cp.GetSessionId())
		if len(mb) != len(origMsgs) {
			t.Fatalf("%s: %d messages, original %d", how, len(mb), len(origMsgs))
		}
		for i, m := range origMsgs {
			if m.GetSequence() != mb[i].GetSequence() || m.GetMessageId() != mb[i].GetMessageId() || !proto.Equal(m.GetEventTime(), mb[i].GetEventTime()) ||
				!proto.Equal(m.GetCreatedAt(), mb[i].GetCreatedAt()) {
				t.Fatalf("%s: message %d: %v, original %v", how, i, mb[i], m)
			}
		}
		// An append continues the copy at the original's next sequence.
		six := int64(6)
		if r, err := nd.svc.Append(ctx, &sessionv1.AppendRequest{SessionId: cp.GetSessionId(), ExpectedNextSequence: &six,
			Messages: []*sessionv1.NewMessage{userMsg("after")}}); err != nil || r.GetMessages()[0].GetSequence() != 6 {
			t.Fatalf("%s: append to the copy: %v %v", how, r, err)
		}
		if _, err := nd.svc.Delete(ctx, &sessionv1.DeleteSessionRequest{SessionId: cp.GetSessionId()}); err != nil {
			t.Fatal(err)
		}
	}
	im, err := nd.svc.Import(ctx, &sessionv1.ImportSessionRequest{Data: ex.GetData()})
	check("Import", im, err)
	im, err = nd.svc.ImportFrom(ctx, feed(chunks))
	check("ImportFrom", im, err)
	im, err = nd.svc.ImportFile(ctx, bytes.NewReader(file.Bytes()))
	check("ImportFile", im, err)
}
