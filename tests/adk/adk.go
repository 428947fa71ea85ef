package main

import (
	"context"
	"database/sql"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/agentstate/agentstate/node/bench"
	"google.golang.org/adk/session"
	"google.golang.org/adk/session/database"
	"google.golang.org/genai"
	"gorm.io/driver/sqlite"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"
)

// The adk side's identity: adk keys sessions by (app, user, session).
const (
	appName = "bench"
	userID  = "bench"
	// maxAttempts bounds one append's retries after stale-session or
	// lock failures; each retry first re-reads the session.
	maxAttempts = 50
)

// adkTarget is adk-go's database session service as a bench.Target. It is
// also a bench.PerClient: in mode adk every client holds its own handle,
// as every concurrent runner invocation does.
type adkTarget struct {
	svc session.Service
	db  *sql.DB
	// serialized: one handle per session behind a mutex (adk-serialized);
	// otherwise a handle per client (adk).
	serialized bool
	mu         sync.Mutex
	shared     map[string]*sharedHandle
}

type sharedHandle struct {
	mu   sync.Mutex
	sess session.Session
}

// adkDSN is the DSN of adk's database: WAL and the run's durability, with
// the busy timeout and IMMEDIATE transactions that let concurrent writers
// wait for the lock rather than fail.
func adkDSN(path, synchronous string) string {
	q := url.Values{}
	q.Set("_journal_mode", "WAL")
	q.Set("_synchronous", strings.ToUpper(synchronous))
	q.Set("_busy_timeout", "5000")
	q.Set("_txlock", "immediate")
	q.Set("_foreign_keys", "1")
	return (&url.URL{Scheme: "file", Path: path, RawQuery: q.Encode()}).String()
}

func openADK(path, synchronous string, serialized bool) (*adkTarget, error) {
	// The pool gorm.Open(sqlite.Open(dsn)) would make, opened here so that
	// it can be closed: the service keeps its *gorm.DB to itself.
	db, err := sql.Open("sqlite3", adkDSN(path, synchronous))
	if err != nil {
		return nil, err
	}
	svc, err := database.NewSessionService(sqlite.New(sqlite.Config{Conn: db}), &gorm.Config{Logger: logger.Discard})
	if err == nil {
		err = database.AutoMigrate(svc)
	}
	if err != nil {
		db.Close()
		return nil, err
	}
	return &adkTarget{svc: svc, db: db, serialized: serialized, shared: map[string]*sharedHandle{}}, nil
}

func (a *adkTarget) Close() error { return a.db.Close() }

func (a *adkTarget) CreateSessions(ctx context.Context, n int) ([]string, error) {
	out := make([]string, n)
	for i := range out {
		r, err := a.svc.Create(ctx, &session.CreateRequest{AppName: appName, UserID: userID})
		if err != nil {
			return nil, err
		}
		out[i] = r.Session.ID()
		if a.serialized {
			a.shared[out[i]] = &sharedHandle{sess: r.Session}
		}
	}
	return out, nil
}

// fresh re-reads a session's handle; one recent event is enough, the
// handle's update time is what AppendEvent checks.
func (a *adkTarget) fresh(ctx context.Context, sessionID string) (session.Session, error) {
	r, err := a.svc.Get(ctx, &session.GetRequest{AppName: appName, UserID: userID, SessionID: sessionID, NumRecentEvents: 1})
	if err != nil {
		return nil, err
	}
	return r.Session, nil
}

// Append serves a target without per-client handles: it appends through a
// freshly read handle, retrying stale-handle failures as a client would.
func (a *adkTarget) Append(ctx context.Context, sessionID string, m bench.Message) (bench.Ack, error) {
	c, err := a.NewClient(ctx, sessionID)
	if err != nil {
		return bench.Ack{Seq: -1, Attempts: 1}, err
	}
	return c.Append(ctx, m)
}

func (a *adkTarget) NewClient(ctx context.Context, sessionID string) (bench.Appender, error) {
	if a.serialized {
		return &adkClient{t: a, id: sessionID, shared: a.shared[sessionID]}, nil
	}
	s, err := a.fresh(ctx, sessionID)
	if err != nil {
		return nil, err
	}
	return &adkClient{t: a, id: sessionID, sess: s}, nil
}

// adkClient is one client: its own handle, or the session's shared one.
type adkClient struct {
	t      *adkTarget
	id     string
	sess   session.Session
	shared *sharedHandle
}

func event(m bench.Message) *session.Event {
	role, author := genai.RoleUser, "user"
	if m.Assistant {
		role, author = genai.RoleModel, "assistant"
	}
	ev := session.NewEvent("bench")
	ev.ID = m.ID
	ev.Author = author
	ev.Content = genai.NewContentFromText(m.Content, genai.Role(role))
	return ev
}

// Append returns Seq -1: adk has no sequence, its order is the read-back
// order (events by timestamp), so bench checks order and completeness only.
func (c *adkClient) Append(ctx context.Context, m bench.Message) (bench.Ack, error) {
	if c.shared != nil {
		c.shared.mu.Lock()
		defer c.shared.mu.Unlock()
		return bench.Ack{Seq: -1, Attempts: 1}, c.t.svc.AppendEvent(ctx, c.shared.sess, event(m))
	}
	var err error
	for attempt := 1; ; attempt++ {
		ev := event(m)
		ev.Timestamp = time.Now()
		if err = c.t.svc.AppendEvent(ctx, c.sess, ev); err == nil {
			return bench.Ack{Seq: -1, Attempts: attempt}, nil
		}
		if attempt == maxAttempts || ctx.Err() != nil {
			return bench.Ack{Seq: -1, Attempts: attempt}, err
		}
		// Stale handle (another client appended since it was read) or a
		// lock timeout: both rolled back, so re-read and retry the same
		// event id.
		s, ferr := c.t.fresh(ctx, c.id)
		if ferr != nil {
			return bench.Ack{Seq: -1, Attempts: attempt}, fmt.Errorf("%w; re-reading the session: %v", err, ferr)
		}
		c.sess = s
	}
}

func (a *adkTarget) ReadBack(ctx context.Context, sessionID string) ([]bench.Stored, error) {
	r, err := a.svc.Get(ctx, &session.GetRequest{AppName: appName, UserID: userID, SessionID: sessionID})
	if err != nil {
		return nil, err
	}
	// Seq is the read-back index: adk's order is its stored order.
	var out []bench.Stored
	for ev := range r.Session.Events().All() {
		out = append(out, bench.Stored{ID: ev.ID, Seq: int64(len(out))})
	}
	return out, nil
}
