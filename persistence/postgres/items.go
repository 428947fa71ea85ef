package postgres

import (
	"context"

	sessionv1 "github.com/agentstate/agentstate/messages/agentstate/session/v1"
	"github.com/agentstate/agentstate/messages/errs"
	"github.com/agentstate/agentstate/persistence"
	"github.com/agentstate/agentstate/persistence/sqlstore"
)

// itemsSQL is ListItems' statement and parameters. As in ListMessages the
// byte cap is applied by the server, over the page in its order: the rows
// that fit, and one more (its content and metadata left out) when the cap
// or the limit stopped the page, which says that more follow. The inner
// LIMIT is one past the page; the planner walks the partial index the
// filter names (sqlstore.ItemsQuery) or the primary key in sequence order.
func itemsSQL(f persistence.ItemFilter) (string, []any) {
	w := sqlstore.NewWhere(dialect{})
	order, _ := sqlstore.ItemsQuery(w, f)
	w.Cond("NOT EXISTS (SELECT 1 FROM sessions WHERE session_id = " + w.Arg(f.SessionID) + " AND state = " +
		w.Arg(int64(persistence.SessionStateStaged)) + ")")
	size := w.Arg(persistence.MessageOverhead)
	limit := persistence.ClampLimit(f.Limit)
	inner := w.Arg(limit + 1)
	capBytes := w.Arg(int64(persistence.MaxPageBytes))
	lim := w.Arg(limit)
	return `SELECT sequence, message_id, role, CASE WHEN fits THEN content ELSE '' END,
		CASE WHEN fits THEN metadata_json ELSE '' END, created_at, event_at, item_key, kind, fits
		FROM (SELECT ` + pageColumns + `, n, (upto <= ` + capBytes + ` OR n = 1) AND n <= ` + lim + ` AS fits, upto - sz AS before
			FROM (SELECT ` + pageColumns + `, octet_length(content) + octet_length(metadata_json) + ` + size + ` AS sz,
				sum(octet_length(content) + octet_length(metadata_json) + ` + size + `) OVER (ORDER BY sequence ` + order + `) AS upto,
				row_number() OVER (ORDER BY sequence ` + order + `) AS n
				FROM session_messages` + w.Clause() + `
				ORDER BY sequence ` + order + ` LIMIT ` + inner + `) page) sized
		WHERE before <= ` + capBytes + ` OR n = 1
		ORDER BY sequence ` + order, w.Args()
}

func (r *reader) ListItems(ctx context.Context, f persistence.ItemFilter) ([]*sessionv1.Message, bool, error) {
	query, args := itemsSQL(f)
	rows, err := r.pool.Query(ctx, query, args...)
	if err != nil {
		return nil, false, storeErr("list items", err)
	}
	defer rows.Close()
	var out []*sessionv1.Message
	more := false
	for rows.Next() {
		m := &sessionv1.Message{SessionId: f.SessionID}
		var role, created, event int64
		var fits bool
		if err := rows.Scan(&m.Sequence, &m.MessageId, &role, &m.Content, &m.MetadataJson, &created, &event,
			&m.ItemKey, &m.Kind, &fits); err != nil {
			return nil, false, storeErr("list items", err)
		}
		if !fits {
			more = true
			break
		}
		m.Role, m.CreatedAt, m.EventTime = sessionv1.Role(role), persistence.Stamp(created), persistence.Stamp(event)
		out = append(out, m)
	}
	if err := rows.Err(); err != nil {
		return nil, false, storeErr("list items", err)
	}
	return out, more, nil
}

const getItemSQL = `SELECT ` + pageColumns + ` FROM session_messages
	WHERE session_id = $1 AND item_key = $2 AND item_key <> ''
	AND NOT EXISTS (SELECT 1 FROM sessions WHERE session_id = $1 AND state = $3)`

func (r *reader) GetItem(ctx context.Context, sessionID, itemKey string) (*sessionv1.Message, error) {
	rows, err := r.pool.Query(ctx, getItemSQL, sessionID, itemKey, int64(persistence.SessionStateStaged))
	out, err := messages(rows, err, sessionID)
	if err != nil {
		return nil, err
	}
	if len(out) == 0 {
		return nil, errs.NotFound("session %s: no message with item key %q", sessionID, itemKey)
	}
	return out[0], nil
}
