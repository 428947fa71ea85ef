package postgres

import (
	"cmp"
	"errors"
	"slices"
	"strings"

	auditv1 "github.com/agentstate/agentstate/messages/agentstate/audit/v1"
	sessionv1 "github.com/agentstate/agentstate/messages/agentstate/session/v1"
	"github.com/agentstate/agentstate/messages/errs"
	"github.com/agentstate/agentstate/persistence"
	"github.com/agentstate/agentstate/persistence/sqlstore"
	"github.com/jackc/pgx/v5"
)

const (
	insertSessionSQL = `INSERT INTO sessions (` + sqlstore.SessionColumns + `)
	VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17)
	ON CONFLICT (session_id) DO NOTHING`
	// Messages go in one statement per turn (or import), as arrays. For
	// appends (appendTurnSQL) a stored message id is skipped, not an error:
	// that is how duplicate turns are found without a lookup per message;
	// RETURNING tells which rows went in. A taken sequence still fails.
	//
	// The event times' array is the statement's last parameter (the
	// statements that embed this one number theirs before it): $E is
	// replaced by its number.
	insertMessagesSQL = `INSERT INTO session_messages (session_id, sequence, message_id, role, content,
	metadata_json, created_at, event_at)
	SELECT $1, * FROM unnest($2::bigint[], $3::text[], $4::bigint[], $5::text[], $6::text[], $7::bigint[], $E::bigint[])`
)

// messageRows is a turn's (or an import's) messages as column arrays.
type messageRows struct {
	seq                  []int64
	ids, contents, metas []string
	roles, created       []int64
	events               []int64
}

// newMessageRows fails only for a message that checkTurn refuses.
func newMessageRows(ms []*sessionv1.Message, first int64) (*messageRows, error) {
	r := &messageRows{}
	for i, m := range ms {
		created, err := persistence.MessageNanos(m)
		if err != nil {
			return nil, err
		}
		r.seq = append(r.seq, first+int64(i))
		r.ids = append(r.ids, m.MessageId)
		r.roles = append(r.roles, int64(m.Role))
		r.contents = append(r.contents, m.Content)
		r.metas = append(r.metas, sqlstore.OrEmptyObject(m.MetadataJson))
		r.created = append(r.created, created)
		r.events = append(r.events, persistence.EventNanos(m))
	}
	return r, nil
}

func (r *messageRows) args(sessionID string) []any {
	return []any{sessionID, r.seq, r.ids, r.roles, r.contents, r.metas, r.created}
}

func (a *applier) CreateSession(c *persistence.CreateSession) (persistence.Result, error) {
	row, err := sqlstore.NewSessionRow(c)
	if err != nil {
		return persistence.Result{}, err
	}
	s := c.Session
	rows, err := newMessageRows(c.Messages, row.First)
	if err != nil {
		return persistence.Result{}, err
	}
	if err := a.fence(persistence.OwnerSession, s.SessionId, c.Epoch); err != nil {
		return persistence.Result{}, err
	}
	tag, err := a.exec(insertSessionSQL, row.Args...)
	if err != nil {
		if uniqueViolation(err) == "sessions_by_client_key" {
			return persistence.Result{}, persistence.ClientKeyTaken(s.GetNamespace(), s.GetClientKey())
		}
		return persistence.Result{}, err
	}
	if tag.RowsAffected() == 0 {
		return persistence.Result{}, errs.AlreadyExists("session %s exists", s.SessionId)
	}
	scopes, bad, err := a.scopeStates(c.Scopes)
	if err == nil {
		err = bad
	}
	if err != nil {
		return persistence.Result{}, err
	}
	if err := a.writeScopes(scopes, row.UpdatedAt); err != nil {
		return persistence.Result{}, err
	}
	if c.Snapshot != nil {
		if _, err := a.putSnapshot(s.SessionId, c.Snapshot); err != nil {
			return persistence.Result{}, err
		}
	}
	if len(c.Messages) > 0 {
		if _, err := a.exec(createMessagesSQL, append(rows.args(s.SessionId), rows.events)...); err != nil {
			if uniqueViolation(err) == "session_messages_message_id_key" {
				return persistence.Result{}, errs.InvalidArgument("create session %s: a message id appears twice", s.SessionId)
			}
			return persistence.Result{}, err
		}
	}
	return sqlstore.Created(a, c, row)
}

var (
	createMessagesSQL = strings.Replace(insertMessagesSQL, "$E", "$8", 1)
	upsertLinkSQL     = sqlstore.Rebind(dialect{}, sqlstore.UpsertLinkSQL)
)

// Audit is audit, for sqlstore.Tx.
func (a *applier) Audit(entries []*auditv1.AuditEntry) error { return a.audit(entries) }

