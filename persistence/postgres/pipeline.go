package postgres

import (
	"errors"
	"strings"

	sessionv1 "github.com/agentstate/agentstate/messages/agentstate/session/v1"
	"github.com/agentstate/agentstate/messages/errs"
	"github.com/agentstate/agentstate/persistence"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// The pipeline. In the attempt without savepoints, the commands a batch is
// mostly made of (appends and session updates) do not run statement by
// statement: their statements are queued, each with a check of its answer,
// and sent in one round trip (pgx.Batch) with the audit rows and the chain
// tail's move, or earlier when another command must read. Their results are
// filled in as if every check will hold: the session's next sequence is the
// caller's NextSequence, every turn is new, the fencing epoch is current.
//
// When a check fails (a stale sequence, a duplicate turn, a fenced or
// missing session) or the server rejects a statement (a unique key, a bad
// value), the pipeline fails with errPipeline, a command-level error: the
// attempt is rolled back and the batch replayed with savepoints, command by
// command, which tells each command's real result. Statements run on the
// server in queue order, so a later command sees what earlier ones wrote.

// errPipeline is what a failed check of a pipelined command returns. It
// never reaches a Result: it only makes Apply replay with savepoints.
var errPipeline = errs.FailedPrecondition("a pipelined command did not hold; replay command by command")

func (a *applier) queue(query string, args ...any) *pgx.QueuedQuery {
	if a.pipe == nil {
		a.pipe = &pgx.Batch{}
	}
	return a.pipe.Queue(query, args...)
}

// sendPipe runs the queued statements and their checks. A failed check,
// and a statement the server refused for its values (SQLSTATE classes 22
// and 23, and 25P02 for the statements after it), is errPipeline; other
// errors are the transaction's.
func (a *applier) sendPipe() error {
	if a.pipe == nil || a.pipe.Len() == 0 {
		return nil
	}
	b := a.pipe
	a.pipe = nil
	err := a.tx.SendBatch(a.ctx, b).Close()
	var pe *pgconn.PgError
	switch {
	case err == nil:
		return nil
	case errors.Is(err, errPipeline):
		return errPipeline
	case errors.As(err, &pe) && (strings.HasPrefix(pe.Code, "22") || strings.HasPrefix(pe.Code, "23") || pe.Code == "25P02"):
		return errPipeline
	}
	return err
}

// pipeFence queues fence's statements: for epoch 0 the insert of the key's
// row, then the share lock on the row with the epoch's check.
func (a *applier) pipeFence(kind persistence.OwnerKind, id string, epoch int64) error {
	if epoch < 0 {
		return errs.InvalidArgument("%s: negative epoch %d", ownerName(kind, id), epoch)
	}
	if epoch == 0 {
		a.queue(`INSERT INTO owner_epochs (kind, id, epoch) VALUES ($1, $2, 0) ON CONFLICT (kind, id) DO NOTHING`,
			int16(kind), id)
	}
	a.queue(`SELECT epoch FROM owner_epochs WHERE kind = $1 AND id = $2 FOR SHARE`, int16(kind), id).
		QueryRow(func(row pgx.Row) error {
			var current int64
			if err := row.Scan(&current); err != nil || current != epoch {
				return errPipeline
			}
			return nil
		})
	return nil
}

// pipeTurnSQL is appendTurnSQL for the pipeline: it also checks the
// session's next sequence ($11, where the turn starts), in the UPDATE that
// moves it, and answers how many messages went in and whether the session
// row matched. A stale or skipping sequence fails there (or on the
// sequence key); a missing session matches no row.
var pipeTurnSQL = `WITH ins AS (` + insertMessages(12) + `
	ON CONFLICT (session_id, message_id) DO NOTHING RETURNING 1),
upd AS (UPDATE sessions SET next_sequence = next_sequence + (SELECT count(*) FROM ins),
	updated_at = CASE WHEN $8::boolean THEN $10::bigint ELSE updated_at END
	WHERE session_id = $1 AND next_sequence = $11::bigint AND (SELECT count(*) FROM ins) = $9::bigint
	RETURNING 1)
SELECT (SELECT count(*) FROM ins), (SELECT count(*) FROM upd)`

// pipeAppend queues appendMessages: fence, then one pipeTurnSQL per turn,
// each checked to have inserted the whole turn at the expected sequence. A
// turn that fails its own checks is skipped as appendMessages skips it.
func (a *applier) pipeAppend(c *persistence.AppendMessages) (persistence.Result, error) {
	if err := a.pipeFence(persistence.OwnerSession, c.SessionID, c.Epoch); err != nil {
		return persistence.Result{}, err
	}
	a.pipeRemovedIDs(c)
	res := persistence.AppendResult{Turns: make([]persistence.TurnResult, len(c.Turns))}
	next := c.NextSequence
	checked := false
	cur := c.State
	for i := range c.Turns {
		t := &c.Turns[i]
		if err := t.Check(c.SessionID); err != nil {
			res.Turns[i].Err = err
			continue
		}
		// Deltas are applied as if every turn were new, as the rest of
		// the pipeline assumes; a retried turn fails its check, and the
		// replay applies only the new turns' deltas.
		if t.HasDelta() {
			after, scopes, bad, err := a.turnDeltas(c.SessionID, cur, t)
			if err != nil {
				return persistence.Result{}, err
			}
			if bad != nil {
				res.Turns[i].Err = bad
				continue
			}
			at, err := persistence.StoredTimeNanos("updated_at", c.UpdatedAt)
			if err != nil {
				return persistence.Result{}, persistence.Of("session", c.SessionID, err)
			}
			if err := a.WriteScopes(scopes, at); err != nil {
				return persistence.Result{}, err
			}
			if after != "" {
				cur, res.State = after, after
			}
		}
		rows, err := newMessageRows(t.Messages, next)
		if err != nil {
			res.Turns[i].Err = err
			continue
		}
		updatedAt, err := persistence.StoredTimeNanos("updated_at", c.UpdatedAt)
		if err != nil {
			return persistence.Result{}, persistence.Of("session", c.SessionID, err)
		}
		want := int64(len(t.Messages))
		args := append(append(rows.args(c.SessionID), !c.UpdatedAt.IsZero(), want, updatedAt, next), rows.tail()...)
		a.queue(pipeTurnSQL, args...).QueryRow(func(row pgx.Row) error {
			var inserted, updated int64
			if err := row.Scan(&inserted, &updated); err != nil || inserted != want || updated != 1 {
				return errPipeline
			}
			return nil
		})
		checked = true
		if err := a.Audit(t.Audit); err != nil {
			return persistence.Result{}, err
		}
		out := make([]*sessionv1.Message, want)
		for j, m := range t.Messages {
			out[j] = &sessionv1.Message{SessionId: c.SessionID, MessageId: m.MessageId, Sequence: next + int64(j),
				Role: m.Role, Content: m.Content, MetadataJson: rows.metas[j], CreatedAt: persistence.Stamp(rows.created[j]),
				ItemKey: m.ItemKey, Kind: m.Kind}
		}
		res.Turns[i].Messages = out
		next += want
	}
	if !checked {
		// No turn checked the session: do it alone.
		a.queue(`SELECT next_sequence FROM sessions WHERE session_id = $1 FOR UPDATE`, c.SessionID).
			QueryRow(func(row pgx.Row) error {
				var n int64
				if err := row.Scan(&n); err != nil || n != c.NextSequence {
					return errPipeline
				}
				return nil
			})
	}
	if res.State != "" {
		a.queue(setStateSQL, c.SessionID, res.State)
	}
	res.NextSequence = next
	return res.Result(), nil
}

// pipeRemovedIDs queues the read of the remembered digests of c's message
// ids (persistence/removedids.go): one that another content uses fails the
// attempt, and the replay refuses that turn (appendMessages). Digests are
// computed only for the ids found, so an append to a session no
// replacement touched pays one queued index probe per id.
func (a *applier) pipeRemovedIDs(c *persistence.AppendMessages) {
	byID := make(map[string]*sessionv1.Message)
	for i := range c.Turns {
		for _, m := range c.Turns[i].Messages {
			byID[m.GetMessageId()] = m
		}
	}
	if len(byID) == 0 {
		return
	}
	ids := make([]string, 0, len(byID))
	for id := range byID {
		ids = append(ids, id)
	}
	a.queue(`SELECT message_id, digest FROM removed_message_ids WHERE session_id = $1 AND message_id = ANY($2::text[])`,
		c.SessionID, ids).Query(func(rows pgx.Rows) error {
		defer rows.Close()
		for rows.Next() {
			var id, digest string
			if err := rows.Scan(&id, &digest); err != nil {
				return err
			}
			if m := byID[id]; m != nil && persistence.ContentDigest(m) != digest {
				return errPipeline
			}
		}
		return rows.Err()
	})
}

// pipeUpdate queues updateSession: fence, the update checked to have found
// the session, and the link's upsert.
func (a *applier) pipeUpdate(c *persistence.UpdateSession) (persistence.Result, error) {
	if c.LinkPlan != nil && c.LinkPlan.GetPlanId() == "" {
		return persistence.Result{}, errs.InvalidArgument("session %s: linked plan has no plan_id", c.SessionID)
	}
	args, err := updateSessionArgs(c)
	if err != nil {
		return persistence.Result{}, err
	}
	if err := a.pipeFence(persistence.OwnerSession, c.SessionID, c.Epoch); err != nil {
		return persistence.Result{}, err
	}
	a.queue(updateSessionSQL, args...).Exec(func(tag pgconn.CommandTag) error {
		if tag.RowsAffected() != 1 {
			return errPipeline
		}
		return nil
	})
	if c.LinkPlan != nil {
		a.queue(upsertLinkSQL, c.SessionID, c.LinkPlan.PlanId, c.LinkPlan.Phase, c.LinkPlan.State)
	}
	if err := a.Audit(c.Audit); err != nil {
		return persistence.Result{}, err
	}
	return persistence.Result{}, nil
}

// pipePlanWrite queues planWrite: fence, the plan row's upsert, the
// records' insert, checked to have inserted every record (a stored id or a
// sequence the plan does not continue replays the batch, where planWrite
// tells which), the step counters and the audit entries.
func (a *applier) pipePlanWrite(c *persistence.PlanWrite) (persistence.Result, error) {
	maxRetries, err := checkPlanWrite(c)
	if err != nil {
		return persistence.Result{}, err
	}
	if err := a.pipeFence(persistence.OwnerPlan, c.PlanID, c.Epoch); err != nil {
		return persistence.Result{}, err
	}
	a.queue(upsertPlanSQL, c.PlanID, maxRetries, c.ErrorDetailsJSON, int64(persistence.DefaultMaxRetries))
	if n := len(c.Records); n > 0 {
		a.queue(insertErrorsSQL, recordArgs(c.PlanID, c.Records)...).Query(func(rows pgx.Rows) error {
			got := 0
			for rows.Next() {
				got++
			}
			if err := rows.Err(); err != nil {
				return err
			}
			if got != n {
				return errPipeline
			}
			return nil
		})
	}
	for _, sr := range c.StepRetries {
		a.queue(upsertStepSQL, c.PlanID, int64(sr.Phase), sr.StepID, int64(sr.Count))
	}
	return persistence.Result{}, a.Audit(c.Audit)
}
