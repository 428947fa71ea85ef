package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	sessionv1 "github.com/agentstate/agentstate/messages/agentstate/session/v1"
	"github.com/agentstate/agentstate/messages/errs"
	"github.com/agentstate/agentstate/persistence"
	"github.com/agentstate/agentstate/persistence/storetest"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// Schema migration 5 stores messages pending (indexed = 0) and settles
// them into the per-session index in batches (settle); since migration 7
// the two sides are the tables message_pending and message_index, beside
// content rows that never change. These tests put a
// session's rows on both sides of that line and check that nothing a
// caller sees depends on it.

// appendOne appends one single-message turn at next, in a transaction of
// its own, and returns the stored message.
func appendOne(t *testing.T, w persistence.Writer, session string, next int64, content string) *sessionv1.Message {
	t.Helper()
	cmd := &persistence.AppendMessages{SessionID: session, NextSequence: next, UpdatedAt: time.Now(),
		Turns: []persistence.Turn{{Messages: []*sessionv1.Message{newMsg(content, timestamppb.Now())}}}}
	r := applyOK(t, w, cmd)[0]
	res := cmd.ResultOf(r)
	if r.Err != nil || res.Turns[0].Err != nil {
		t.Fatalf("append at %d: %v %v", next, r.Err, res.Turns[0].Err)
	}
	return res.Turns[0].Messages[0]
}

// rowKinds counts the session's settled and pending rows, and checks that
// each content row has exactly one entry, on one side.
func rowKinds(t *testing.T, s *Store, session string) (settled, pending int) {
	t.Helper()
	var rows, placed int
	err := s.rdb.QueryRow(`SELECT
		(SELECT count(*) FROM message_index WHERE session_id = ?1),
		(SELECT count(*) FROM message_pending WHERE session_id = ?1),
		(SELECT count(*) FROM message_rows WHERE session_id = ?1),
		(SELECT count(DISTINCT r.id) FROM message_rows r
			WHERE r.session_id = ?1 AND (EXISTS (SELECT 1 FROM message_index i WHERE i.id = r.id AND i.session_id = ?1 AND i.sequence = r.sequence)
				OR EXISTS (SELECT 1 FROM message_pending p WHERE p.id = r.id AND p.session_id = ?1 AND p.sequence = r.sequence)))`,
		session).Scan(&settled, &pending, &rows, &placed)
	if err != nil {
		t.Fatal(err)
	}
	if settled+pending != rows || placed != rows {
		t.Fatalf("session %s: %d content rows, %d of them with an entry; %d settled and %d pending entries", session, rows, placed, settled, pending)
	}
	return settled, pending
}

func TestReadsMergeSettledAndPendingRows(t *testing.T) {
	s, w, id := layoutSession(t, "layout-reads", 4)
	var answered []*sessionv1.Message
	for i := range 10 {
		answered = append(answered, appendOne(t, w, id, int64(i), fmt.Sprint("m", i)))
	}
	// Settled after the 4th and the 8th row; the last two are pending.
	if settled, pending := rowKinds(t, s, id); settled != 8 || pending != 2 {
		t.Fatalf("%d settled and %d pending rows, want 8 and 2", settled, pending)
	}
	stored := storedMessages(t, s, id)
	if len(stored) != 10 {
		t.Fatalf("%d messages read, want 10", len(stored))
	}
	for i, m := range stored {
		if !proto.Equal(m, answered[i]) {
			t.Fatalf("message %d: read %v, answered %v", i, m, answered[i])
		}
	}
	// A page that starts among the settled rows and ends among the pending.
	page, err := s.Reader().ListMessages(context.Background(), id, 6, 3)
	if err != nil {
		t.Fatal(err)
	}
	if len(page) != 3 || page[0].Sequence != 6 || page[1].Sequence != 7 || page[2].Sequence != 8 {
		t.Fatalf("page from 6: %v", page)
	}
}