// Link upserts a session's link to a plan.
func (a *applier) Link(sessionID string, l *sessionv1.LinkedPlan) error {
	args, err := sqlstore.LinkArgs(sessionID, l)
	if err == nil {
		_, err = a.exec(upsertLinkSQL, args...)
	}
	return err
}

// lockSession locks the session's row until commit and returns its next
// sequence; NOT_FOUND when it does not exist. Another node's writer that
// appends to the same session (which fencing should already prevent) waits
// here, and then sees this transaction's result.
func (a *applier) lockSession(sessionID string) (int64, error) {
	var next int64
	err := a.queryRow(`SELECT next_sequence FROM sessions WHERE session_id = $1 FOR UPDATE`, []any{sessionID}, &next)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, errs.NotFound("session %s not found", sessionID)
	}
	return next, err
}

// appendMessages checks NextSequence against the locked session row, then
// inserts turn by turn from it, each turn moving next_sequence in the same
// statement. The UNIQUE(session_id, sequence) key is the backstop should
// the row ever disagree with the messages.
func (a *applier) appendMessages(c *persistence.AppendMessages) (persistence.Result, error) {
	if err := a.fence(persistence.OwnerSession, c.SessionID, c.Epoch); err != nil {
		return persistence.Result{}, err
	}
	next, err := a.lockSession(c.SessionID)
	if err != nil {
		return persistence.Result{}, err
	}
	if next != c.NextSequence {
		return persistence.Result{}, errs.FailedPrecondition("session %s: append at sequence %d, but the next sequence is %d",
			c.SessionID, c.NextSequence, next)
	}
	res := persistence.Result{Turns: make([]persistence.TurnResult, len(c.Turns))}
	cur := c.State
	for i := range c.Turns {
		tr, n, after, err := a.turn(c, &c.Turns[i], next, cur)
		if err != nil {
			return persistence.Result{}, err
		}
		res.Turns[i] = tr
		next += n
		if after != "" {
			cur, res.State = after, after
		}
	}
	if res.State != "" {
		if _, err := a.exec(setStateSQL, c.SessionID, res.State); err != nil {
			return persistence.Result{}, err
		}
	}
	res.NextSequence = next
	return res, nil
}

const setStateSQL = `UPDATE sessions SET state_json = $2 WHERE session_id = $1`

// turn stores one turn (turnRows) with its deltas, and returns the
// session's state after it when it changed it (from state).
func (a *applier) turn(c *persistence.AppendMessages, t *persistence.Turn, seq int64, state string) (persistence.TurnResult, int64, string, error) {
	if err := t.Check(c.SessionID); err != nil {
		return persistence.TurnResult{Err: err}, 0, "", nil
	}
	after, scopes := "", []scopeWrite(nil)
	if t.HasDelta() {
		var bad, err error
		if after, scopes, bad, err = a.turnDeltas(c.SessionID, state, t); err != nil {
			return persistence.TurnResult{}, 0, "", err
		}
		if bad != nil {
			return persistence.TurnResult{Err: bad}, 0, "", nil
		}
	}
	tr, n, err := a.turnRows(c, t, seq)
	if err != nil || tr.Err != nil || tr.Duplicate {
		// A duplicate's deltas were applied with the original.
		return tr, n, "", err
	}
	at, err := persistence.StoredTimeNanos("updated_at", c.UpdatedAt)
	if err != nil {
		return persistence.TurnResult{}, 0, "", persistence.Of("session", c.SessionID, err)
	}
	if err := a.writeScopes(scopes, at); err != nil {
		return persistence.TurnResult{}, 0, "", err
	}
	return tr, n, after, nil
}

// appendTurnSQL inserts a turn's messages, skipping stored ids, and in the
// same statement moves the session's next_sequence by the rows inserted,
// and its updated_at when $9 and the whole turn went in ($10 rows).
var appendTurnSQL = `WITH ins AS (` + strings.Replace(insertMessagesSQL, "$E", "$11", 1) + `
	ON CONFLICT (session_id, message_id) DO NOTHING RETURNING message_id),
n AS (SELECT count(*) AS n FROM ins),
upd AS (UPDATE sessions SET next_sequence = next_sequence + (SELECT n FROM n),
	updated_at = CASE WHEN $8::boolean AND (SELECT n FROM n) = $9::bigint THEN $10::bigint ELSE updated_at END
	WHERE session_id = $1)
SELECT message_id FROM ins`

