package session_test

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/agentstate/agentstate/actors/session"
	sessionv1 "github.com/agentstate/agentstate/messages/agentstate/session/v1"
	"github.com/agentstate/agentstate/messages/errs"
)

// A snapshot must lie within what the session holds: covering no message
// past the last, and leaving uncovered none that truncation removed. Past
// either bound PutSnapshot answers FAILED_PRECONDITION and stores nothing
// (the slot keeps what it had).
func TestPutSnapshotOutsideTheSessionIsRefused(t *testing.T) {
	n := startNode(t, memURL(t), session.Config{}, nil)
	ctx := ctxT(t)
	id := n.create(t, "r")
	put := func(seq int64, data string) error {
		_, err := n.svc.PutSnapshot(ctx, &sessionv1.PutSnapshotRequest{SessionId: id, Sequence: seq, Data: []byte(data)})
		return err
	}
	slot := func() *sessionv1.Snapshot {
		t.Helper()
		s, err := n.svc.GetSnapshot(ctx, &sessionv1.GetSnapshotRequest{SessionId: id})
		if err != nil {
			t.Fatal(err)
		}
		return s.GetSnapshot()
	}

	// An empty session: only "covers nothing" (-1).
	wantCode(t, put(0, "past"), errs.FailedPreconditionCode)
	if err := put(-1, "empty"); err != nil {
		t.Fatalf("a snapshot covering nothing of an empty session: %v", err)
	}
	for i := range 5 {
		if _, err := n.svc.Append(ctx, &sessionv1.AppendRequest{SessionId: id, Messages: []*sessionv1.NewMessage{userMsg(fmt.Sprint(i))}}); err != nil {
			t.Fatal(err)
		}
	}
	if err := put(4, "at-4"); err != nil {
		t.Fatalf("a snapshot through the last message: %v", err)
	}
	for _, seq := range []int64{5, 1000, math.MaxInt64} {
		wantCode(t, put(seq, fmt.Sprint("past-", seq)), errs.FailedPreconditionCode)
	}
	if s := slot(); s.GetSequence() != 4 || string(s.GetData()) != "at-4" {
		t.Fatalf("after refused snapshots the slot holds %d %q, want 4 \"at-4\"", s.GetSequence(), s.GetData())
	}

	// Truncated through 2: a snapshot must cover at least through 2.
	if _, err := n.svc.Truncate(ctx, &sessionv1.TruncateRequest{SessionId: id, ThroughSequence: 2}); err != nil {
		t.Fatal(err)
	}
	for _, seq := range []int64{-1, 0, 1} {
		wantCode(t, put(seq, fmt.Sprint("old-", seq)), errs.FailedPreconditionCode)
	}
	if s := slot(); s.GetSequence() != 4 || string(s.GetData()) != "at-4" {
		t.Fatalf("after refused snapshots the slot holds %d %q, want 4 \"at-4\"", s.GetSequence(), s.GetData())
	}
	if err := put(2, "at-2"); err != nil {
		t.Fatalf("a snapshot through the truncation point: %v", err)
	}
	if s := slot(); s.GetSequence() != 2 || string(s.GetData()) != "at-2" {
		t.Fatalf("slot holds %d %q, want 2 \"at-2\"", s.GetSequence(), s.GetData())
	}

	// An export whose snapshot lies outside its messages is refused
	// whole, INVALID_ARGUMENT (the document contradicts itself), resealed
	// with a correct checksum as any client could.
	ex, err := n.svc.Export(ctx, &sessionv1.ExportSessionRequest{SessionId: id})
	if err != nil {
		t.Fatal(err)
	}
	canon := strings.TrimSuffix(ex.GetData(), `,"checksum":"`+ex.GetChecksum()+`"}`) + "}"
	const at = `"snapshot":{"sequence":2,`
	if !strings.Contains(canon, at) {
		t.Fatalf("export lacks %s: %s", at, canon)
	}
	for _, seq := range []string{"1", "5", "9223372036854775807"} {
		c := strings.Replace(canon, at, `"snapshot":{"sequence":`+seq+`,`, 1)
		sum := sha256.Sum256([]byte(c))
		doc := strings.TrimSuffix(c, "}") + `,"checksum":"` + hex.EncodeToString(sum[:]) + `"}`
		_, err := n.svc.Import(ctx, &sessionv1.ImportSessionRequest{Data: doc})
		wantCode(t, err, errs.InvalidArgumentCode)
		if !strings.Contains(err.Error(), "session.snapshot") {
			t.Fatalf("snapshot at %s refused for another reason: %v", seq, err)
		}
	}
	if _, err := n.svc.Import(ctx, &sessionv1.ImportSessionRequest{Data: ex.GetData()}); err != nil {
		t.Fatalf("importing the export as it is: %v", err)
	}
}