// Idempotency and the compare-and-set hold against settled rows: a retried
// turn is the duplicate of the settled original, and a stale append whose
// sequence a settled row holds stores nothing.
func TestSettledRowsStillGuardAppends(t *testing.T) {
	s, w, id := layoutSession(t, "layout-guards", 1)
	first := appendOne(t, w, id, 0, "x")
	appendOne(t, w, id, 1, "y")
	if settled, pending := rowKinds(t, s, id); settled != 2 || pending != 0 {
		t.Fatalf("%d settled and %d pending rows, want 2 and 0", settled, pending)
	}
	retry := proto.Clone(first).(*sessionv1.Message)
	retry.Sequence, retry.SessionId = 0, ""
	rc := &persistence.AppendMessages{SessionID: id, NextSequence: 2, UpdatedAt: time.Now(),
		Turns: []persistence.Turn{{Messages: []*sessionv1.Message{retry}}}}
	r := applyOK(t, w, rc)[0]
	if res := rc.ResultOf(r); r.Err != nil || !res.Turns[0].Duplicate || !proto.Equal(res.Turns[0].Messages[0], first) {
		t.Fatalf("retry of a settled message: %v %+v", r.Err, res)
	}
	stale := applyOK(t, w, &persistence.AppendMessages{SessionID: id, NextSequence: 1, UpdatedAt: time.Now(),
		Turns: []persistence.Turn{{Messages: []*sessionv1.Message{newMsg("late", timestamppb.Now())}}}})[0]
	if errs.CodeOf(stale.Err) != errs.FailedPreconditionCode {
		t.Fatalf("stale append over settled rows: %v, want FAILED_PRECONDITION", stale.Err)
	}
	if n := len(storedMessages(t, s, id)); n != 2 {
		t.Fatalf("%d messages after the stale append, want 2", n)
	}
}

// Truncation and deletion find a session's rows on both sides.
func TestTruncateAndDeleteReachBothKindsOfRows(t *testing.T) {
	s, w, id := layoutSession(t, "layout-delete", 4)
	for i := range 7 {
		appendOne(t, w, id, int64(i), fmt.Sprint("m", i))
	}
	// 0-3 settled, 4-6 pending: truncating through 4 crosses the line.
	res := applyOK(t, w, &persistence.TruncateSession{SessionID: id, Through: 4, UpdatedAt: time.Now()})[0]
	if res.Err != nil {
		t.Fatal(res.Err)
	}
	stored := storedMessages(t, s, id)
	if len(stored) != 2 || stored[0].Sequence != 5 || stored[1].Sequence != 6 {
		t.Fatalf("after truncating through 4: %v", stored)
	}
	del := &persistence.DeleteSession{SessionID: id, Limit: 1}
	res = applyOK(t, w, del)[0]
	if res.Err != nil || del.ResultOf(res).MessagesRemoved != 1 {
		t.Fatalf("delete one: %+v", res)
	}
	if stored = storedMessages(t, s, id); len(stored) != 1 || stored[0].Sequence != 5 {
		t.Fatalf("after deleting the last message: %v", stored)
	}
	del = &persistence.DeleteSession{SessionID: id}
	res = applyOK(t, w, del)[0]
	if res.Err != nil || del.ResultOf(res).MessagesRemoved != 1 {
		t.Fatalf("delete: %+v", res)
	}
	if settled, pending := rowKinds(t, s, id); settled+pending != 0 {
		t.Fatalf("%d rows outlive their session", settled+pending)
	}
}

// Every statement on messages finds them by index: a full scan of the
// table would make reads and deletes cost the whole store.
func TestMessageStatementsUseIndexes(t *testing.T) {
	s := mustOpen(t, "memory:layout-plans")
	defer mustClose(t, s)
	for _, q := range []string{
		// The reader's page query (reader.go, ListMessages).
		`SELECT sequence, content FROM session_messages WHERE session_id = ?2 AND sequence >= ?3
			AND NOT EXISTS (SELECT 1 FROM sessions WHERE session_id = ?2 AND state = ?5) ORDER BY sequence LIMIT ?4`,
		`SELECT sequence FROM session_messages WHERE session_id = ? AND sequence >= ? ORDER BY sequence DESC LIMIT 5`,
		`DELETE FROM message_rows WHERE id IN (SELECT id FROM session_messages WHERE session_id = ? AND sequence <= ?)`,
		deleteLastMessagesSQL,
		`SELECT sequence FROM message_rows WHERE message_id = ? AND session_id = ?`,
		settleEndSQL, settleSQL, settleDeleteSQL, settleToEndSQL, settleDeleteToEndSQL,
		// message_rows' delete trigger.
		`DELETE FROM message_index WHERE session_id = ? AND sequence = ? AND id = ?`,
		`DELETE FROM message_pending WHERE session_id = ? AND sequence = ? AND id = ?`,
	} {
		args := make([]any, strings.Count(q, "?"))
		if q == deleteLastMessagesSQL {
			args = args[:2]
		}
		for i := range args {
			args[i] = int64(1)
		}
		if strings.Contains(q, "?5") {
			args = args[:5]
		}
		rows, err := s.rdb.Query("EXPLAIN QUERY PLAN "+q, args...)
		if err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		var plan []string
		for rows.Next() {
			var id, parent, unused int
			var detail string
			if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
				t.Fatal(err)
			}
			plan = append(plan, detail)
		}
		rows.Close()
		all := strings.Join(plan, "; ")
		t.Logf("%s\n%s", q, all)
		if strings.Contains(all, "SCAN message_rows") && !strings.Contains(all, "USING") {
			t.Errorf("%s\nscans the table: %s", q, all)
		}
		for _, p := range plan {
			// A co-routine's rows are read by a "scan" of the subquery.
			scan := strings.HasPrefix(p, "SCAN ") && !strings.HasPrefix(p, "SCAN (subquery")
			if scan || strings.Contains(p, "TEMP B-TREE") {
				t.Errorf("%s\nscans the table: %s", q, all)
			}
		}
	}
}

