package postgres

import (
	"context"
	"math/rand/v2"

	"github.com/jackc/pgx/v5"
)

// usageShards is how many shards of the totals of stored bytes writers
// pick from (usage.go): a namespace's total is read as a sum of up to
// that many rows.
const usageShards = 16

// usageShardLockClass is the class of the writers' shard locks
// (tryShardSQL).
const usageShardLockClass int32 = 0x75736864 // "ushd"

// tryShardSQL tries the session lock of shard $2 of the schema's totals:
// the writer connection that holds it is the shard's only writer while it
// lives (the server drops the lock with the connection). It is only ever
// tried, so no writer waits for it.
const tryShardSQL = `SELECT pg_try_advisory_lock($1::int4, hashtext(COALESCE(current_schema(), '') || ':' || $2::int))`

// pickShard gives conn, a new writer connection, a shard of the totals of
// its own: the first one no other writer connection of the schema holds,
// so two live writers, up to usageShards of them, never add to one row.
// The audit chains are picked per key instead (chains.go), because a
// key's entries must stay on one chain; a total has no such bound, and a
// shard per writer is the one choice under which members never collide.
// Past usageShards live writers, a writer shares a random shard: correct
// still, its commits then take turns with that shard's other writers.
func pickShard(ctx context.Context, conn *pgx.Conn) (int16, error) {
	for shard := range int16(usageShards) {
		var held bool
		if err := conn.QueryRow(ctx, tryShardSQL, usageShardLockClass, shard).Scan(&held); err != nil {
			return 0, err
		}
		if held {
			return shard, nil
		}
	}
	return int16(rand.IntN(usageShards)), nil
}
