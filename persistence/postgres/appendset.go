package postgres

import (
	sessionv1 "github.com/agentstate/agentstate/messages/agentstate/session/v1"
	"github.com/agentstate/agentstate/persistence"
	"github.com/agentstate/agentstate/persistence/sqlstore"
	"github.com/jackc/pgx/v5"
)

// The append set. In the pipelined attempt, consecutive appends do not each
// queue their statements: their rows gather in one appendSet, written by
// two statements whatever its size — the read of the remembered digests of
// its message ids, and one that inserts every message and moves every
// session's next_sequence (and updated_at) from the sequence its appends
// expected, a compare-and-set per session. The set is queued (flushSet) before any other
// statement is, so statements still run on the server in command order: a
// command that reads or writes anything else sees what earlier appends
// wrote.
//
// The checks are the pipeline's, summed: every message went in (none was
// stored before) and every session row matched its expected next sequence.
// When either fails, or the server refuses a row, the attempt fails with
// errPipeline and the replay with savepoints tells each command's result.

// appendSetSQL inserts the set's messages, skipping stored ids (a retried
// turn: the count tells), and moves each session's next_sequence by its
// rows from where its first append expected it, and its updated_at when an
// append of the set gave one; it answers how many rows went in and how many
// sessions matched.
const appendSetSQL = `WITH ins AS (INSERT INTO session_messages (session_id, sequence, message_id, role, content,
	metadata_json, created_at, event_at, item_key, kind)
	SELECT * FROM unnest($1::text[], $2::bigint[], $3::text[], $4::bigint[], $5::text[], $6::text[], $7::bigint[],
		$8::bigint[], $9::text[], $10::text[])
	ON CONFLICT (session_id, message_id) DO NOTHING RETURNING 1),
upd AS (UPDATE sessions s SET next_sequence = s.next_sequence + u.n,
	updated_at = CASE WHEN u.set_at THEN u.at ELSE s.updated_at END
	FROM unnest($11::text[], $12::bigint[], $13::bigint[], $14::boolean[], $15::bigint[]) AS u(id, start, n, set_at, at)
	WHERE s.session_id = u.id AND s.next_sequence = u.start
	RETURNING 1)
SELECT (SELECT count(*) FROM ins), (SELECT count(*) FROM upd)`

// removedSetSQL reads the remembered digests of the set's (session,
// message id) pairs (persistence/removedids.go).
const removedSetSQL = `SELECT r.session_id, r.message_id, r.digest FROM removed_message_ids r
	JOIN unnest($1::text[], $2::text[]) AS k(session_id, message_id)
	ON r.session_id = k.session_id AND r.message_id = k.message_id`

// appendSet is the rows of the appends gathered since the last statement
// was queued, as the column arrays of appendSetSQL.
type appendSet struct {
	// Messages: one entry per row.
	sids, ids, contents, metas, keys, kinds []string
	seqs, roles, created, events            []int64
	// Sessions: one entry per session, at its index in bySession.
	sessions        []string
	starts, counts  []int64
	setAt           []bool
	ats             []int64
	bySession       map[string]int
	byMessage       map[msgKey]*sessionv1.Message
	removedSessions []string
	removedIDs      []string
}

// msgKey is a message id within its session.
type msgKey struct{ session, id string }

func (s *appendSet) empty() bool { return len(s.sessions) == 0 && len(s.removedIDs) == 0 }

// next is the next sequence the set leaves session id at, and whether the
// set holds it.
func (s *appendSet) next(id string) (int64, bool) {
	i, ok := s.bySession[id]
	if !ok {
		return 0, false
	}
	return s.starts[i] + s.counts[i], true
}

// session returns the index of session id, adding it at start.
func (s *appendSet) session(id string, start int64) int {
	if s.bySession == nil {
		s.bySession = make(map[string]int)
	}
	if i, ok := s.bySession[id]; ok {
		return i
	}
	i := len(s.sessions)
	s.bySession[id] = i
	s.sessions = append(s.sessions, id)
	s.starts = append(s.starts, start)
	s.counts = append(s.counts, 0)
	s.setAt = append(s.setAt, false)
	s.ats = append(s.ats, 0)
	return i
}

