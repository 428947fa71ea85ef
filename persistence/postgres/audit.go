package postgres

import (
	"errors"
	"slices"

	auditv1 "github.com/agentstate/agentstate/messages/agentstate/audit/v1"
	"github.com/agentstate/agentstate/messages/errs"
	"github.com/agentstate/agentstate/persistence"
	"github.com/agentstate/agentstate/persistence/sqlstore"
)

const insertAuditSQL = `INSERT INTO audit_log (position, event_id, event_type, plan_id, session_id,
	project_name, actor_name, user_identity, details_json, created_at, prev_hash, hash, principal, namespace,
	chain)
	SELECT * FROM unnest($1::bigint[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[],
		$7::text[], $8::text[], $9::text[], $10::bigint[], $11::text[], $12::text[], $13::text[], $14::text[],
		$15::smallint[])`

// Audit (sqlstore.Tx's, the persistence dialects') appends entries to
// the chain: each gets the next position, the
// current tail's hash as PrevHash, and its own Hash. Rows are only queued;
// flushAudit writes them in one statement (per command with savepoints,
// per transaction without, where a duplicate event id fails the whole
// attempt and the retry with savepoints tells which command it belongs to).
func (a *applier) Audit(entries []*auditv1.AuditEntry) error {
	for _, e := range entries {
		if err := persistence.PrepareEntry(e); err != nil {
			return err
		}
	}
	for _, e := range entries {
		ch := a.entryChain(e)
		if !a.chain || !a.tail.Holds(ch) {
			// chainsOf missed a command kind: a bug, and never a fork.
			return errs.Internal("audit entry %s written without its chain's lock (chain %d)", e.GetEventId(), ch)
		}
		a.tail.AssignTo(ch, e)
		a.pending = append(a.pending, e)
		a.pendingChains = append(a.pendingChains, int16(ch))
	}
	return nil
}

// auditArgs are the arguments of insertAuditSQL for the queued entries.
func (a *applier) auditArgs() []any {
	n := len(a.pending)
	pos, created := make([]int64, n), make([]int64, n)
	cols := make([][]string, 12)
	for i := range cols {
		cols[i] = make([]string, n)
	}
	for i, e := range a.pending {
		c := persistence.CheckedNanos(e.CreatedAt) // PrepareEntry checked it
		pos[i], created[i] = e.Position, c
		cols[0][i], cols[1][i], cols[2][i], cols[3][i] = e.EventId, e.EventType, e.PlanId, e.SessionId
		cols[4][i], cols[5][i], cols[6][i], cols[7][i] = e.ProjectName, e.ActorName, e.UserIdentity, e.DetailsJson
		cols[8][i], cols[9][i], cols[10][i], cols[11][i] = e.PrevHash, e.Hash, e.Principal, e.Namespace
	}
	return []any{pos, cols[0], cols[1], cols[2], cols[3], cols[4], cols[5], cols[6], cols[7], created, cols[8], cols[9], cols[10], cols[11],
		slices.Clone(a.pendingChains[:n])}
}

// flushAudit writes the queued entries in one statement (without
// savepoints, through the pipeline, whose failure replays the batch).
func (a *applier) flushAudit() error {
	if len(a.pending) == 0 {
		return nil
	}
	if a.buffered {
		a.queue(insertAuditSQL, a.auditArgs()...)
		a.pending, a.pendingChains = a.pending[:0], a.pendingChains[:0]
		return a.sendPipe()
	}
	if _, err := a.exec(insertAuditSQL, a.auditArgs()...); err != nil {
		if uniqueViolation(err) == "audit_log_event_id_key" {
			if len(a.pending) == 1 {
				return errs.AlreadyExists("audit entry %s is stored already", a.pending[0].EventId)
			}
			return errs.AlreadyExists("an audit entry of the batch is stored already")
		}
		return err
	}
	a.pending, a.pendingChains = a.pending[:0], a.pendingChains[:0]
	return nil
}

// PruneAudit removes the oldest entries, in position order, while they were
// created before OlderThan, at most Limit. Only a prefix of the chain goes,
// so the rest stays verifiable from the anchor: the last removed entry's
// hash and position, kept per chain in audit_chains. The transaction holds
// every chain's lock (chainsOf), so no other writer appends meanwhile.
func (a *applier) PruneAudit(c *persistence.PruneAudit) (persistence.Result, error) {
	if c.Limit <= 0 {
		return persistence.Result{}, errs.InvalidArgument("prune limit %d; want at least 1", c.Limit)
	}
	if !a.chain || !a.holdsAll() {
		return persistence.Result{}, errs.Internal("prune without every chain's lock")
	}
	if err := a.flushAudit(); err != nil {
		return persistence.Result{}, err
	}
	cutoff := persistence.BoundNanos(c.OlderThan)
	// The first entry that must stay bounds the prefix: the first one not
	// older than the cutoff, or the one past the limit.
	var removed, lastPos, pos, created int64
	var hash string
	err := a.forEachRow(`SELECT position, created_at, hash FROM audit_log ORDER BY position LIMIT $1`, []any{c.Limit},
		[]any{&pos, &created, &hash}, func() error {
			if created >= cutoff {
				return errStopScan
			}
			removed, lastPos = removed+1, pos
			return nil
		})
	if err != nil && !errors.Is(err, errStopScan) {
		return persistence.Result{}, err
	}
	if removed > 0 {
		// Each chain's anchor becomes its last removed entry.
		if _, err := a.exec(`UPDATE audit_chains c SET anchor_position = d.position, anchor_hash = d.hash
			FROM (SELECT DISTINCT ON (chain) chain, position, hash FROM audit_log WHERE position <= $1
				ORDER BY chain, position DESC) d
			WHERE c.chain = d.chain`, lastPos); err != nil {
			return persistence.Result{}, err
		}
		if _, err := a.exec(`DELETE FROM audit_log WHERE position <= $1`, lastPos); err != nil {
			return persistence.Result{}, err
		}
		// Checkpoints go with the entries of their time, as a prefix (the
		// ones before the first written since the cutoff: members' clocks
		// may disagree, and a gap would look like a removed checkpoint),
		// and never the latest: it still commits to every chain.
		if _, err := a.exec(`DELETE FROM audit_checkpoints WHERE seq < COALESCE(
			(SELECT min(seq) FROM audit_checkpoints WHERE created_at >= $1),
			(SELECT max(seq) FROM audit_checkpoints))`, cutoff); err != nil {
			return persistence.Result{}, err
		}
	}
	if err := a.Audit(c.Audit); err != nil {
		return persistence.Result{}, err
	}
	return persistence.RemovedResult{Removed: removed}.Result(), nil
}

// errStopScan ends a row scan early.
var errStopScan = errors.New("stop scan")

// RecordClientAudit is sqlstore.RecordClientAudit in this transaction,
// which holds the chain lock (needsChain): another writer on the database
// must take it to add an entry, so the lookup sees every entry committed.
func (a *applier) RecordClientAudit(c *persistence.RecordClientAudit) (persistence.Result, error) {
	return sqlstore.RecordClientAudit(txDB{a: a}, c, a.flushAudit, a.Audit)
}
