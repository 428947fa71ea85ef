package sqlite

import (
	"context"
	"database/sql"
	"errors"

	sessionv1 "github.com/agentstate/agentstate/messages/agentstate/session/v1"
	"github.com/agentstate/agentstate/messages/errs"
	"github.com/agentstate/agentstate/persistence"
	"github.com/agentstate/agentstate/persistence/sqlstore"
)

// itemSources is the FROM of each ListItems source: message_rows through
// the partial index that serves it (INDEXED BY, so that a plan never
// falls back to scanning the table), or, unfiltered, the view in
// sequence order.
var itemSources = map[sqlstore.ItemsSource]string{
	sqlstore.ItemsByKey:      "message_rows INDEXED BY message_rows_by_key",
	sqlstore.ItemsByKind:     "message_rows INDEXED BY message_rows_by_kind",
	sqlstore.ItemsBySequence: "session_messages",
}

const itemSizeColumn = `length(CAST(content AS BLOB)) + length(CAST(metadata_json AS BLOB)) + `

// itemsSQL is ListItems' statement and parameters.
func itemsSQL(f persistence.ItemFilter) (string, []any) {
	// The placeholders are "?": parameters go in the order of the text.
	w := sqlstore.NewWhere(dialect{})
	size := w.Arg(persistence.MessageOverhead)
	order, src := sqlstore.ItemsQuery(w, f)
	w.Cond("NOT EXISTS (SELECT 1 FROM sessions WHERE session_id = " + w.Arg(f.SessionID) + " AND state = " +
		w.Arg(int64(persistence.SessionStateStaged)) + ")")
	// One row past the limit tells whether more follow.
	limit := w.Arg(persistence.ClampLimit(f.Limit) + 1)
	return "SELECT " + itemSizeColumn + size + ", " + pageColumns + " FROM " + itemSources[src] + w.Clause() +
		" ORDER BY sequence " + order + " LIMIT " + limit, w.Args()
}

func (r *reader) ListItems(ctx context.Context, f persistence.ItemFilter) ([]*sessionv1.Message, bool, error) {
	query, args := itemsSQL(f)
	rows, err := r.db.QueryContext(ctx, query, args...)
	return pageUpTo(rows, err, f.SessionID, true, persistence.ClampLimit(f.Limit))
}

// getItemSQL is one probe of message_rows_by_key.
const getItemSQL = `SELECT 0, ` + pageColumns + ` FROM message_rows INDEXED BY message_rows_by_key
	WHERE session_id = ?1 AND item_key = ?2 AND item_key != ''
	AND NOT EXISTS (SELECT 1 FROM sessions WHERE session_id = ?1 AND state = ?3)`

func (r *reader) GetItem(ctx context.Context, sessionID, itemKey string) (*sessionv1.Message, error) {
	rows, err := r.db.QueryContext(ctx, getItemSQL, sessionID, itemKey, int64(persistence.SessionStateStaged))
	out, _, err := pageUpTo(rows, err, sessionID, false, 1)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return nil, err
	}
	if len(out) == 0 {
		return nil, errs.NotFound("session %s: no message with item key %q", sessionID, itemKey)
	}
	return out[0], nil
}
