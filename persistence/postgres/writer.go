package postgres

import (
	"context"
	"errors"

	"github.com/agentstate/agentstate/persistence"
	"github.com/agentstate/agentstate/persistence/sqlstore"
)

// maxAttempts bounds how often Apply runs a transaction that did not
// commit but may next time: the server aborted it to break a deadlock with
// another node's writer, or its connection was lost before COMMIT.
const maxAttempts = 4

// writer is the Store's sole persistence.Writer. All its state lives on the
// Store, under Store.wmu (the lease's slot).
type writer struct {
	*persistence.WriterLease
	s *Store
}

var _ persistence.Writer = (*writer)(nil)

// Apply runs batch in one READ COMMITTED transaction on the writer
// connection.
//
// The protocol is persistence.RunCommands's: an attempt pipelined where it
// can (pipeline.go), and, if a command failed on its own or a pipelined
// check did not hold, a replay with a savepoint per command. Beyond it, a
// transaction that did not commit but may next time (a deadlock with
// another node's writer, a connection lost before COMMIT) is run again, up
// to maxAttempts, on a new connection if need be. A failure of the
// transaction stores nothing.
//
// ctx bounds the statements before COMMIT (a cancellation there closes the
// connection, and the server rolls the transaction back). COMMIT itself
// runs without ctx's cancellation: when its answer is lost anyway, the
// outcome is looked up by transaction id (see resolveCommit).
func (w *writer) Apply(ctx context.Context, batch []persistence.Command) ([]persistence.Result, error) {
	s := w.s
	if err := w.Enter(s.key); err != nil {
		return nil, err
	}
	defer s.wmu.Unlock()
	savepoints := false
	for attempt := 1; ; attempt++ {
		results, next, err := s.run(ctx, batch, savepoints)
		switch {
		case next == isolateCommands && !savepoints:
			savepoints = true
			s.replays++
			attempt--
			continue
		case next == runAgain && attempt < maxAttempts:
			s.retries++
			s.retried = err
			continue
		case err != nil:
			return nil, storeErr("apply", err)
		}
		return results, nil
	}
}

// outcome says what Apply does after an attempt that did not commit.
type outcome int

const (
	finished        outcome = iota // committed, or failed for good
	isolateCommands                // a command failed on its own: run again with savepoints
	runAgain                       // nothing was stored and a new attempt may succeed
)

// run makes one attempt at batch. Without savepoints, it stops at the first
// command-level failure, rolls back and reports isolateCommands. With
// savepoints, command-level failures become Results. Called with wmu held.
func (s *Store) run(ctx context.Context, batch []persistence.Command, savepoints bool) (_ []persistence.Result, _ outcome, err error) {
	if err := ctx.Err(); err != nil {
		return nil, finished, err
	}
	if len(batch) == 0 {
		return []persistence.Result{}, finished, nil
	}
	conn, err := s.liveConn(ctx)
	if err != nil {
		return nil, finished, err
	}
	// Before COMMIT, a failure means the transaction did not commit: the
	// server aborted it (a deadlock: try again), or the connection was lost
	// (a server restart, an idle connection cut: try again on a new one,
	// unless the caller gave up, which closes the connection too).
	failed := func(err error) (outcome, error) {
		switch {
		case ctx.Err() != nil:
			return finished, err
		case retryable(err), conn.IsClosed():
			return runAgain, err
		}
		return finished, err
	}
	a := &applier{ctx: ctx, buffered: !savepoints, quotas: s.QuotasNow(), shard: s.shard}
	a.usage = persistence.NewUsage(a.quotas, a)
	a.Savepoints = sqlstore.NewSavepoints(a, "ROLLBACK TO SAVEPOINT cmd")
	var owners ownerLocks
	if !s.unordered {
		owners = batchOwners(batch)
	}
	n := max(s.chains, 1)
	a.prefer = s.ownChain % n
	chains, own := chainsOf(batch, n)
	err = a.begin(conn, chains, own, n, owners)
	abort := func(err error) ([]persistence.Result, outcome, error) {
		a.restore(persistence.ChainMark{})
		if a.tx != nil {
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), closeTimeout)
			_ = a.tx.Rollback(rctx)
			cancel()
		}
		next, err := failed(err)
		s.afterFailure()
		return nil, next, err
	}
	if errors.Is(err, errChainCount) {
		s.chains = a.chainCount
		abort(nil)
		return nil, runAgain, err
	}
	if err != nil {
		return abort(err)
	}
	a.checkpoint = a.chain && s.checkpointDue()
	if a.own >= 0 {
		s.ownChain = a.own
	}
	var after func(int) error
	if s.afterCommand != nil {
		after = func(i int) error {
			// The hook sees the command's statements run.
			if err := a.sendPipe(); err != nil {
				return err
			}
			s.afterCommand(i)
			return nil
		}
	}
	results, step, err := persistence.RunCommands(ctx, a, batch, savepoints, after)
	switch step {
	case persistence.Isolate:
		abort(nil)
		return nil, isolateCommands, nil
	case persistence.Abandon:
		return abort(err)
	}
	if next, err := s.commitTx(ctx, conn, a.tx, a.xid); err != nil {
		a.restore(persistence.ChainMark{})
		s.afterFailure()
		return nil, next, err
	}
	if a.chain {
		s.committedChains(a.checkpointed)
	}
	return results, finished, nil
}

// afterFailure forgets a writer connection that died, so that the next
// Apply reconnects. Called with wmu held.
func (s *Store) afterFailure() {
	if s.wconn != nil && s.wconn.IsClosed() {
		s.dropConn()
	}
}