// watch adds message m of session sid to the check of remembered digests
// of removed ids: one that another content uses fails the attempt, and the
// replay refuses that turn (appendMessages). Every turn's messages are
// watched, whether or not the turn goes in, as appendMessages checks them
// before the turn's own checks. Digests are computed only for the ids
// found, so an append to a session no replacement touched pays only its
// share of one index probe per id.
func (s *appendSet) watch(sid string, m *sessionv1.Message) {
	if s.byMessage == nil {
		s.byMessage = make(map[msgKey]*sessionv1.Message)
	}
	k := msgKey{sid, m.GetMessageId()}
	if _, dup := s.byMessage[k]; dup {
		// A repeated id fails the insert's count, whichever content
		// the digest check compares.
		return
	}
	s.byMessage[k] = m
	s.removedSessions = append(s.removedSessions, sid)
	s.removedIDs = append(s.removedIDs, k.id)
}

// add gathers one turn's messages for session sid, from sequence seq on
// (where the session stands once the set's earlier rows are in), and
// returns the stored messages as the turn's result holds them. It fails,
// gathering nothing, only for a message that checkTurn refuses.
func (s *appendSet) add(sid string, ms []*sessionv1.Message, seq, updatedAt int64, setAt bool) ([]*sessionv1.Message, error) {
	for _, m := range ms {
		if _, err := persistence.MessageNanos(m); err != nil {
			return nil, err
		}
	}
	i := s.session(sid, seq)
	out := make([]*sessionv1.Message, len(ms))
	stored := make([]sessionv1.Message, len(ms))
	for j, m := range ms {
		created, _ := persistence.MessageNanos(m)
		meta := sqlstore.OrEmptyObject(m.MetadataJson)
		s.sids = append(s.sids, sid)
		s.seqs = append(s.seqs, seq+int64(j))
		s.ids = append(s.ids, m.MessageId)
		s.roles = append(s.roles, int64(m.Role))
		s.contents = append(s.contents, m.Content)
		s.metas = append(s.metas, meta)
		s.created = append(s.created, created)
		s.events = append(s.events, persistence.EventNanos(m))
		s.keys = append(s.keys, m.GetItemKey())
		s.kinds = append(s.kinds, m.GetKind())
		o := &stored[j]
		o.SessionId, o.MessageId, o.Sequence = sid, m.MessageId, seq+int64(j)
		o.Role, o.Content, o.MetadataJson, o.CreatedAt = m.Role, m.Content, meta, persistence.Stamp(created)
		o.ItemKey, o.Kind = m.ItemKey, m.Kind
		out[j] = o
	}
	s.counts[i] += int64(len(ms))
	if setAt {
		s.setAt[i], s.ats[i] = true, updatedAt
	}
	return out, nil
}

// flushSet queues the gathered appends' statements into the pipeline, with
// their checks, and starts a new set: pgx encodes a queued statement's
// arguments only when the batch is sent, so the queued arrays must stay as
// they are.
func (a *applier) flushSet() {
	s := a.set
	if s.empty() {
		return
	}
	a.set = appendSet{}
	if a.pipe == nil {
		a.pipe = &pgx.Batch{}
	}
	if len(s.removedIDs) > 0 {
		a.pipe.Queue(removedSetSQL, s.removedSessions, s.removedIDs).Query(func(rows pgx.Rows) error {
			defer rows.Close()
			var k msgKey
			var digest string
			for rows.Next() {
				if err := rows.Scan(&k.session, &k.id, &digest); err != nil {
					return err
				}
				if m := s.byMessage[k]; m != nil && persistence.ContentDigest(m) != digest {
					return errPipeline
				}
			}
			return rows.Err()
		})
	}
	if len(s.sessions) == 0 {
		return
	}
	rows, sessions := int64(len(s.ids)), int64(len(s.sessions))
	a.pipe.Queue(appendSetSQL, s.sids, s.seqs, s.ids, s.roles, s.contents, s.metas, s.created, s.events, s.keys, s.kinds,
		s.sessions, s.starts, s.counts, s.setAt, s.ats).
		QueryRow(func(row pgx.Row) error {
			var inserted, updated int64
			if err := row.Scan(&inserted, &updated); err != nil || inserted != rows || updated != sessions {
				return errPipeline
			}
			return nil
		})
}
