package postgres

import (
	"cmp"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/agentstate/agentstate/persistence"
)

// Lock order. Two nodes' writers may run batches that touch the same keys
// at the same time (during a failover two members briefly both hold
// activations of a key: fencing decides which one's writes count, but both
// still lock rows). If each batch took its row locks command by command, in
// batch order, two batches with the same keys in opposite orders would
// deadlock; the server only notices after deadlock_timeout (1 s by
// default), stalling both writers that long before it aborts one.
//
// So every transaction takes its locks in one global order, all of them
// before its first command:
//
//  1. the advisory lock of each audit chain the batch may write entries
//     on (chainsOf in chains.go): its writer's own chain, the first one
//     free, or its keys' chains in ascending order (chains.go says why no
//     wait-for cycle forms among them); writers of different chains share
//     none;
//  2. the owner_epochs rows of every session and plan the batch writes,
//     FOR UPDATE, in (kind, id) order, id in byte order (COLLATE "C"), in
//     two sorted passes: first the insert of the rows that a command of the
//     batch may create (an Activate, an unfenced write), which waits only
//     for other transactions' uncommitted inserts of those keys; then the
//     lock of every key's committed row, which waits only for committed
//     rows locked by others. A transaction never waits in the first pass
//     while holding a lock of the second, and each pass goes in one order,
//     so no wait-for cycle can form.
//
// The one lock taken later, the checkpoint lock (checkpoint.go), is only
// tried (pg_try_advisory_xact_lock), in the transaction's last round trip:
// a writer that does not get it at once writes no checkpoint, so it never
// waits for it and it cannot close a cycle.
//
// After that, a command only locks rows that belong to a key whose owner
// row the transaction holds exclusively: the session's row, messages and
// links; the plan's row, records and step counters (every command that
// writes them fences its key first, and no foreign key crosses keys). So
// no other writer can hold them, and a command never waits for another
// node's writer. The fencing invariant is unchanged: the owner row lock is
// stronger than the share lock a fenced write takes, and an Activate still
// increments the epoch under it.
//
// And last, after every command, in the transaction's final statements
// before COMMIT (queueUsage in usage.go):
//
//  3. the transaction lock (lockUsageSQL) of each namespace with a quota of
//     stored bytes that the transaction adds to, in namespace byte order,
//     then the writer's own namespace_usage row (its shard, usageshards.go)
//     of each namespace whose stored bytes it moved, in namespace byte
//     order (COLLATE "C"), in one statement. Nothing is locked after them,
//     so a transaction waiting there holds no lock another waits for in a
//     different order. Writers of one namespace without such a quota share
//     none of these locks (each adds to its own shard); writers adding to
//     one with a quota take turns for their commits alone, so that the
//     check after the add counts every other commit: exactness of the
//     quota is paid for only where a quota is set.
//
// The writer connection's shard lock (a session lock, pickShard) is only
// ever tried, at connect, so no writer waits for it.
//
// A key whose row is missing and not created by the batch (a fenced write
// of a never-activated key, or of one whose first Activate has not
// committed yet) is not locked; its command's fence check finds no row and
// fails, touching nothing.
//
// What is left: a deadlock with a writer that does not follow this order
// (an older build during a rolling upgrade) is still broken by the server,
// and Apply runs the aborted transaction again (maxAttempts).
const (
	insertOwnersSQL = `INSERT INTO owner_epochs (kind, id, epoch)
	SELECT k.kind, k.id, 0 FROM unnest($1::smallint[], $2::text[]) AS k(kind, id)
	ORDER BY k.kind, k.id COLLATE "C"
	ON CONFLICT (kind, id) DO NOTHING`
	// ORDER BY is applied before FOR UPDATE: rows are locked in key order.
	// The epochs read are the fences' (pipeFence).
	lockOwnersSQL = `SELECT o.kind, o.id, o.epoch FROM owner_epochs o
	JOIN unnest($1::smallint[], $2::text[]) AS k(kind, id) ON o.kind = k.kind AND o.id = k.id
	ORDER BY o.kind, o.id
	FOR UPDATE OF o`
)

// ownerKey is one session or plan owner.
type ownerKey struct {
	kind persistence.OwnerKind
	id   string
}

// ownerLocks lists the owner rows a batch locks up front, each sorted and
// without repeats: create are those a command may insert (created with
// epoch 0 first, which a fenced write of epoch 0 expects and an Activate
// increments), all is every key the batch writes. A row of epoch 0 fences
// exactly as a missing row does, so one left behind by a command that then
// failed on its own changes nothing.
type ownerLocks struct {
	create, all []ownerKey
}

// batchOwners returns the owner keys of batch. A command without a valid
// key adds none: it fails on its own (its validation, or the server's
// rejection of the id in its fence statement) before touching a row, and
// a key the server would reject must not fail the whole batch here.
func batchOwners(batch []persistence.Command) ownerLocks {
	var l ownerLocks
	add := func(kind persistence.OwnerKind, id string, epoch int64) {
		if id == "" || epoch < 0 || strings.IndexByte(id, 0) >= 0 || !utf8.ValidString(id) {
			return
		}
		k := ownerKey{kind, id}
		if epoch == 0 {
			l.create = append(l.create, k)
		}
		l.all = append(l.all, k)
	}
	for _, cmd := range batch {
		if cmd == nil {
			continue
		}
		// An activation carries no epoch (its Fence is zero) but takes
		// its key's: the row is created at epoch 0 when missing.
		if k := cmd.Touches().Activates; k.Kind == persistence.OwnerSession || k.Kind == persistence.OwnerPlan {
			add(k.Kind, k.ID, 0)
			continue
		}
		if f := cmd.Fence(); f.Kind != 0 {
			add(f.Kind, f.ID, f.Epoch)
		}
	}
	l.create, l.all = sortKeys(l.create), sortKeys(l.all)
	return l
}

// sortKeys sorts keys as the lock statements do ((kind, id), id in byte
// order) and drops repeats.
func sortKeys(keys []ownerKey) []ownerKey {
	slices.SortFunc(keys, func(a, b ownerKey) int {
		return cmp.Or(cmp.Compare(a.kind, b.kind), cmp.Compare(a.id, b.id))
	})
	return slices.Compact(keys)
}

// keyArgs are the ($1 kinds, $2 ids) arguments of the lock statements.
func keyArgs(keys []ownerKey) []any {
	kinds, ids := make([]int16, len(keys)), make([]string, len(keys))
	for i, k := range keys {
		kinds[i], ids[i] = int16(k.kind), k.id
	}
	return []any{kinds, ids}
}