// A database whose messages predate migration 5 keeps them settled, and
// a store opened on pending rows counts them, so that it settles in time.
func TestPendingRowsAreCountedOnOpen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "pending.db")
	s := mustOpen(t, path)
	id := storetest.CreateSession(t, s)
	w, err := s.Writer()
	if err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		appendOne(t, w, id, int64(i), fmt.Sprint("m", i))
	}
	w.Release()
	mustClose(t, s)
	s = mustOpen(t, path)
	defer mustClose(t, s)
	s.wmu.Lock()
	pending := s.pending
	s.wmu.Unlock()
	if pending != 5 {
		t.Fatalf("%d pending rows counted on open, want 5", pending)
	}
}

// A transaction of many rows per session writes them settled at once, and
// one of about a row per session writes them pending (pendingLayout).
func TestTransactionShapeChoosesTheRowKind(t *testing.T) {
	s := mustOpen(t, "memory:layout-shape")
	defer mustClose(t, s)
	one, a, b := storetest.CreateSession(t, s), storetest.CreateSession(t, s), storetest.CreateSession(t, s)
	cold, warm := storetest.CreateSession(t, s), storetest.CreateSession(t, s)
	w, err := s.Writer()
	if err != nil {
		t.Fatal(err)
	}
	defer w.Release()
	at := timestamppb.Now()
	turns := make([]persistence.Turn, pendingRowsPerSession)
	for i := range turns {
		turns[i].Messages = []*sessionv1.Message{newMsg(fmt.Sprint("m", i), at)}
	}
	res := applyOK(t, w, &persistence.AppendMessages{SessionID: one, Turns: turns, UpdatedAt: time.Now()})[0]
	if res.Err != nil {
		t.Fatal(res.Err)
	}
	if settled, pending := rowKinds(t, s, one); settled != pendingRowsPerSession || pending != 0 {
		t.Fatalf("%d rows on one session: %d settled, %d pending; want all settled", pendingRowsPerSession, settled, pending)
	}
	res = applyOK(t, w,
		&persistence.AppendMessages{SessionID: a, Turns: turns[:1], UpdatedAt: time.Now()},
		&persistence.AppendMessages{SessionID: b, Turns: turns[1:2], UpdatedAt: time.Now()})[0]
	if res.Err != nil {
		t.Fatal(res.Err)
	}
	for _, id := range []string{a, b} {
		if settled, pending := rowKinds(t, s, id); settled != 0 || pending != 1 {
			t.Fatalf("one row per session: %d settled, %d pending; want it pending", settled, pending)
		}
	}
	if got := storedMessages(t, s, one); len(got) != pendingRowsPerSession {
		t.Fatalf("%d messages read, want %d", len(got), pendingRowsPerSession)
	}
	// A cold owner's first write, folded into its activation, counts as
	// the same write alone: its many rows outweigh another session's one.
	many := make([]persistence.Turn, 2*pendingRowsPerSession)
	for i := range many {
		many[i].Messages = []*sessionv1.Message{newMsg(fmt.Sprint("c", i), at)}
	}
	for i, r := range applyOK(t, w,
		&persistence.AppendMessages{SessionID: warm, Turns: turns[:1], UpdatedAt: time.Now()},
		&persistence.Activate{Kind: persistence.OwnerSession, ID: cold,
			Then: &persistence.AppendMessages{SessionID: cold, Turns: many, UpdatedAt: time.Now()}}) {
		if r.Err != nil {
			t.Fatalf("command %d: %v", i, r.Err)
		}
	}
	if settled, pending := rowKinds(t, s, cold); settled != len(many) || pending != 0 {
		t.Fatalf("an activation's %d rows beside one row: %d settled, %d pending; want all settled", len(many), settled, pending)
	}
}

