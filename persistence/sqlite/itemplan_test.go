package sqlite

import (
	"strings"
	"testing"

	"github.com/agentstate/agentstate/persistence"
)

// GetItem and every ListItems page read an index range, never the table
// nor the session's whole history: a key is one probe of
// message_rows_by_key, a kind page walks message_rows_by_kind in the
// page's order (no sort), and a key-prefix page is a range of
// message_rows_by_key (sorted: its cost follows the keys under the
// prefix).
func TestItemReadsUseTheirIndex(t *testing.T) {
	s := mustOpen(t, "memory:item-plans")
	defer mustClose(t, s)
	const id = "01J0000000000000000000000S"
	cases := []struct {
		f          persistence.ItemFilter
		index      string
		sortedOnce bool
	}{
		{persistence.ItemFilter{SessionID: id, Kind: "cp", NewestFirst: true, Limit: 10}, "message_rows_by_kind (session_id=? AND kind=?)", false},
		{persistence.ItemFilter{SessionID: id, Kind: "cp", HasCursor: true, Cursor: 5}, "message_rows_by_kind (session_id=? AND kind=? AND sequence>?)", false},
		{persistence.ItemFilter{SessionID: id, KeyPrefix: "w:1", Limit: 10}, "message_rows_by_key (session_id=? AND item_key>? AND item_key<?)", true},
		{persistence.ItemFilter{SessionID: id, KeyPrefix: "w:1", Kind: "w", NewestFirst: true}, "message_rows_by_key (session_id=? AND item_key>? AND item_key<?)", true},
	}
	for _, c := range cases {
		query, args := itemsSQL(c.f)
		plan := queryPlan(t, s, query, args...)
		t.Logf("%+v: %s", c.f, plan)
		if !strings.Contains(plan, "USING INDEX "+c.index) || strings.Contains(plan, "SCAN message_rows") {
			t.Errorf("%+v: plan %q, want a search of %s", c.f, plan, c.index)
		}
		if sorted := strings.Contains(plan, "TEMP B-TREE"); sorted != c.sortedOnce {
			t.Errorf("%+v: plan %q sorts: %v, want %v", c.f, plan, sorted, c.sortedOnce)
		}
	}
	plan := queryPlan(t, s, getItemSQL, id, "k", 0)
	if !strings.Contains(plan, "USING INDEX message_rows_by_key (session_id=? AND item_key=?)") {
		t.Errorf("GetItem plan %q, want one probe of message_rows_by_key", plan)
	}
	// Unfiltered, a page reads the session's sequence order, as
	// ListMessages does.
	query, args := itemsSQL(persistence.ItemFilter{SessionID: id, NewestFirst: true, Limit: 10})
	plan = queryPlan(t, s, query, args...)
	t.Logf("unfiltered: %s", plan)
	if strings.Contains(plan, "SCAN r") || strings.Contains(plan, "SCAN message_rows") {
		t.Errorf("unfiltered plan %q scans message_rows", plan)
	}
}
