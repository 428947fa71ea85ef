package postgres

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/agentstate/agentstate/messages/ids"
	"github.com/agentstate/agentstate/persistence"
	"github.com/agentstate/agentstate/persistence/sqlstore"
)

// In a namespace of 2,000 keyed sessions (analyzed), DeleteSessions
// selects its group as a range of sessions_by_client_key (client keys
// are "C"-ordered since the migration that says so), never a walk of the
// namespace. (storetest's group cases check what it deletes.)
func TestGroupSelectionUsesTheClientKeyIndex(t *testing.T) {
	n := newNode(t, freshDSN(t))
	ctx := context.Background()
	for i := 0; i < 2000; i++ {
		s := newSession(ids.New())
		s.ClientKey = fmt.Sprintf("thread-%04d:ns-%d", i/2, i%2)
		n.ok(&persistence.CreateSession{Session: s})
	}
	if _, err := n.store.pool.Exec(ctx, "ANALYZE sessions"); err != nil {
		t.Fatal(err)
	}
	w := sqlstore.NewWhere(dialect{})
	query := sqlstore.GroupQuery(w, "n", "thread-0007:", 1001)
	rows, err := n.store.pool.Query(ctx, "EXPLAIN "+query, w.Args()...)
	if err != nil {
		t.Fatalf("explain: %v", err)
	}
	var lines []string
	for rows.Next() {
		var line string
		if err := rows.Scan(&line); err != nil {
			t.Fatal(err)
		}
		lines = append(lines, line)
	}
	rows.Close()
	plan := strings.Join(lines, "\n")
	t.Logf("plan:\n%s", plan)
	if !strings.Contains(plan, "sessions_by_client_key") || strings.Contains(plan, "Seq Scan") {
		t.Errorf("plan %q, want a range of sessions_by_client_key", plan)
	}
}
