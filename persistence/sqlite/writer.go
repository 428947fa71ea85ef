package sqlite

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"fmt"
	"sync"

	auditv1 "github.com/agentstate/agentstate/messages/agentstate/audit/v1"
	sessionv1 "github.com/agentstate/agentstate/messages/agentstate/session/v1"
	"github.com/agentstate/agentstate/persistence"
	"github.com/agentstate/agentstate/persistence/sqlstore"
)

// writer is the Store's sole persistence.Writer. All its state lives on the
// Store, under Store.wmu (the lease's slot).
type writer struct {
	*persistence.WriterLease
	s *Store
}

var _ persistence.Writer = (*writer)(nil)

// Apply runs batch in one BEGIN IMMEDIATE transaction, by the protocol of
// persistence.RunCommands: an attempt with appends' rows pooled (bulk.go),
// and, if a command failed on its own, a replay with a savepoint per
// command. A failure of the transaction stores nothing.
//
// ctx is checked before each command and the commit, never handed to
// database/sql: a transaction whose context is cancelled makes database/sql
// discard its connection, and the writer's connection is pinned (for a
// memory database it is what keeps the database alive).
func (w *writer) Apply(ctx context.Context, batch []persistence.Command) ([]persistence.Result, error) {
	s := w.s
	if err := w.Enter(s.loc.key); err != nil {
		return nil, err
	}
	defer s.wmu.Unlock()
	results, isolate, err := s.run(ctx, batch, false)
	if isolate {
		results, _, err = s.run(ctx, batch, true)
	}
	if err != nil {
		return nil, err
	}
	s.maybeCheckpoint()
	return results, nil
}

// run makes one attempt at batch. Without savepoints, it stops at the first
// command-level failure, rolls back and reports isolate = true. With
// savepoints, command-level failures become Results. Called with wmu held.
func (s *Store) run(ctx context.Context, batch []persistence.Command, savepoints bool) (_ []persistence.Result, isolate bool, _ error) {
	if err := ctx.Err(); err != nil {
		return nil, false, storeErr("apply", err)
	}
	bg := context.Background()
	tx, err := s.wconn.BeginTx(bg, nil)
	if err != nil {
		return nil, false, storeErr("begin", err)
	}
	pos, hash, err := loadChainTail(bg, tx)
	if err != nil {
		_ = tx.Rollback()
		return nil, false, storeErr("load audit chain", err)
	}
	bufs := statementBufs.Get().(*argBufs)
	a := &applier{ctx: bg, tx: tx, conn: s.wconn, buffered: !savepoints, args: bufs.args, nvs: bufs.nvs, quotas: s.QuotasNow(),
		pendingRows: pendingLayout(batch)}
	a.usage = persistence.NewUsage(a.quotas, a)
	a.names = &s.names
	a.Savepoints = sqlstore.NewSavepoints(a, "ROLLBACK TO cmd; RELEASE cmd")
	defer func() {
		// Both are cleared after each statement, so they hold no values.
		bufs.args, bufs.nvs = a.args[:0], a.nvs[:0]
		statementBufs.Put(bufs)
	}()
	a.tail.Start(pos, hash)
	abort := func() {
		a.restore(persistence.ChainMark{})
		_ = tx.Rollback()
	}
	results, step, err := persistence.RunCommands(ctx, a, batch, savepoints, nil)
	switch step {
	case persistence.Isolate:
		abort()
		return nil, true, nil
	case persistence.Abandon:
		abort()
		return nil, false, storeErr("apply", err)
	}
	pending, from := s.pending+a.rows, s.settleFrom
	if pending >= s.settleAt {
		from, pending = s.settleDue(a, pending)
	}
	if err := tx.Commit(); err != nil {
		abort()
		return nil, false, storeErr("commit", err)
	}
	s.pending, s.settleFrom = pending, from
	return results, false, nil
}

// argBufs are the argument slices of the multi-row statements (applier.args
// and nvs), kept from one transaction to the next: an applier lives for
// one transaction, and growing them afresh in each (hundreds of values per
// statement) cost the writer as much as binding them.
type argBufs struct {
	args []any
	nvs  []driver.NamedValue
}

var statementBufs = sync.Pool{New: func() any { return &argBufs{} }}

// applier carries one transaction; tail is its view of the audit chain
// (persistence.ChainTail: positions, hashes, unassigning on rollback).
type applier struct {
	// Savepoints are the savepoint steps of persistence.Attempt; SQLite's
	// rollback also ends the savepoint.
	sqlstore.Savepoints
	ctx  context.Context
	tx   *sql.Tx
	tail persistence.ChainTail
	// buffered: audit rows wait in pending for a multi-row insert; only
	// without savepoints, where a failure aborts the attempt anyway.
	buffered bool
	pending  []*auditv1.AuditEntry
	// msgs: message rows of buffered appends waiting for a multi-row
	// insert (see messageChunks); like pending, only without savepoints.
	msgs []*sessionv1.Message
	// advances: the session-row updates of buffered appends (see advance).
	advances []advance
	// args and nvs are reused for multi-row statements.
	args []any
	nvs  []driver.NamedValue
	// conn is the writer's connection, which tx runs on (see insert).
	conn *sql.Conn
	// pendingRows: this transaction writes its message rows pending
	// rather than settled (pendingLayout); rows counts the pending rows it
	// inserted (see settle; an overcount only settles a little early).
	pendingRows bool
	rows        int64
	// quotas are the namespaces' quotas for this transaction (nil: the
	// defaults).
	quotas persistence.Quotas
	// usage books the stored bytes the transaction adds and removes
	// (usage.go).
	usage *persistence.Usage
	names *sessionNames
	// removedTable: whether removed_message_ids has rows, as this
	// transaction knows (hasRemovedIDs): unknown, empty or not.
	removedTable tableRows
}

