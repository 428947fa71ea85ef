package postgres

import (
	"context"

	auditv1 "github.com/agentstate/agentstate/messages/agentstate/audit/v1"
	"github.com/agentstate/agentstate/persistence"
	"github.com/agentstate/agentstate/persistence/sqlstore"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// applier carries one transaction; tail is its view of the audit chain
// (persistence.ChainTail: positions, hashes, unassigning on rollback).
type applier struct {
	// Savepoints are the savepoint steps of persistence.Attempt.
	sqlstore.Savepoints
	ctx  context.Context
	conn *pgx.Conn
	// tx is nil until BEGIN is sent: with begin's batch when it locks
	// audit chains, else with the pipeline's first statements (sendPipe).
	tx pgx.Tx
	// xid is the transaction's id, to look up its outcome if COMMIT's
	// answer is lost.
	xid string
	// chain: the transaction holds the chains it writes (chains.go), and
	// tail is its view of them; cmdChain is the chain of the running
	// command's entries (-1: each entry's own); chainCount is the count
	// found when it differs from the Store's (errChainCount); checkpoint:
	// finish also writes a checkpoint (checkpoint.go), checkpointed: it
	// did.
	chain                    bool
	checkpoint, checkpointed bool
	tail                     persistence.ChainTail
	cmdChain                 int
	chainCount               int
	// own is the chain every entry of the transaction goes on (the
	// writer's own chain, chains.go); -1 when entries go by key. prefer is
	// the chain the writer tries first.
	own, prefer int
	// buffered: the attempt without savepoints. Audit rows wait in pending
	// for one multi-row insert at the end, and the common commands are
	// queued in pipe (see pipeline.go); a failure of either aborts the
	// attempt, and the replay with savepoints runs command by command.
	buffered bool
	pending  []*auditv1.AuditEntry
	// pendingChains are the chains of pending, in order.
	pendingChains []int16
	pipe          *pgx.Batch
	// set gathers the pipelined appends until the next statement is
	// queued (appendset.go).
	set appendSet
	// epochs are the owner rows' epochs as the transaction locked them
	// (lockorder.go), kept current by its own TakeEpoch; nil when it
	// locked none. fences are the pipelined commands' checks queued while
	// the locks' answer was still to come (pipeFence).
	epochs map[ownerKey]int64
	fences []fenceCheck
	// quotas are the namespaces' quotas for this transaction (nil: the
	// defaults).
	quotas persistence.Quotas
	// usage books the stored bytes the transaction adds and removes, to
	// add to the writer's shard of the totals (usage.go).
	usage *persistence.Usage
	shard int16
}

// begin starts the transaction and takes its id and its locks in their
// global order (see lockorder.go): the locks of the audit chains the batch
// writes (chains, of a trail of n, ascending; or with own, the writer's
// own chain), then the owner rows of owners, all in one round trip. A
// transaction that writes no audit entry needs nothing from that round
// trip before its commands run (their fence checks wait for the epochs,
// pipeFence): in the attempt without savepoints its BEGIN and locks open
// the pipeline instead, sent with the first statements that must be. a.tx
// is nil while BEGIN was not sent.
func (a *applier) begin(conn *pgx.Conn, chains []int, own bool, n int, owners ownerLocks) error {
	a.conn = conn
	b := &pgx.Batch{}
	b.BeginTx(pgx.TxOptions{IsoLevel: pgx.ReadCommitted})
	a.cmdChain, a.own = -1, -1
	if len(chains) > 0 || own {
		a.chain = true
		a.lockChains(b, chains, own, n)
	} else {
		b.Queue("SELECT pg_current_xact_id()::text").QueryRow(func(row pgx.Row) error { return row.Scan(&a.xid) })
	}
	if len(owners.create) > 0 {
		b.Queue(insertOwnersSQL, keyArgs(owners.create)...)
	}
	if len(owners.all) > 0 {
		a.epochs = make(map[ownerKey]int64, len(owners.all))
		b.Queue(lockOwnersSQL, keyArgs(owners.all)...).Query(func(rows pgx.Rows) error {
			var kind int16
			var k ownerKey
			var epoch int64
			_, err := pgx.ForEachRow(rows, []any{&kind, &k.id, &epoch}, func() error {
				k.kind = persistence.OwnerKind(kind)
				a.epochs[k] = epoch
				return nil
			})
			return err
		})
	}
	if a.buffered && !a.chain {
		a.pipe = b
		return nil
	}
	br := conn.SendBatch(a.ctx, b)
	a.tx = br.Tx()
	return br.Close()
}

// finish writes the queued audit rows, moves the chain's tail and adds
// the stored bytes to their totals (usage.go); without savepoints,
// together with the rest of the pipeline, in one round trip.
func (a *applier) finish() error {
	if !a.buffered {
		if err := a.flushAudit(); err != nil {
			return err
		}
	} else if len(a.pending) > 0 {
		a.queue(insertAuditSQL, a.auditArgs()...)
		a.pending, a.pendingChains = a.pending[:0], a.pendingChains[:0]
	}
	if a.chain {
		a.moveChains()
		if a.checkpoint {
			a.queueCheckpoint()
		}
	}
	if err := a.queueUsage(); err != nil {
		return err
	}
	return a.sendPipe()
}

// restore rolls the applier back to m: the chain's entries assigned after
// it are unassigned, and what is queued for the pipeline (only an attempt
// without savepoints queues, and it is abandoned whole) is dropped. The
// zero mark abandons the transaction.
func (a *applier) restore(m persistence.ChainMark) {
	a.tail.Restore(m)
	a.pending, a.pendingChains = nil, nil
	a.pipe = nil
	a.set = appendSet{}
	a.fences = nil
}

// The applier is the persistence.Attempt of a PostgreSQL transaction.

// Command applies one command: pipelined in the optimistic attempt; in a
// replay with its audit rows written at once, so that a duplicate event id
// fails its own command.
func (a *applier) Command(cmd persistence.Command) (persistence.Result, error) {
	if cmd != nil {
		a.cmdChain = commandChain(cmd.Touches(), a.tail.Chains())
	}
	res, err := a.dispatch(cmd)
	a.cmdChain = -1
	if err == nil && !a.buffered {
		err = a.flushAudit()
	}
	return res, err
}

// ExecStatement runs one statement of the transaction's own (a savepoint
// step).
func (a *applier) ExecStatement(stmt string) error {
	_, err := a.tx.Exec(a.ctx, stmt)
	return err
}

func (a *applier) Mark() persistence.ChainMark {
	a.usage.Mark()
	return a.tail.Mark()
}

func (a *applier) Restore(m persistence.ChainMark) {
	a.usage.Restore()
	a.restore(m)
}

// Finish writes the queued audit rows and moves the chain's tail (finish).
func (a *applier) Finish() error { return a.finish() }

func (a *applier) dispatch(cmd persistence.Command) (persistence.Result, error) {
	return persistence.Dispatch(a, cmd)
}

// exec runs one statement of a command, after what the pipeline holds; a
// value the server rejects is the command's INVALID_ARGUMENT.
func (a *applier) exec(query string, args ...any) (pgconn.CommandTag, error) {
	if err := a.sendPipe(); err != nil {
		return pgconn.CommandTag{}, err
	}
	tag, err := a.tx.Exec(a.ctx, query, args...)
	return tag, dataException(err)
}

// queryRow runs one single-row query of a command and scans it.
func (a *applier) queryRow(query string, args []any, dest ...any) error {
	if err := a.sendPipe(); err != nil {
		return err
	}
	return dataException(a.tx.QueryRow(a.ctx, query, args...).Scan(dest...))
}

// forEachRow runs a query of a command and calls fn for each row, scanned
// into dest.
func (a *applier) forEachRow(query string, args []any, dest []any, fn func() error) error {
	if err := a.sendPipe(); err != nil {
		return err
	}
	rows, err := a.tx.Query(a.ctx, query, args...)
	if err != nil {
		return dataException(err)
	}
	_, err = pgx.ForEachRow(rows, dest, fn)
	return dataException(err)
}
