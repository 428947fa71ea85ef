package sqlstore

import (
	"github.com/agentstate/agentstate/persistence"
)

// ItemsSource names the index a ListItems page reads, so that each store
// can say (or hint) it: a key-prefix page is a range of the (session_id,
// item_key) index, a kind page a walk of the (session_id, kind, sequence)
// index in sequence order, and an unfiltered page the session's sequence
// order.
type ItemsSource int

const (
	ItemsBySequence ItemsSource = iota
	ItemsByKey
	ItemsByKind
)

// ItemsQuery is a ListItems page's conditions on the messages table (its
// columns session_id, sequence, item_key, kind), its ORDER BY direction
// ("ASC" or "DESC") and the index it reads; the store adds the staged
// check, the columns, the LIMIT and the byte cap. The partial indexes'
// conditions (item_key / kind not empty) are repeated so the planner may
// use them.
func ItemsQuery(w *Where, f persistence.ItemFilter) (order string, src ItemsSource) {
	w.Cond("session_id = " + w.Arg(f.SessionID))
	src = ItemsBySequence
	if f.KeyPrefix != "" {
		src = ItemsByKey
		w.Cond("item_key >= " + w.Arg(f.KeyPrefix) + " AND item_key <> ''")
		if end, ok := persistence.PrefixEnd(f.KeyPrefix); ok {
			w.Cond("item_key < " + w.Arg(end))
		}
	}
	if f.Kind != "" {
		if src == ItemsBySequence {
			src = ItemsByKind
		}
		w.Cond("kind = " + w.Arg(f.Kind) + " AND kind <> ''")
	}
	order = "ASC"
	if f.NewestFirst {
		order = "DESC"
	}
	if f.HasCursor {
		if f.NewestFirst {
			w.Cond("sequence < " + w.Arg(f.Cursor))
		} else {
			w.Cond("sequence >= " + w.Arg(f.Cursor))
		}
	}
	return order, src
}
