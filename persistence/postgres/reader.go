package postgres

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"

	sessionv1 "github.com/agentstate/agentstate/messages/agentstate/session/v1"
	"github.com/agentstate/agentstate/messages/errs"
	"github.com/agentstate/agentstate/persistence"
	"github.com/agentstate/agentstate/persistence/sqlstore"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// reader is the store's own part of its sqlstore.Reader (sqlstore.Own),
// on the read-only pool. Each method is one statement (ListAudit may add a second to tell an unknown cursor from an
// empty page), so it sees what was committed when the statement began and
// holds no snapshot after it returns.
type reader struct {
	pool *pgxpool.Pool
	// settled is the highest head AuditBounds returned: every position at
	// or below it stays settled, so a later read never reports less,
	// though a writer may then hold a chain whose tail lags below it
	// (feed.go).
	settled atomic.Int64
}

// sessionSelect yields one row per (session, linked plan), sessions in id
// order and links in insertion order; a session without links has one row
// with NULL link columns. The inner query picks the sessions.
const sessionSelect = `SELECT s.session_id, s.actor_name, s.namespace, s.automation, s.metadata_json, s.state,
	s.input_tokens, s.output_tokens, s.cost, s.created_at, s.updated_at, s.closed_at, s.next_sequence,
	s.client_key, s.expires_at, s.first_sequence, l.plan_id, l.phase, l.state
	FROM (%s) s LEFT JOIN session_links l ON l.session_id = s.session_id
	ORDER BY s.session_id, l.id`

func (r *reader) sessions(ctx context.Context, inner string, args ...any) ([]*sessionv1.Session, error) {
	rows, err := r.pool.Query(ctx, strings.Replace(sessionSelect, "%s", inner, 1), args...)
	if err != nil {
		return nil, storeErr("read sessions", err)
	}
	var out []*sessionv1.Session
	var cur *sessionv1.Session
	var id, actor, ns, automation, meta, key string
	var state, in, outTokens, created, updated, closed, count, expires, first int64
	var cost float64
	var planID, phase, lstate *string
	_, err = pgx.ForEachRow(rows, []any{&id, &actor, &ns, &automation, &meta, &state, &in, &outTokens, &cost,
		&created, &updated, &closed, &count, &key, &expires, &first, &planID, &phase, &lstate}, func() error {
		if cur == nil || cur.SessionId != id {
			cur = &sessionv1.Session{SessionId: id, ActorName: actor, Namespace: ns, Automation: automation,
				MetadataJson: meta, State: sessionv1.SessionState(state),
				TokenUsage: &sessionv1.TokenUsage{InputTokens: in, OutputTokens: outTokens, Cost: persistence.ReadableCost(cost)},
				CreatedAt:  persistence.Stamp(created), UpdatedAt: persistence.Stamp(updated), ClosedAt: persistence.Stamp(closed), MessageCount: count,
				ClientKey: key, ExpiresAt: persistence.Stamp(expires), FirstSequence: first}
			out = append(out, cur)
		}
		if planID != nil {
			cur.LinkedPlans = append(cur.LinkedPlans, &sessionv1.LinkedPlan{PlanId: *planID, Phase: *phase, State: *lstate})
		}
		return nil
	})
	if err != nil {
		return nil, storeErr("read sessions", err)
	}
	return out, nil
}

func (r *reader) GetSession(ctx context.Context, sessionID string) (*sessionv1.Session, error) {
	out, err := r.sessions(ctx, `SELECT * FROM sessions WHERE session_id = $1 AND state != $2`, sessionID, int64(persistence.SessionStateStaged))
	if err != nil {
		return nil, err
	}
	if len(out) == 0 {
		return nil, errs.NotFound("session %s not found", sessionID)
	}
	return out[0], nil
}

func (r *reader) ListSessions(ctx context.Context, f persistence.SessionFilter) ([]*sessionv1.Session, error) {
	inner, args := sqlstore.SessionsQuery(dialect{}, f)
	return r.sessions(ctx, inner, args...)
}

func (r *reader) ListMessages(ctx context.Context, sessionID string, from int64, limit int) ([]*sessionv1.Message, error) {
	// The byte cap is applied by the server: a row past it is never sent
	// (pgx would have to read to the end of a result it stopped using).
	// octet_length of a stored value reads its size, not the value.
	rows, err := r.pool.Query(ctx, `SELECT `+pageColumns+`
		FROM (SELECT `+pageColumns+`,
			sum(octet_length(content) + octet_length(metadata_json) + $4) OVER (ORDER BY sequence) AS upto
			FROM session_messages WHERE session_id = $1 AND sequence >= $2
			AND NOT EXISTS (SELECT 1 FROM sessions WHERE session_id = $1 AND state = $6)
			ORDER BY sequence LIMIT $3) page
		WHERE upto <= $5 OR sequence = (SELECT min(sequence) FROM session_messages WHERE session_id = $1 AND sequence >= $2)
		ORDER BY sequence`,
		sessionID, from, persistence.ClampLimit(limit), persistence.MessageOverhead, persistence.MaxPageBytes, int64(persistence.SessionStateStaged))
	return messages(rows, err, sessionID)
}

// pageColumns are what messages reads of each row.
const pageColumns = `sequence, message_id, role, content, metadata_json, created_at, event_at, item_key, kind`

// messages reads the rows of a message query (its page, in sequence
// order).
func messages(rows pgx.Rows, err error, sessionID string) ([]*sessionv1.Message, error) {
	if err != nil {
		return nil, storeErr("list messages", err)
	}
	var out []*sessionv1.Message
	var m sessionv1.Message
	var role, created, event int64
	_, err = pgx.ForEachRow(rows, []any{&m.Sequence, &m.MessageId, &role, &m.Content, &m.MetadataJson, &created, &event,
		&m.ItemKey, &m.Kind}, func() error {
		out = append(out, &sessionv1.Message{SessionId: sessionID, Sequence: m.Sequence, MessageId: m.MessageId,
			Role: sessionv1.Role(role), Content: m.Content, MetadataJson: m.MetadataJson, CreatedAt: persistence.Stamp(created),
			EventTime: persistence.Stamp(event), ItemKey: m.ItemKey, Kind: m.Kind})
		return nil
	})
	if err != nil {
		return nil, storeErr("list messages", err)
	}
	return out, nil
}

func (r *reader) AuditAnchor(ctx context.Context) (string, error) {
	var hash string
	err := r.pool.QueryRow(ctx, `SELECT anchor_hash FROM audit_chains WHERE chain = 0`).Scan(&hash)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", errs.Internal("audit anchor: the chain row is missing")
	}
	return hash, storeErr("audit anchor", err)
}