// turn stores one turn of c at sequences seq, seq+1, ... and returns how
// many messages it stored. Its error is a command-level or
// transaction-level failure; turn-level outcomes are in the TurnResult.
func (a *applier) turnRows(c *persistence.AppendMessages, t *persistence.Turn, seq int64) (persistence.TurnResult, int64, error) {
	sessionID := c.SessionID
	rows, err := newMessageRows(t.Messages, seq)
	if err != nil {
		return persistence.TurnResult{Err: err}, 0, nil
	}
	updatedAt, err := persistence.StoredTimeNanos("updated_at", c.UpdatedAt)
	if err != nil {
		return persistence.TurnResult{}, 0, persistence.Of("session", sessionID, err)
	}
	args := append(rows.args(sessionID), !c.UpdatedAt.IsZero(), int64(len(t.Messages)), updatedAt, rows.events)
	inserted, err := a.insertReturningIDs(appendTurnSQL, args)
	if err != nil {
		if uniqueViolation(err) == "session_messages_sequence_key" {
			return persistence.TurnResult{}, 0, errs.FailedPrecondition("session %s: a sequence from %d is taken", sessionID, seq)
		}
		return persistence.TurnResult{}, 0, err
	}
	switch len(inserted) {
	case len(t.Messages):
		if err := a.audit(t.Audit); err != nil {
			return persistence.TurnResult{}, 0, err
		}
		out := make([]*sessionv1.Message, len(t.Messages))
		for i, m := range t.Messages {
			out[i] = &sessionv1.Message{SessionId: sessionID, MessageId: m.MessageId, Sequence: seq + int64(i),
				Role: m.Role, Content: m.Content, MetadataJson: rows.metas[i], CreatedAt: persistence.Stamp(rows.created[i])}
		}
		return persistence.TurnResult{Messages: out}, int64(len(out)), nil
	case 0:
		out, err := a.storedMessages(sessionID, rows.ids)
		if err != nil {
			return persistence.TurnResult{}, 0, err
		}
		if err := persistence.CheckRetry(sessionID, t.Messages, out); err != nil {
			return persistence.TurnResult{Err: err}, 0, nil
		}
		return persistence.TurnResult{Duplicate: true, Messages: out}, 0, nil
	}
	// Some ids were stored before, some not: undo this turn's rows and its
	// move of next_sequence (updated_at was left alone).
	if _, err := a.exec(`WITH d AS (DELETE FROM session_messages WHERE session_id = $1 AND message_id = ANY($2::text[]) RETURNING 1)
		UPDATE sessions SET next_sequence = next_sequence - (SELECT count(*) FROM d) WHERE session_id = $1`,
		sessionID, inserted); err != nil {
		return persistence.TurnResult{}, 0, err
	}
	return persistence.TurnResult{Err: persistence.MessageIDTaken(sessionID, firstStored(rows.ids, inserted))}, 0, nil
}

// firstStored is the first of ids that is not among inserted: one stored
// before.
func firstStored(ids, inserted []string) string {
	for _, id := range ids {
		if !slices.Contains(inserted, id) {
			return id
		}
	}
	return ""
}

// insertReturningIDs runs an INSERT ... RETURNING of one text column.
func (a *applier) insertReturningIDs(query string, args []any) ([]string, error) {
	var ids []string
	var id string
	err := a.forEachRow(query, args, []any{&id}, func() error {
		ids = append(ids, id)
		return nil
	})
	return ids, err
}

// storedMessages returns the stored messages with these ids, in the ids'
// order; all of them exist.
func (a *applier) storedMessages(sessionID string, ids []string) ([]*sessionv1.Message, error) {
	byID := make(map[string]*sessionv1.Message, len(ids))
	var role, created, event int64
	m := &sessionv1.Message{}
	err := a.forEachRow(`SELECT message_id, sequence, role, content, metadata_json, created_at, event_at
		FROM session_messages WHERE session_id = $1 AND message_id = ANY($2::text[])`, []any{sessionID, ids},
		[]any{&m.MessageId, &m.Sequence, &role, &m.Content, &m.MetadataJson, &created, &event}, func() error {
			byID[m.MessageId] = &sessionv1.Message{SessionId: sessionID, MessageId: m.MessageId, Sequence: m.Sequence,
				Role: sessionv1.Role(role), Content: m.Content, MetadataJson: m.MetadataJson, CreatedAt: persistence.Stamp(created),
				EventTime: persistence.Stamp(event)}
			return nil
		})
	if err != nil {
		return nil, err
	}
	out := make([]*sessionv1.Message, len(ids))
	for i, id := range ids {
		if out[i] = byID[id]; out[i] == nil {
			return nil, errs.Internal("session %s: stored message %s vanished", sessionID, id)
		}
	}
	return out, nil
}

