package postgres

import (
	"context"
	"fmt"
	"strings"
	"testing"

	sessionv1 "github.com/agentstate/agentstate/messages/agentstate/session/v1"
	"github.com/agentstate/agentstate/messages/ids"
	"github.com/agentstate/agentstate/persistence"
)

// On a session of 4,000 keyed messages (analyzed), GetItem and every
// ListItems page read an index range and never scan the messages: a kind
// page walks session_messages_by_kind, a key-prefix page and GetItem
// session_messages_by_key, an unfiltered page the primary key.
func TestItemReadsUseTheirIndex(t *testing.T) {
	n := newNode(t, freshDSN(t))
	ctx := context.Background()
	id := ids.New()
	ms := make([]*sessionv1.Message, 4000)
	for i := range ms {
		kind := []string{"checkpoint", "write"}[i%2]
		ms[i] = message("m")
		ms[i].ItemKey, ms[i].Kind = fmt.Sprintf("%s:%06d", kind, i), kind
	}
	n.ok(&persistence.CreateSession{Session: newSession(id), Messages: ms})
	n.ok(&persistence.CreateSession{Session: newSession(ids.New()), Messages: []*sessionv1.Message{message("other")}})
	if _, err := n.store.pool.Exec(ctx, "ANALYZE session_messages"); err != nil {
		t.Fatal(err)
	}
	explain := func(query string, args ...any) string {
		t.Helper()
		rows, err := n.store.pool.Query(ctx, "EXPLAIN "+query, args...)
		if err != nil {
			t.Fatalf("explain: %v", err)
		}
		defer rows.Close()
		var lines []string
		for rows.Next() {
			var line string
			if err := rows.Scan(&line); err != nil {
				t.Fatal(err)
			}
			lines = append(lines, line)
		}
		return strings.Join(lines, "\n")
	}
	cases := []struct {
		f     persistence.ItemFilter
		index string
	}{
		{persistence.ItemFilter{SessionID: id, Kind: "checkpoint", NewestFirst: true, Limit: 10}, "session_messages_by_kind"},
		{persistence.ItemFilter{SessionID: id, Kind: "write", HasCursor: true, Cursor: 100, Limit: 10}, "session_messages_by_kind"},
		{persistence.ItemFilter{SessionID: id, KeyPrefix: "write:0001", Limit: 10}, "session_messages_by_key"},
		{persistence.ItemFilter{SessionID: id, NewestFirst: true, Limit: 10}, "session_messages_sequence_key"},
	}
	for _, c := range cases {
		query, args := itemsSQL(c.f)
		plan := explain(query, args...)
		t.Logf("%+v:\n%s", c.f, plan)
		if !strings.Contains(plan, c.index) || strings.Contains(plan, "Seq Scan on session_messages") {
			t.Errorf("%+v: plan\n%s\nwant a scan of %s", c.f, plan, c.index)
		}
	}
	if plan := explain(getItemSQL, id, "write:000001", int64(persistence.SessionStateStaged)); !strings.Contains(plan, "session_messages_by_key") {
		t.Errorf("GetItem plan\n%s\nwant session_messages_by_key", plan)
	}
}