// A settle takes a slice of the pending entries — whole sessions, from
// where the last one stopped — and the slices sweep every session in turn:
// after each transaction every session reads complete and in order, its
// settled entries all precede its pending ones, the writer's count of
// pending rows is the table's, and no more than settleAt stay pending.
func TestSettleSlicesSweepTheSessions(t *testing.T) {
	s := mustOpen(t, "memory:layout-slices")
	defer mustClose(t, s)
	const settleAt = 16
	SettleEvery(s, settleAt)
	sessions := make([]string, 6)
	for i := range sessions {
		sessions[i] = storetest.CreateSession(t, s)
	}
	w, err := s.Writer()
	if err != nil {
		t.Fatal(err)
	}
	defer w.Release()
	everSettled := map[string]bool{}
	sliced := false // a settle left other sessions' rows pending
	for n := range 20 {
		// One row per session per transaction: written pending.
		batch := make([]persistence.Command, len(sessions))
		appends := make([]*persistence.AppendMessages, len(sessions))
		for i, id := range sessions {
			appends[i] = &persistence.AppendMessages{SessionID: id, NextSequence: int64(n), UpdatedAt: time.Now(),
				Turns: []persistence.Turn{{Messages: []*sessionv1.Message{newMsg(fmt.Sprint(id, "/", n), timestamppb.Now())}}}}
			batch[i] = appends[i]
		}
		for i, res := range applyOK(t, w, batch...) {
			if res.Err != nil || appends[i].ResultOf(res).Turns[0].Err != nil {
				t.Fatalf("append %d: %v %v", n, res.Err, appends[i].ResultOf(res).Turns[0].Err)
			}
		}
		total, nonePending := 0, 0
		for _, id := range sessions {
			stored := storedMessages(t, s, id)
			if len(stored) != n+1 {
				t.Fatalf("after transaction %d: %d messages read, want %d", n, len(stored), n+1)
			}
			for i, m := range stored {
				if m.Sequence != int64(i) || m.Content != fmt.Sprint(id, "/", i) {
					t.Fatalf("after transaction %d: message %d is %v", n, i, m)
				}
			}
			settled, pending := rowKinds(t, s, id)
			var lastSettled, firstPending sql.NullInt64
			if err := s.rdb.QueryRow(`SELECT (SELECT max(sequence) FROM message_index WHERE session_id = ?1),
				(SELECT min(sequence) FROM message_pending WHERE session_id = ?1)`, id).Scan(&lastSettled, &firstPending); err != nil {
				t.Fatal(err)
			}
			if lastSettled.Valid && firstPending.Valid && lastSettled.Int64 > firstPending.Int64 {
				t.Fatalf("after transaction %d: settled up to %d but %d is pending", n, lastSettled.Int64, firstPending.Int64)
			}
			everSettled[id] = everSettled[id] || settled > 0
			total += pending
			if pending == 0 {
				nonePending++
			}
		}
		sliced = sliced || (nonePending > 0 && total > 0)
		s.wmu.Lock()
		counted := s.pending
		s.wmu.Unlock()
		if counted != int64(total) || total >= settleAt {
			t.Fatalf("after transaction %d: %d rows pending, %d counted (settle at %d)", n, total, counted, settleAt)
		}
	}
	if !sliced {
		t.Fatal("every settle took every session's rows, none a slice")
	}
	for id, ok := range everSettled {
		if !ok {
			t.Fatalf("session %s was never settled in 20 transactions", id)
		}
	}
}

// layoutSession opens a memory store named name that settles every settle
// pending rows, with one session and the store's writer, all closed when
// the test ends.
func layoutSession(t *testing.T, name string, settle int64) (*Store, persistence.Writer, string) {
	t.Helper()
	s := mustOpen(t, "memory:"+name)
	t.Cleanup(func() { mustClose(t, s) })
	SettleEvery(s, settle)
	id := storetest.CreateSession(t, s)
	w, err := s.Writer()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Release)
	return s, w, id
}
