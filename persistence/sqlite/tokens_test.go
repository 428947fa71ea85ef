package sqlite_test

import (
	"context"
	"database/sql"
	"math"
	"path/filepath"
	"testing"
	"time"

	sessionv1 "github.com/agentstate/agentstate/messages/agentstate/session/v1"
	"github.com/agentstate/agentstate/messages/ids"
	"github.com/agentstate/agentstate/persistence"
	"github.com/agentstate/agentstate/persistence/sqlite"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// A session row corrupted by an overflowing token update, before such
// updates were refused (an integer sum turned into a REAL beyond int64, a
// cost of Infinity), still reads, lists and deletes: reading never depends
// on those values being in range. Updates that would grow them further are
// refused.
func TestCorruptTokenTotalsStillRead(t *testing.T) {
	path := filepath.Join(t.TempDir(), "agentstate.db")
	st, err := sqlite.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	w, err := st.Writer()
	if err != nil {
		t.Fatal(err)
	}
	defer w.Release()
	ctx := context.Background()
	id, now := ids.New(), timestamppb.New(time.Now())
	apply := func(cmd persistence.Command) error {
		t.Helper()
		res, err := w.Apply(ctx, []persistence.Command{cmd})
		if err != nil {
			t.Fatal(err)
		}
		return res[0].Err
	}
	if err := apply(&persistence.CreateSession{Session: &sessionv1.Session{SessionId: id, Namespace: "local", CreatedAt: now, UpdatedAt: now}}); err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("sqlite3", "file:"+path+"?_busy_timeout=5000")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	// What SQLite stored for MaxInt64 + 1 input tokens and an overflowing cost.
	if _, err := db.Exec(`UPDATE sessions SET input_tokens = 9223372036854775807 + 1, output_tokens = 5, cost = 1e308 * 10 WHERE session_id = ?`, id); err != nil {
		t.Fatal(err)
	}
	var kind string
	if err := db.QueryRow(`SELECT typeof(input_tokens) FROM sessions WHERE session_id = ?`, id).Scan(&kind); err != nil || kind != "real" {
		t.Fatalf("corrupt row holds a %s (%v), want a real", kind, err)
	}

	want := &sessionv1.TokenUsage{InputTokens: math.MaxInt64, OutputTokens: 5, Cost: math.MaxFloat64}
	s, err := st.Reader().GetSession(ctx, id)
	if err != nil {
		t.Fatalf("GetSession of a corrupt row: %v", err)
	}
	if got := s.GetTokenUsage(); got.InputTokens != want.InputTokens || got.OutputTokens != want.OutputTokens || got.Cost != want.Cost {
		t.Fatalf("totals read %v, want them saturated: %v", got, want)
	}
	if l, err := st.Reader().ListSessions(ctx, persistence.SessionFilter{}); err != nil || len(l) != 1 {
		t.Fatalf("ListSessions with a corrupt row: %v, %v", l, err)
	}
	if err := apply(&persistence.UpdateSession{SessionID: id, TokenDelta: &sessionv1.TokenUsage{InputTokens: 1}}); err == nil ||
		err.Error() != persistence.TokenOverflow(id).Error() {
		t.Fatalf("adding to a corrupt total: %v, want %v", err, persistence.TokenOverflow(id))
	}
	if err := apply(&persistence.UpdateSession{SessionID: id, State: sessionv1.SessionState_SESSION_STATE_CLOSED, ClosedAt: time.Now()}); err != nil {
		t.Fatalf("closing a corrupt row: %v", err)
	}
	if err := apply(&persistence.DeleteSession{SessionID: id}); err != nil {
		t.Fatalf("deleting a corrupt row: %v", err)
	}
}
