package postgres

import (
	"cmp"
	"errors"
	"slices"
	"strconv"
	"strings"

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
	// The event times', item keys' and kinds' arrays are the statement's
	// last parameters (the statements that embed this one number theirs
	// before them): insertMessages numbers them.
	insertMessagesSQL = `INSERT INTO session_messages (session_id, sequence, message_id, role, content,
	metadata_json, created_at, event_at, item_key, kind)
	SELECT $1, * FROM unnest($2::bigint[], $3::text[], $4::bigint[], $5::text[], $6::text[], $7::bigint[], $E::bigint[],
		$K::text[], $N::text[])`
)

// insertMessages is insertMessagesSQL whose last three parameters (see
// messageRows.tail) are numbered from e.
func insertMessages(e int) string {
	return strings.NewReplacer("$E", "$"+strconv.Itoa(e), "$K", "$"+strconv.Itoa(e+1), "$N", "$"+strconv.Itoa(e+2)).
		Replace(insertMessagesSQL)
}

// messageRows is a turn's (or an import's) messages as column arrays.
type messageRows struct {
	seq                  []int64
	ids, contents, metas []string
	roles, created       []int64
	events               []int64
	keys, kinds          []string
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
		r.keys = append(r.keys, m.GetItemKey())
		r.kinds = append(r.kinds, m.GetKind())
	}
	return r, nil
}

func (r *messageRows) args(sessionID string) []any {
	return []any{sessionID, r.seq, r.ids, r.roles, r.contents, r.metas, r.created}
}

// tail is the statement's last parameters: event times, item keys, kinds.
func (r *messageRows) tail() []any { return []any{r.events, r.keys, r.kinds} }

func (a *applier) CreateSession(c *persistence.CreateSession) (persistence.Result, error) {
	row, err := sqlstore.NewSessionRow(c, nil)
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
	if err := a.checkSessionsQuota(s.GetNamespace()); err != nil {
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
	if err == nil {
		// After the insert: a refusal rolls the command back whole.
		err = a.usage.Check(persistence.CreateCharges(c, scopes)...)
	}
	if err != nil {
		return persistence.Result{}, err
	}
	a.usage.Learn(s.SessionId, s.GetNamespace())
	a.usage.AddSession(s.SessionId, persistence.StateBytes(c.State))
	if err := a.WriteScopes(scopes, row.UpdatedAt); err != nil {
		return persistence.Result{}, err
	}
	if c.Snapshot != nil {
		if _, err := a.putSnapshot(s.SessionId, c.Snapshot); err != nil {
			return persistence.Result{}, err
		}
	}
	if len(c.Messages) > 0 {
		if _, err := a.exec(createMessagesSQL, append(rows.args(s.SessionId), rows.tail()...)...); err != nil {
			if uniqueViolation(err) == "session_messages_message_id_key" {
				return persistence.Result{}, errs.InvalidArgument("create session %s: a message id appears twice", s.SessionId)
			}
			return persistence.Result{}, err
		}
		a.usage.AddSession(s.SessionId, persistence.MessagesBytes(c.Messages))
	}
	return sqlstore.Created(a, c)
}

var (
	createMessagesSQL = insertMessages(8)
	upsertLinkSQL     = sqlstore.Rebind(dialect{}, sqlstore.UpsertLinkSQL)
)

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
	next, _, err := a.lockAppend(sessionID)
	return next, err
}

// lockAppend is lockSession that also tells, in the same round trip,
// whether a replacement removed ids of the session (the gate of an
// append's check of them, removedReuse).
func (a *applier) lockAppend(sessionID string) (next int64, removed bool, err error) {
	err = a.queryRow(`SELECT next_sequence, EXISTS (SELECT 1 FROM removed_message_ids WHERE session_id = $1)
		FROM sessions WHERE session_id = $1 FOR UPDATE`, []any{sessionID}, &next, &removed)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, false, errs.NotFound("session %s not found", sessionID)
	}
	return next, removed, err
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
	if err := a.Audit(c.Audit); err != nil {
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
	var ns string
	var state int64
	if err := a.queryRow(`SELECT namespace, octet_length(state_json) FROM sessions WHERE session_id = $1`,
		[]any{c.SessionID}, &ns, &state); err != nil {
		return persistence.Result{}, err
	}
	a.usage.Learn(c.SessionID, ns)
	var res persistence.DeleteResult
	if c.Limit > 0 {
		n, err := a.deleteCounted(c.SessionID, `DELETE FROM session_messages WHERE session_id = $1 AND sequence IN
			(SELECT sequence FROM session_messages WHERE session_id = $1 ORDER BY sequence DESC LIMIT $2)
			RETURNING `+messageBytesSQL+` AS n`, c.SessionID, c.Limit)
		if err != nil {
			return persistence.Result{}, err
		}
		if res.MessagesRemoved = n; res.MessagesRemoved == int64(c.Limit) {
			return res.Result(), nil
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
	n, err := a.deleteCounted(c.SessionID, `DELETE FROM session_messages WHERE session_id = $1 RETURNING `+messageBytesSQL+` AS n`, c.SessionID)
	if err != nil {
		return persistence.Result{}, err
	}
	res.MessagesRemoved += n
	if _, err := a.deleteCounted(c.SessionID, `DELETE FROM session_snapshots WHERE session_id = $1 RETURNING octet_length(data) AS n`,
		c.SessionID); err != nil {
		return persistence.Result{}, err
	}
	if _, err := a.exec(`DELETE FROM removed_message_ids WHERE session_id = $1`, c.SessionID); err != nil {
		return persistence.Result{}, err
	}
	if _, err := a.exec(`DELETE FROM sessions WHERE session_id = $1`, c.SessionID); err != nil {
		return persistence.Result{}, err
	}
	a.usage.AddSession(c.SessionID, -state)
	if err := a.Audit(c.Audit); err != nil {
		return persistence.Result{}, err
	}
	return res.Result(), nil
}

type sessionLink struct {
	id     int64
	planID string
}
