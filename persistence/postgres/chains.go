package postgres

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	auditv1 "github.com/agentstate/agentstate/messages/agentstate/audit/v1"
	"github.com/agentstate/agentstate/messages/errs"
	"github.com/agentstate/agentstate/persistence"
	"github.com/jackc/pgx/v5"
)

// The audit trail is partitioned into chains (persistence.MaxAuditChains
// at most; as many as audit_chains has rows). A transaction that writes
// audit entries locks the chains it writes, and only those: an advisory
// transaction lock per chain, (auditLockClass, chain), taken before the
// owner rows (lockorder.go). The advisory lock, not the head row's lock,
// is what a change feed's reader can test without writing (AuditBounds):
// its read-only transactions may take advisory locks but not row locks.
//
// Which chain an entry goes on is the writer's choice, made per
// transaction (chainsOf):
//   - own chain: a transaction whose entries may go anywhere (creates,
//     state changes, plan records, closes, records of the audit service:
//     the common case) writes all of them on one chain, the first it can
//     lock without waiting, starting from the one it held last
//     (ownChainSQL). So each member's writer keeps to a chain of its own
//     and two writers never wait on each other while there are fewer
//     writers than chains, however many sessions their batches span. A
//     chain per key would not do: a group-committed batch spans dozens of
//     sessions, so it would lock nearly every chain, and two members'
//     writers would take turns (measured: 54-63% of their time waiting);
//   - key chains: a command whose entries a reader looks up by key under
//     the chain lock (a client-id record: RecordClientAudit's duplicate
//     check), or whose entries the store cannot know before running it (a
//     prune, a write of any session), takes its keys' chains or every
//     chain, waiting, in ascending order.
//
// Order. Entries of one transaction are on one chain in assignment order.
// Across transactions, a writer starts past the highest tail committed
// when it took its chain (persistence.NextChainPosition's floor), so an
// entry committed before another's transaction began has the lower
// position, whichever chains they are on: a session's or a plan's entries
// (its owner writes them one transaction after the other, and a new
// owner's only after the old one's are fenced) are in position order.
// Only entries of transactions that overlapped may be in either order.
//
// Deadlock freedom: an own-chain transaction takes exactly one chain lock,
// first (it waits for it only when every chain is busy, holding nothing);
// a key-chain transaction waits only for chains above those it holds. So
// no one holding a chain lock waits for a chain held by one who waits.
const auditLockClass int32 = 0x61756474 // "audt"

// AuditLockClass is the first key of every chain's advisory lock
// (auditLockClass), for operators and tests that hold chains.
const AuditLockClass = auditLockClass

// errChainCount: the trail's chain count changed (PartitionAudit on some
// node) since this Store read it; the attempt is run again with the new
// count, before it wrote anything.
var errChainCount = errors.New("the audit trail's chain count changed")

// chainsOf returns how batch writes audit entries on a trail of n chains:
// nil when it writes none; own when every entry may go on the writer's own
// chain (see above; chains is then nil); else the chains it writes,
// ascending. A command with an owner key puts its entries on its key's
// chain (entryChain); a command whose entries the store cannot know
// before running it (a prune, a write of any session) takes every chain.
func chainsOf(batch []persistence.Command, n int) (chains []int, own bool) {
	var held [persistence.MaxAuditChains]bool
	all, any, keyed := false, false, false
	for _, cmd := range batch {
		if cmd == nil {
			continue
		}
		t := cmd.Touches()
		if !t.WritesAudit() {
			continue
		}
		any = true
		switch {
		case t.Audit == persistence.AuditPrunes || t.AnySession:
			all = true
		case t.Audit == persistence.AuditClientRecords:
			keyed = true
			for _, e := range t.Records {
				held[persistence.AuditChainOf(persistence.EntryChainKey(e), n)] = true
			}
		case t.Session != "" || t.Plan != "":
			held[commandChain(t, n)] = true
		case len(t.Records) > 0:
			for _, e := range t.Records {
				held[persistence.AuditChainOf(persistence.EntryChainKey(e), n)] = true
			}
		default:
			all = true
		}
	}
	if !any {
		return nil, false
	}
	if n > 1 && !all && !keyed {
		return nil, true
	}
	var out []int
	for ch := range n {
		if all || held[ch] {
			out = append(out, ch)
		}
	}
	return out, false
}

// commandChain is the chain of a command's entries: its session's, else
// its plan's; -1 when it has neither (each entry then goes by its own
// key, persistence.EntryChainKey).
func commandChain(t persistence.Touch, n int) int {
	switch {
	case t.Session != "":
		return persistence.AuditChainOf(t.Session, n)
	case t.Plan != "":
		return persistence.AuditChainOf(t.Plan, n)
	}
	return -1
}

// entryChain is the chain e goes on within the current command.
func (a *applier) entryChain(e *auditv1.AuditEntry) int {
	if a.own >= 0 {
		return a.own
	}
	if a.cmdChain >= 0 {
		return a.cmdChain
	}
	return persistence.AuditChainOf(persistence.EntryChainKey(e), a.tail.Chains())
}