// updateSessionSQL changes the fields that are set, adds the token delta.
// It matches no row when a sum would overflow, checked before it is made
// exactly as the SQLite store checks it (see persistence.AddTokens), so
// both refuse it with persistence.TokenOverflow rather than PostgreSQL's
// out-of-range error.
const updateSessionSQL = `UPDATE sessions SET
	state = CASE WHEN $1::bigint <> 0 THEN $1::bigint ELSE state END,
	closed_at = CASE WHEN $2::bigint <> 0 THEN $2::bigint ELSE closed_at END,
	input_tokens = input_tokens + $3::bigint,
	output_tokens = output_tokens + $4::bigint,
	cost = cost + $5::double precision,
	updated_at = CASE WHEN $6::bigint <> 0 THEN $6::bigint ELSE updated_at END,
	expires_at = CASE WHEN $10::boolean THEN $11::bigint ELSE expires_at END
	WHERE session_id = $7
	AND ($3::bigint = 0 OR input_tokens <= $8::bigint - $3::bigint)
	AND ($4::bigint = 0 OR output_tokens <= $8::bigint - $4::bigint)
	AND ($5::double precision = 0 OR cost / 2 + $5::double precision / 2 <= $9::double precision / 2)`

// updateSessionArgs are updateSessionSQL's values: sqlstore.UpdateArgs'
// and the expiry change.
func updateSessionArgs(c *persistence.UpdateSession) ([]any, error) {
	args, setExpiry, expiresAt, err := sqlstore.UpdateArgs(c)
	if err != nil {
		return nil, err
	}
	return append(args, setExpiry, expiresAt), nil
}

func (a *applier) updateSession(c *persistence.UpdateSession) (persistence.Result, error) {
	args, err := updateSessionArgs(c)
	if err != nil {
		return persistence.Result{}, err
	}
	if err := a.fence(persistence.OwnerSession, c.SessionID, c.Epoch); err != nil {
		return persistence.Result{}, err
	}
	tag, err := a.exec(updateSessionSQL, args...)
	if err != nil {
		return persistence.Result{}, err
	}
	if tag.RowsAffected() == 0 {
		return persistence.Result{}, sqlstore.UpdateMissed(txDB{a: a}, c.SessionID)
	}
	if c.LinkPlan != nil {
		if err := a.Link(c.SessionID, c.LinkPlan); err != nil {
			return persistence.Result{}, err
		}
	}
	if err := a.audit(c.Audit); err != nil {
		return persistence.Result{}, err
	}
	return persistence.Result{}, nil
}

func (a *applier) DeleteSession(c *persistence.DeleteSession) (persistence.Result, error) {
	if err := a.fence(persistence.OwnerSession, c.SessionID, c.Epoch); err != nil {
		return persistence.Result{}, err
	}
	if _, err := a.lockSession(c.SessionID); err != nil {
		return persistence.Result{}, err
	}
	var res persistence.Result
	if c.Limit > 0 {
		tag, err := a.exec(`DELETE FROM session_messages WHERE session_id = $1 AND sequence IN
			(SELECT sequence FROM session_messages WHERE session_id = $1 ORDER BY sequence DESC LIMIT $2)`, c.SessionID, c.Limit)
		if err != nil {
			return persistence.Result{}, err
		}
		if res.MessagesRemoved = tag.RowsAffected(); res.MessagesRemoved == int64(c.Limit) {
			return res, nil
		}
	}
	var links []sessionLink
	var l sessionLink
	if err := a.forEachRow(`DELETE FROM session_links WHERE session_id = $1 RETURNING id, plan_id`, []any{c.SessionID},
		[]any{&l.id, &l.planID}, func() error {
			links = append(links, l)
			return nil
		}); err != nil {
		return persistence.Result{}, err
	}
	// Report them in link order, as stored.
	slices.SortFunc(links, func(x, y sessionLink) int { return cmp.Compare(x.id, y.id) })
	for _, l := range links {
		res.PlansOrphaned = append(res.PlansOrphaned, l.planID)
	}
	tag, err := a.exec(`DELETE FROM session_messages WHERE session_id = $1`, c.SessionID)
	if err != nil {
		return persistence.Result{}, err
	}
	res.MessagesRemoved += tag.RowsAffected()
	if _, err := a.exec(`DELETE FROM session_snapshots WHERE session_id = $1`, c.SessionID); err != nil {
		return persistence.Result{}, err
	}
	if _, err := a.exec(`DELETE FROM sessions WHERE session_id = $1`, c.SessionID); err != nil {
		return persistence.Result{}, err
	}
	if err := a.audit(c.Audit); err != nil {
		return persistence.Result{}, err
	}
	return res, nil
}

type sessionLink struct {
	id     int64
	planID string
}
