package postgres

import (
	"errors"
	"strings"

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

// queue adds a statement to the pipeline, after the appends gathered so
// far (appendset.go), so that it runs after them on the server.
func (a *applier) queue(query string, args ...any) *pgx.QueuedQuery {
	a.flushSet()
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
	a.flushSet()
	if a.pipe == nil || a.pipe.Len() == 0 {
		return nil
	}
	b := a.pipe
	a.pipe = nil
	var err error
	if a.tx == nil {
		// The batch opens with BEGIN and the locks (begin).
		br := a.conn.SendBatch(a.ctx, b)
		a.tx = br.Tx()
		err = br.Close()
	} else {
		err = a.tx.SendBatch(a.ctx, b).Close()
	}
	var pe *pgconn.PgError
	switch {
	case err == nil:
		return a.checkFences()
	case errors.Is(err, errPipeline):
		return errPipeline
	case errors.As(err, &pe) && (strings.HasPrefix(pe.Code, "22") || strings.HasPrefix(pe.Code, "23") || pe.Code == "25P02"):
		return errPipeline
	}
	return err
}

// pipeFence checks fence's condition for the pipeline. When the
// transaction locked its owner rows up front (lockorder.go), the epochs it
// read there are current until a command of its own takes a new one
// (TakeEpoch keeps them), so the check needs no statement: the FOR UPDATE
// lock is stronger than the share lock fence takes, and an epoch-0 key's
// row was inserted before it. The check waits for the locks' answer when
// it is still to come (checkFences). Otherwise it queues fence's
// statements: for epoch 0 the insert of the key's row, then the share lock
// on the row with the epoch's check.
func (a *applier) pipeFence(kind persistence.OwnerKind, id string, epoch int64) error {
	if epoch < 0 {
		return errs.InvalidArgument("%s: negative epoch %d", ownerName(kind, id), epoch)
	}
	if a.epochs != nil {
		f := fenceCheck{ownerKey{kind, id}, epoch}
		if a.tx == nil {
			// The locks' answer comes with the pipeline's.
			a.fences = append(a.fences, f)
			return nil
		}
		return a.fenceHolds(f)
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

// fenceCheck is a pipelined command's fence: the key's epoch it expects.
type fenceCheck struct {
	key   ownerKey
	epoch int64
}

func (a *applier) fenceHolds(f fenceCheck) error {
	if current, ok := a.epochs[f.key]; !ok || current != f.epoch {
		return errPipeline
	}
	return nil
}

// checkFences checks the fences queued before the locks' answer, once it
// came: every one was queued before any TakeEpoch of this transaction
// (which reads, so sends the pipeline first), so the epochs read are
// theirs.
func (a *applier) checkFences() error {
	for _, f := range a.fences {
		if err := a.fenceHolds(f); err != nil {
			return err
		}
	}
	a.fences = a.fences[:0]
	return nil
}

// pipeAppend gathers appendMessages into the append set (appendset.go):
// fence, then each turn's rows, as if every check will hold. A turn that
// fails its own checks is skipped as appendMessages skips it.
func (a *applier) pipeAppend(c *persistence.AppendMessages) (persistence.Result, error) {
	if err := a.pipeFence(persistence.OwnerSession, c.SessionID, c.Epoch); err != nil {
		return persistence.Result{}, err
	}
	if n, ok := a.set.next(c.SessionID); ok && n != c.NextSequence {
		// An earlier append of the set leaves the session elsewhere.
		return persistence.Result{}, errPipeline
	}
	for i := range c.Turns {
		for _, m := range c.Turns[i].Messages {
			a.set.watch(c.SessionID, m)
		}
	}
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
		var change int64
		if t.HasDelta() {
			after, scopes, bad, err := a.turnDeltas(c.SessionID, cur, t)
			if err != nil {
				return persistence.Result{}, err
			}
			if bad != nil {
				res.Turns[i].Err = bad
				continue
			}
			if t.State != nil {
				change = persistence.StateChange(cur, after)
			}
			if err := a.pipeCheck(a.usage.CheckTurn(c.SessionID, t.Messages, change, scopes)); err != nil {
				return persistence.Result{}, err
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
		if !t.HasDelta() {
			if err := a.pipeCheck(a.usage.CheckTurn(c.SessionID, t.Messages, 0, nil)); err != nil {
				return persistence.Result{}, err
			}
		}
		updatedAt, err := persistence.StoredTimeNanos("updated_at", c.UpdatedAt)
		if err != nil {
			return persistence.Result{}, persistence.Of("session", c.SessionID, err)
		}
		out, err := a.set.add(c.SessionID, t.Messages, next, updatedAt, !c.UpdatedAt.IsZero())
		if err != nil {
			res.Turns[i].Err = err
			continue
		}
		checked = true
		// Booked as queued: the attempt stores every queued row, or is
		// abandoned whole.
		a.usage.AddSession(c.SessionID, persistence.MessagesBytes(t.Messages)+change)
		if err := a.Audit(t.Audit); err != nil {
			return persistence.Result{}, err
		}
		res.Turns[i].Messages = out
		next += int64(len(out))
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

// pipeCheck is the outcome of the check of a pipelined turn's stored
// bytes. A turn past a quota fails the attempt (errPipeline): the replay
// decides it, where a retried turn (stored already, adding nothing) is
// told apart.
func (a *applier) pipeCheck(err error) error {
	if persistence.IsCommandError(err) {
		return errPipeline
	}
	return err
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
	ns := persistence.PlanNamespace(c.Namespace)
	if err := a.pipeFence(persistence.OwnerPlan, persistence.PlanKey(ns, c.PlanID), c.Epoch); err != nil {
		return persistence.Result{}, err
	}
	a.queue(upsertPlanSQL, c.PlanID, maxRetries, c.ErrorDetailsJSON, int64(persistence.DefaultMaxRetries), ns)
	if n := len(c.Records); n > 0 {
		a.queue(insertErrorsSQL, recordArgs(ns, c.PlanID, c.Records)...).Query(func(rows pgx.Rows) error {
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
		a.queue(upsertStepSQL, c.PlanID, int64(sr.Phase), sr.StepID, int64(sr.Count), ns)
	}
	return persistence.Result{}, a.Audit(c.Audit)
}
