package sqlite

import (
	"strings"

	sessionv1 "github.com/agentstate/agentstate/messages/agentstate/session/v1"
	"github.com/agentstate/agentstate/messages/errs"
	"github.com/agentstate/agentstate/persistence"
	"github.com/agentstate/agentstate/persistence/sqlstore"
	sqlite3 "github.com/mattn/go-sqlite3"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// Multi-row message inserts: the message rows of all the append commands
// of an attempt without savepoints wait in applier.msgs and go in
// statements of these many rows, largest first (powers of two, so a
// remainder takes at most eight statements and the writer's statement
// cache holds every size). One statement per row costs a trip through
// database/sql and the driver and a step per row, on the writer, which is
// the one serial resource of the append path; a busy transaction carries
// dozens of sessions with a few rows each, so the rows are pooled across
// commands rather than per command.
var messageChunks = [...]int{256, 128, 64, 32, 16, 8, 4, 2, 1}

var insertMessagesSQL = map[int]string{}

func init() {
	const row = `(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`
	for _, n := range messageChunks {
		insertMessagesSQL[n] = insertMessageSQL[:strings.Index(insertMessageSQL, "VALUES")] + "VALUES " +
			strings.Repeat(row+", ", n-1) + row
	}
}

// errConflictInBulk fails an attempt without savepoints whose multi-row
// insert met a stored message id (a retried turn) or a taken sequence. It
// is a command-level error on purpose: Apply then rolls the attempt back
// and replays the batch with savepoints, where turn inserts row by row and
// tells the outcomes apart. Retried turns are rare, so the replay is too.
var errConflictInBulk = errs.FailedPrecondition("append met a stored message id or a taken sequence; replayed row by row")

// errQuotaInBulk fails an attempt without savepoints one of whose turns
// would take a namespace past its quota of stored bytes. Command-level on
// purpose, as errConflictInBulk: the replay decides it turn by turn,
// where a retried turn (stored already, adding nothing) is told apart.
var errQuotaInBulk = errs.FailedPrecondition("an append would pass a namespace's quota of stored bytes; replayed row by row")

func quotaInBulk(err error) error {
	if persistence.IsCommandError(err) {
		return errQuotaInBulk
	}
	return err
}

// appendBulk stores every valid turn of c from c.NextSequence on, in
// multi-row statements, and fills turns (one result per turn). It returns
// the next sequence after the stored rows, and the session's state after
// them ("" when unchanged). Only for attempts without savepoints: a
// conflict leaves the statement's rows undone but the attempt's earlier
// work in place, which only a rollback clears. Deltas are applied as if
// every turn were new; one that is not (a retry) conflicts, and the replay
// with savepoints applies only the new turns' deltas.
func (a *applier) appendBulk(c *persistence.AppendMessages, turns []persistence.TurnResult, at int64) (_ int64, _ string, added int64, _ error) {
	next := c.NextSequence
	cur, state := c.State, ""
	var lastIn, lastOut *timestamppb.Timestamp
	gate, err := a.hasRemovedIDs(c.SessionID)
	if err != nil {
		return 0, "", 0, err
	}
	for i := range c.Turns {
		t := &c.Turns[i]
		if err := t.Check(c.SessionID); err != nil {
			turns[i].Err = err
			continue
		}
		if gate {
			bad, err := a.removedReuse(c.SessionID, t)
			if err != nil {
				return 0, "", 0, err
			}
			if bad != nil {
				turns[i].Err = bad
				continue
			}
		}
		var change int64
		if t.HasDelta() {
			after, scopes, err := a.turnDeltas(c.SessionID, cur, t)
			if err != nil {
				if !persistence.IsCommandError(err) {
					return 0, "", 0, err
				}
				turns[i].Err = err
				continue
			}
			if t.State != nil {
				change = persistence.StateChange(cur, after)
			}
			if err := a.usage.CheckTurn(c.SessionID, t.Messages, change, scopes); err != nil {
				return 0, "", 0, quotaInBulk(err)
			}
			if err := a.WriteScopes(scopes, at); err != nil {
				return 0, "", 0, err
			}
			if t.State != nil {
				cur, state = after, after
			}
		} else if err := a.usage.CheckTurn(c.SessionID, t.Messages, 0, nil); err != nil {
			return 0, "", 0, quotaInBulk(err)
		}
		// Booked as queued (the attempt stores every queued row, or is
		// abandoned whole): at once where quotas are checked, else by the
		// advance, which tells the session's namespace.
		if n := persistence.MessagesBytes(t.Messages) + change; a.usage.Checks() {
			a.usage.AddSession(c.SessionID, n)
		} else {
			added += n
		}
		out := make([]*sessionv1.Message, len(t.Messages))
		for j, m := range t.Messages {
			// The answer carries the stored time (nanoseconds), as a
			// read returns it; a turn's messages usually share one.
			// checkTurn found every time storable.
			if m.CreatedAt != lastIn {
				lastIn, lastOut = m.CreatedAt, persistence.Stamp(persistence.CheckedNanos(m.CreatedAt))
			}
			out[j] = &sessionv1.Message{SessionId: c.SessionID, MessageId: m.MessageId, Sequence: next,
				Role: m.Role, Content: m.Content, MetadataJson: sqlstore.OrEmptyObject(m.MetadataJson), CreatedAt: lastOut,
				EventTime: m.EventTime, ItemKey: m.ItemKey, Kind: m.Kind}
			next++
		}
		turns[i].Messages = out
		a.msgs = append(a.msgs, out...)
	}
	for len(a.msgs) >= messageChunks[0] {
		if err := a.insertMessages(a.msgs[:messageChunks[0]]); err != nil {
			return 0, "", 0, err
		}
		a.msgs = a.msgs[messageChunks[0]:]
	}
	// The entries follow their turns' rows, in turn order, as turn
	// writes them.
	for i := range c.Turns {
		if turns[i].Err == nil {
			if err := a.Audit(c.Turns[i].Audit); err != nil {
				return 0, "", 0, err
			}
		}
	}
	return next, state, added, nil
}

// flushAppends applies what the attempt's appends queued: their session
// advances and their message rows.
func (a *applier) flushAppends() error {
	if err := a.flushAdvances(); err != nil {
		return err
	}
	return a.flushMessages()
}

// flushMessages writes the message rows still queued. The attempt calls it
// (through flushAppends) before any command other than an append (a delete
// must find the rows it removes) and before the audit rows and the commit.
func (a *applier) flushMessages() error {
	return inChunks(&a.msgs, messageChunks[:], a.insertMessages)
}

// inChunks hands what *items holds to write in statements of the largest
// of sizes (descending, ending in 1) that fits what is left, and empties
// *items. On an error the items not yet written stay in *items; the attempt
// is abandoned then anyway.
func inChunks[T any](items *[]T, sizes []int, write func([]T) error) error {
	for len(*items) > 0 {
		n := 1
		for _, k := range sizes {
			if len(*items) >= k {
				n = k
				break
			}
		}
		if err := write((*items)[:n]); err != nil {
			return err
		}
		*items = (*items)[n:]
	}
	*items = nil
	return nil
}

// insertMessages writes ms (len one of messageChunks) in one statement.
// The rows may belong to several commands, so its errors name none: they
// are command-level on purpose, and the attempt's replay with savepoints
// finds the command and the real cause.
func (a *applier) insertMessages(ms []*sessionv1.Message) error {
	args := a.args[:0]
	for _, m := range ms {
		// appendBulk made these messages from ones checkTurn checked.
		args = append(args, m.SessionId, m.Sequence, m.MessageId, int64(m.Role), m.Content, m.MetadataJson,
			persistence.CheckedNanos(m.CreatedAt), persistence.EventNanos(m), a.indexed(), m.ItemKey, m.Kind)
	}
	err := a.insert(insertMessagesSQL[len(ms)], args)
	clear(args)
	a.args = args[:0]
	a.inserted(len(ms))
	switch constraint(err) {
	case sqlite3.ErrConstraintUnique, sqlite3.ErrConstraintPrimaryKey:
		return errConflictInBulk
	case sqlite3.ErrConstraintForeignKey:
		return errs.NotFound("a session of the batch was not found; replayed command by command")
	}
	return err
}