// pendingRowsPerSession is the most message rows per session, on average
// over a batch's appends, for which they are written pending. A settled
// row costs its session's index leaf, once per transaction however many of
// the session's rows it carries; a pending row costs its share of the
// small pending table now and of a settle later (a copy of its ~40-byte
// entry into message_index, schema migration 7, on the index leaf it
// shares with the session's other entries of that settle). So pending pays where a transaction carries about one row per
// session (64 callers over 64 sessions: one leaf per row saved) and not
// where it carries many (16 callers on one session, 4,096 callers over 64
// sessions, imports), which then go to the per-session index at once as
// before schema migration 5 (docs/bench/HISTORY.md).
const pendingRowsPerSession = 4

// pendingLayout tells whether batch's message rows are written pending:
// fewer than pendingRowsPerSession rows per session on average, over the
// sessions the batch inserts message rows into (Touch.Messages, which an
// activation reports for the write it carries).
func pendingLayout(batch []persistence.Command) bool {
	rows := 0
	sessions := make(map[string]struct{})
	for _, cmd := range batch {
		if cmd == nil {
			continue
		}
		t := cmd.Touches()
		if t.Messages == 0 {
			continue
		}
		rows += t.Messages
		sessions[t.Session] = struct{}{}
	}
	return rows < pendingRowsPerSession*len(sessions)
}

// indexed is the indexed column of the rows this transaction inserts.
func (a *applier) indexed() int64 {
	if a.pendingRows {
		return 0
	}
	return 1
}

// inserted counts n message rows the transaction inserted.
func (a *applier) inserted(n int) {
	if a.pendingRows {
		a.rows += int64(n)
	}
}

// restore rolls the applier back to m: the chain's entries assigned after
// it are unassigned, and the rows held for multi-row statements (which
// only an attempt without savepoints holds, and which it abandons whole)
// are dropped. The zero mark abandons the transaction.
func (a *applier) restore(m persistence.ChainMark) {
	a.tail.Restore(m)
	a.pending = nil
	a.msgs = nil
	a.advances = nil
}

// The applier is the persistence.Attempt of a SQLite transaction.

// Command applies one command. In the optimistic attempt, the rows of
// commands checked at their advance (persistence.CheckAtAdvance: appends)
// are pooled across commands (bulk.go); any other command first writes
// them, so that it sees them.
func (a *applier) Command(cmd persistence.Command) (persistence.Result, error) {
	check := checkOf(cmd)
	if a.buffered && check != persistence.CheckAtAdvance {
		if err := a.flushAppends(); err != nil {
			return persistence.Result{}, err
		}
	}
	return a.dispatch(cmd, check)
}

// checkOf is what cmd's own statements check of its fence (nil: nothing;
// Dispatch refuses it).
func checkOf(cmd persistence.Command) persistence.FenceCheck {
	if cmd == nil {
		return persistence.CheckBefore
	}
	return cmd.Touches().Check
}

// ExecStatement runs one statement of the transaction's own (a savepoint
// step).
func (a *applier) ExecStatement(stmt string) error {
	_, err := a.tx.ExecContext(a.ctx, stmt)
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

// Finish writes the rows the optimistic attempt pooled, then adds the
// transaction's stored bytes to their namespaces' totals.
func (a *applier) Finish() error {
	if err := a.flushAppends(); err != nil {
		return err
	}
	if err := a.flushAudit(); err != nil {
		return err
	}
	return a.flushUsage()
}

func (a *applier) dispatch(cmd persistence.Command, check persistence.FenceCheck) (persistence.Result, error) {
	// Pooled appends check their epoch in the advance (advance.go), plan
	// writes in their first statement (plans.go); every other command,
	// and an append applied row by row, here.
	if check == persistence.CheckBefore || (check == persistence.CheckAtAdvance && !a.buffered) {
		if err := a.checkEpoch(cmd); err != nil {
			return persistence.Result{}, err
		}
	}
	return persistence.Dispatch(a, cmd)
}

func (a *applier) exec(query string, args ...any) (sql.Result, error) {
	return a.tx.ExecContext(a.ctx, query, args...)
}

// insert runs a multi-row INSERT (args: driver values — int64, string)
// as a query on the writer's driver connection, inside the transaction
// that connection is in. As a query: go-sqlite3 binds a query's arguments
// and takes its first step (which runs an INSERT to completion) in one cgo
// crossing, where Exec binds every text argument with a crossing of its
// own — hundreds per multi-row statement, on the writer, the append path's
// one serial resource. On the driver connection: database/sql would copy
// the arguments into a fresh []driver.NamedValue per statement (an eighth of
// an append's allocations); a.nvs is reused instead.
func (a *applier) insert(query string, args []any) error {
	nvs := a.nvs[:0]
	for i, v := range args {
		nvs = append(nvs, driver.NamedValue{Ordinal: i + 1, Value: v})
	}
	err := a.conn.Raw(func(dc any) error {
		q, ok := dc.(driver.QueryerContext)
		if !ok {
			return fmt.Errorf("sqlite: driver connection %T cannot query", dc)
		}
		rows, err := q.QueryContext(a.ctx, query, nvs)
		if err != nil {
			return err
		}
		return rows.Close()
	})
	clear(nvs)
	a.nvs = nvs[:0]
	return err
}

func (a *applier) queryRow(query string, args ...any) *sql.Row {
	return a.tx.QueryRowContext(a.ctx, query, args...)
}

func rowsAffected(res sql.Result) (int64, error) { return res.RowsAffected() }