// lockChains queues the locks of chains (ascending), or with own, the
// lock of the writer's own chain (ownChainSQL), and the read of the held
// chains' heads into b (begin's first round trip).
func (a *applier) lockChains(b *pgx.Batch, chains []int, own bool, n int) {
	a.own = -1
	if own {
		b.Queue(ownChainSQL, auditLockClass, int32(a.prefer), int32(n)).QueryRow(func(row pgx.Row) error {
			return row.Scan(&a.own)
		})
	}
	for _, ch := range chains {
		b.Queue(`SELECT pg_advisory_xact_lock($1::int4, $2::int4)`, auditLockClass, int32(ch))
	}
	b.Queue(`SELECT chain, tail_position, tail_hash, count(*) OVER (), max(tail_position) OVER (),
		pg_current_xact_id()::text FROM audit_chains ORDER BY chain`).Query(func(rows pgx.Rows) error {
		all := make(map[int]persistence.ChainHead, n)
		var count, floor int64
		var h persistence.ChainHead
		_, err := pgx.ForEachRow(rows, []any{&h.Chain, &h.TailPosition, &h.TailHash, &count, &floor, &a.xid}, func() error {
			all[h.Chain] = h
			return nil
		})
		if err != nil {
			return err
		}
		if int(count) != n {
			a.chainCount = int(count)
			return errChainCount
		}
		if own {
			chains = []int{a.own}
		}
		mine := make(map[int]persistence.ChainHead, len(chains))
		for _, ch := range chains {
			mine[ch] = all[ch]
		}
		a.tail.StartChains(mine, n, floor)
		return nil
	})
}

// ownChainSQL locks the writer's own chain: the first of chains $2, $2+1,
// … (mod $3) whose lock is free, tried without waiting in that order (the
// Limit stops the scan, and so the tries, at the first taken); when every
// one is busy, it waits for chain $2 (COALESCE evaluates its second
// argument only then). It returns the chain locked.
const ownChainSQL = `SELECT coalesce(
	(SELECT c FROM (SELECT ((g + $2::int4) % $3::int4)::int4 AS c FROM generate_series(0, $3::int4 - 1) AS g) s
		WHERE pg_try_advisory_xact_lock($1::int4, c) LIMIT 1),
	(SELECT $2::int4 FROM pg_advisory_xact_lock($1::int4, $2::int4)))`

// moveChains queues the update of every chain whose tail the transaction
// moved.
func (a *applier) moveChains() {
	for _, h := range a.tail.Advanced() {
		a.queue(`UPDATE audit_chains SET tail_position = $2, tail_hash = $3 WHERE chain = $1`,
			int16(h.Chain), h.TailPosition, h.TailHash)
	}
}

// PartitionAudit raises the trail's chain count to n (at most
// persistence.MaxAuditChains; a count never goes down, since entries stay
// on their chains). Writers of every node pick the new count up at their
// next transaction. The chains added start past every committed position.
func (s *Store) PartitionAudit(ctx context.Context, n int) error {
	if n < 1 || n > persistence.MaxAuditChains {
		return errs.InvalidArgument("audit chains %d; want 1 to %d", n, persistence.MaxAuditChains)
	}
	s.wmu.Lock()
	defer s.wmu.Unlock()
	conn, err := s.liveConn(ctx)
	if err != nil {
		return err
	}
	return s.partition(ctx, conn, n)
}

// partition is PartitionAudit on conn, with wmu held (or from open): the
// chains added and a checkpoint that commits to them, in one transaction.
func (s *Store) partition(ctx context.Context, conn *pgx.Conn, n int) error {
	err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `INSERT INTO audit_chains (chain, tail_position, tail_hash, anchor_position, anchor_hash)
			SELECT c, (SELECT max(tail_position) FROM audit_chains), '', 0, ''
			FROM generate_series(0, $1::int - 1) AS c ON CONFLICT (chain) DO NOTHING`, n); err != nil {
			return err
		}
		if err := checkpointIn(ctx, tx); err != nil {
			return err
		}
		return tx.QueryRow(ctx, "SELECT count(*) FROM audit_chains").Scan(&s.chains)
	})
	return storeErr(fmt.Sprintf("partition the audit trail into %d chains", n), err)
}

// AuditChainHeads reads every chain's head in one statement.
func (r *reader) AuditChainHeads(ctx context.Context) ([]persistence.ChainHead, error) {
	return chainHeads(ctx, r.pool)
}

func chainHeads(ctx context.Context, q querier) ([]persistence.ChainHead, error) {
	rows, err := q.Query(ctx, `SELECT chain, anchor_position, anchor_hash, tail_position, tail_hash FROM audit_chains ORDER BY chain`)
	if err != nil {
		return nil, storeErr("audit chain heads", err)
	}
	var out []persistence.ChainHead
	var h persistence.ChainHead
	_, err = pgx.ForEachRow(rows, []any{&h.Chain, &h.AnchorPosition, &h.AnchorHash, &h.TailPosition, &h.TailHash}, func() error {
		out = append(out, h)
		return nil
	})
	return out, storeErr("audit chain heads", err)
}

// holdsAll reports whether the transaction holds every chain.
func (a *applier) holdsAll() bool {
	for ch := range a.tail.Chains() {
		if !a.tail.Holds(ch) {
			return false
		}
	}
	return true
}

// auditChainsParam takes the audit_chains parameter out of a DSN's
// parameters (it is the store's, not the server's): MaxAuditChains when
// absent. Chains are on by default because they are what lets members'
// writers run side by side (one chain makes every audited write of every
// member take turns on its lock); audit_chains=1 keeps a trail of one
// chain as it is.
func auditChainsParam(c *pgx.ConnConfig) (int, error) {
	v, ok := c.RuntimeParams["audit_chains"]
	if !ok {
		return persistence.MaxAuditChains, nil
	}
	delete(c.RuntimeParams, "audit_chains")
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > persistence.MaxAuditChains {
		return 0, errs.InvalidArgument("postgres DSN: audit_chains=%q; want 1 to %d", v, persistence.MaxAuditChains)
	}
	return n, nil
}
