package sqlstore

import (
	"context"

	auditv1 "github.com/agentstate/agentstate/messages/agentstate/audit/v1"
	"github.com/agentstate/agentstate/persistence"
)

// lookupChunk bounds the ids of one lookup statement of a dialect without
// arrays, far below SQLite's limit on bound parameters.
const lookupChunk = 256

// RecordClientAudit stores the entries of c whose event ids are not
// stored yet and answers the others as duplicates or conflicts
// (persistence.SplitClientAudit). The lookup runs inside the writer's
// transaction after the audit rows queued so far are written, so it sees
// every entry committed before and every one written earlier in this
// transaction: an id is stored once in both the buffered attempt and the
// replay with savepoints. (PostgreSQL's transaction holds the chain lock
// too, which another writer on the database must take to add an entry.)
//
// tx is the writer's transaction, flush writes the audit rows it queued,
// and insert chains and stores entries (queued or at once).
func RecordClientAudit(tx DB, c *persistence.RecordClientAudit, flush func() error, insert func([]*auditv1.AuditEntry) error) (persistence.Result, error) {
	if err := flush(); err != nil {
		return persistence.Result{}, err
	}
	stored, err := StoredAudit(context.Background(), tx, persistence.ClientAuditIDs(c.Entries))
	if err != nil {
		return persistence.Result{}, err
	}
	fresh, out := persistence.SplitClientAudit(c.Entries, stored)
	if err := insert(fresh); err != nil {
		return persistence.Result{}, err
	}
	return persistence.RecordedResult{Recorded: out}.Result(), nil
}

// StoredAudit returns the stored entries among ids, by event id.
func StoredAudit(ctx context.Context, db DB, ids []string) (map[string]*auditv1.AuditEntry, error) {
	stored := make(map[string]*auditv1.AuditEntry)
	row := newAuditRow()
	err := lookup(ctx, db, "SELECT "+AuditColumns+" FROM audit_log", "event_id", ids, row.dest, func() error {
		stored[row.e.EventId] = row.entry()
		return nil
	})
	return stored, err
}

// lookup runs selectFrom for the rows whose column is one of ids, a
// chunk of them at a time where the dialect has no arrays, scanning each
// row into dest and calling each.
func lookup(ctx context.Context, db DB, selectFrom, column string, ids []string, dest []any, each func() error) error {
	for len(ids) > 0 {
		n := len(ids)
		if !db.Arrays() {
			n = min(n, lookupChunk)
		}
		w := NewWhere(db)
		w.In(column, ids[:n])
		ids = ids[n:]
		if err := db.Query(ctx, selectFrom+w.Clause(), w.Args(), dest, each); err != nil {
			return err
		}
	}
	return nil
}
