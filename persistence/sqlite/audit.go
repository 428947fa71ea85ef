package sqlite

import (
	"strings"

	auditv1 "github.com/agentstate/agentstate/messages/agentstate/audit/v1"
	"github.com/agentstate/agentstate/messages/errs"
	"github.com/agentstate/agentstate/persistence"
	"github.com/agentstate/agentstate/persistence/sqlstore"
	sqlite3 "github.com/mattn/go-sqlite3"
)

const (
	insertAuditPrefix = `INSERT INTO audit_log (position, event_id, event_type, plan_id, session_id,
	project_name, actor_name, user_identity, details_json, created_at, prev_hash, hash, principal, namespace) VALUES `
	auditRowParams = `(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`
	auditColumnsN  = 14
)

// Multi-row inserts: a flush writes its rows in statements of these many
// rows, largest first; few sizes, so few prepared statements.
var auditChunks = [...]int{64, 8, 1}

var insertAuditSQL = map[int]string{}

func init() {
	for _, n := range auditChunks {
		insertAuditSQL[n] = insertAuditPrefix + strings.Repeat(auditRowParams+", ", n-1) + auditRowParams
	}
}

// Audit (sqlstore.Tx's, the persistence dialects') appends entries to
// the chain: each gets the next position, the
// current tail's hash as PrevHash, and its own Hash. Without savepoints
// (a.buffered) rows are only queued, and flushAudit writes them in
// multi-row statements; a duplicate event id then fails the whole attempt,
// and the retry with savepoints, which inserts row by row, tells which
// command it belongs to.
func (a *applier) Audit(entries []*auditv1.AuditEntry) error {
	for _, e := range entries {
		if err := persistence.PrepareEntry(e); err != nil {
			return err
		}
		// Assigned before the insert, so that a restore to the command's
		// mark unassigns it if the insert fails.
		a.tail.Assign(e)
		if a.buffered {
			a.pending = append(a.pending, e)
			if len(a.pending) >= auditChunks[0] {
				if err := a.flushAudit(); err != nil {
					return err
				}
			}
		} else if err := a.insertAudit([]*auditv1.AuditEntry{e}); err != nil {
			return err
		}
	}
	return nil
}

// flushAudit writes the queued entries.
func (a *applier) flushAudit() error {
	return inChunks(&a.pending, auditChunks[:], a.insertAudit)
}

// insertAudit writes es (len one of auditChunks) in one statement.
func (a *applier) insertAudit(es []*auditv1.AuditEntry) error {
	args := a.args[:0]
	for _, e := range es {
		created := persistence.CheckedNanos(e.GetCreatedAt()) // PrepareEntry checked it
		args = append(args, e.Position, e.EventId, e.EventType, e.PlanId, e.SessionId, e.ProjectName,
			e.ActorName, e.UserIdentity, e.DetailsJson, created, e.PrevHash, e.Hash, e.Principal, e.Namespace)
	}
	err := a.insert(insertAuditSQL[len(es)], args)
	clear(args)
	a.args = args[:0]
	if err != nil {
		if c := constraint(err); c == sqlite3.ErrConstraintUnique || c == sqlite3.ErrConstraintPrimaryKey {
			if len(es) == 1 {
				return errs.AlreadyExists("audit entry %s is stored already", es[0].EventId)
			}
			return errs.AlreadyExists("an audit entry of the batch is stored already")
		}
		return err
	}
	return nil
}

// PruneAudit removes the oldest entries, in position order, while they were
// created before OlderThan, at most Limit. Only a prefix of the chain goes,
// so the rest stays verifiable from the anchor: the last removed entry's
// hash and position, kept in audit_meta.
func (a *applier) PruneAudit(c *persistence.PruneAudit) (persistence.Result, error) {
	if c.Limit <= 0 {
		return persistence.Result{}, errs.InvalidArgument("prune limit %d; want at least 1", c.Limit)
	}
	cutoff := persistence.BoundNanos(c.OlderThan)
	if err := a.flushAudit(); err != nil {
		return persistence.Result{}, err
	}
	rows, err := a.tx.QueryContext(a.ctx, `SELECT position, created_at, hash FROM audit_log ORDER BY position LIMIT ?`, c.Limit)
	if err != nil {
		return persistence.Result{}, err
	}
	var removed, lastPos int64
	var lastHash string
	for rows.Next() {
		var pos, created int64
		var hash string
		if err := rows.Scan(&pos, &created, &hash); err != nil {
			rows.Close()
			return persistence.Result{}, err
		}
		if created >= cutoff {
			break
		}
		removed, lastPos, lastHash = removed+1, pos, hash
	}
	if err := rows.Close(); err != nil {
		return persistence.Result{}, err
	}
	if err := rows.Err(); err != nil {
		return persistence.Result{}, err
	}
	if removed > 0 {
		if _, err := a.exec(`DELETE FROM audit_log WHERE position <= ?`, lastPos); err != nil {
			return persistence.Result{}, err
		}
		if _, err := a.exec(`INSERT INTO audit_meta (id, anchor_hash, anchor_position) VALUES (1, ?, ?)
			ON CONFLICT (id) DO UPDATE SET anchor_hash = excluded.anchor_hash, anchor_position = excluded.anchor_position`,
			lastHash, lastPos); err != nil {
			return persistence.Result{}, err
		}
	}
	if err := a.Audit(c.Audit); err != nil {
		return persistence.Result{}, err
	}
	return persistence.RemovedResult{Removed: removed}.Result(), nil
}

// RecordClientAudit is sqlstore.RecordClientAudit in this transaction.
func (a *applier) RecordClientAudit(c *persistence.RecordClientAudit) (persistence.Result, error) {
	return sqlstore.RecordClientAudit(txDB{a: a}, c, a.flushAudit, a.Audit)
}
