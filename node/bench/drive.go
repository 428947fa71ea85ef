package bench

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agentstate/agentstate/messages/ids"
)

// ProgressInterval is how often Config.Progress is called during a run.
const ProgressInterval = 200 * time.Millisecond

// Target is a system the workload drives. Its methods are called
// concurrently (Append from every client at once).
type Target interface {
	// CreateSessions creates n empty sessions and returns their ids.
	CreateSessions(ctx context.Context, n int) ([]string, error)
	// Append stores one message in a session and returns once it is
	// acknowledged (durable, as far as the target promises). A nil error
	// means acknowledged; any retrying is the target's, reported in
	// Ack.Attempts.
	Append(ctx context.Context, sessionID string, m Message) (Ack, error)
	// ReadBack returns everything stored in the session, in the session's
	// order.
	ReadBack(ctx context.Context, sessionID string) ([]Stored, error)
}

// PerClient is implemented by targets whose clients each hold state of
// their own, as a framework's session handle or a client's stream: Drive
// then asks for one Appender per client before the timed window and sends
// that client's appends through it instead of Target.Append.
type PerClient interface {
	NewClient(ctx context.Context, sessionID string) (Appender, error)
}

// Appender is one client's own path to a session; it is called by that
// client only, never concurrently.
type Appender interface {
	Append(ctx context.Context, m Message) (Ack, error)
}

// Committer is implemented by targets that can count their committed
// write transactions; Drive then reports Result.MeanBatch and
// Result.WriterBusy.
type Committer interface {
	// Commits returns the transactions committed so far and the time
	// spent applying transactions (committed or not) so far.
	Commits() (n int64, busy time.Duration)
}

// ServerCPU is implemented by targets served by another process of this
// machine: Drive adds the CPU time that process used in the timed window
// to CPUPerAppend.
type ServerCPU interface {
	ServerCPU() time.Duration
}

// Message is one append.
type Message struct {
	// ID is a ULID made by the client; unique over the run.
	ID string
	// Assistant alternates per client, so turns look like a conversation.
	Assistant bool
	Content   string
}

// Ack is an acknowledged append.
type Ack struct {
	// Seq is the position the target assigned, or -1 when it assigns
	// none (then only the read-back order is checked).
	Seq int64
	// Attempts is how many tries the target needed (≥ 1).
	Attempts int
}

// Stored is one stored message as read back.
type Stored struct {
	ID string
	// Seq is the stored position: the sequence, or for targets without
	// one the index in read-back order.
	Seq int64
}

// client is one caller: its sessions, its messages, and what it observed.
type client struct {
	// session is where a PerClient target's caller stays (c mod S).
	session int
	// sess[j] is the session of msgs[j] (append c + j·C goes to its
	// index mod S).
	sess []int32
	// own is the client's Appender when the target is a PerClient.
	own     Appender
	ids     *idPool
	msgs    []Message
	acked   []ackedMsg
	errors  int
	retries int
	first   error
}

// idPool hands out the run's message ids in the order they were made.
type idPool struct {
	next atomic.Int64
	ids  []string
}

func (p *idPool) take() string { return p.ids[p.next.Add(1)-1] }

// ackedMsg is one acknowledged append: its id, the position the target
// answered (-1: none), and when the client sent it and got the answer.
type ackedMsg struct {
	id         string
	session    int32
	seq        int64
	start, end time.Time
}

// Drive runs the workload of cfg (its Mode is only a label here) against t
// and verifies the result.
func Drive(ctx context.Context, cfg Config, t Target) (Result, error) {
	cfg = cfg.withDefaults()
	err := cfg.validate()
	if err != nil {
		return Result{}, err
	}
	res := newResult(cfg)

	pc, perClient := t.(PerClient)
	sessions := make([]string, cfg.Sessions)
	if cfg.NewSessions {
		if perClient {
			return res, fmt.Errorf("bench %s: new sessions need a target without per-client handles", cfg.Mode)
		}
	} else if sessions, err = t.CreateSessions(ctx, cfg.Sessions); err != nil {
		return res, fmt.Errorf("bench %s: create sessions: %w", cfg.Mode, err)
	}
	clients := plan(cfg, perClient)
	if perClient {
		for _, c := range clients {
			if c.own, err = pc.NewClient(ctx, sessions[c.session]); err != nil {
				return res, fmt.Errorf("bench %s: new client: %w", cfg.Mode, err)
			}
		}
	}

	var commits0 int64
	var busy0 time.Duration
	committer, _ := t.(Committer)
	if committer != nil {
		commits0, busy0 = committer.Commits()
	}
	var done atomic.Int64
	stopProgress := progress(cfg, &done)

	start := make(chan struct{})
	var wg sync.WaitGroup
	for _, c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			c.run(ctx, t, sessions, cfg.NewSessions, &done)
		}()
	}
	server, _ := t.(ServerCPU)
	serverCPU := func() time.Duration {
		if server == nil {
			return 0
		}
		return server.ServerCPU()
	}
	dbCPU := func() time.Duration {
		if cfg.dbCPU == nil {
			return 0
		}
		return cfg.dbCPU()
	}
	db0 := dbCPU()
	cpu0, scpu0, t0 := processCPU(), serverCPU(), time.Now()
	close(start)
	wg.Wait()
	res.Duration = time.Since(t0)
	cpu := processCPU() - cpu0 + serverCPU() - scpu0
	// A backend that exited in the window takes its CPU along.
	db := max(dbCPU()-db0, 0)
	stopProgress()

	var lat []time.Duration
	for _, c := range clients {
		for _, a := range c.acked {
			lat = append(lat, a.end.Sub(a.start))
		}
		res.Appends += len(c.acked)
		res.Errors += c.errors
		res.Retries += c.retries
		if c.first != nil && res.FirstError == "" {
			res.FirstError = c.first.Error()
		}
	}
	res.percentiles(lat)
	res.rate(cpu)
	if res.Appends > 0 {
		res.DBCPUPerAppend = db / time.Duration(res.Appends)
	}
	if committer != nil {
		n, busy := committer.Commits()
		if n -= commits0; n > 0 {
			res.MeanBatch = float64(res.Appends) / float64(n)
		}
		res.WriterBusy = float64(busy-busy0) / float64(res.Duration)
	}
	if err := verify(ctx, t, sessions, clients, &res); err != nil {
		return res, fmt.Errorf("bench %s: read back: %w", cfg.Mode, err)
	}
	return res, nil
}

// plan spreads cfg.Appends over the clients and builds every message's
// content up front, so that it is not timed. Message ids are made up front
// too (as the raw ceiling's are), in one ordered pool that clients draw
// from when they first send a message: so ids reach the store roughly in id
// order, as ULIDs that real clients make at send time do — which the
// store's (message_id, session_id) index relies on. Ids made per client up
// front would arrive scattered over the whole range, as no client's would.
//
// Caller c's j-th append is append i = c + j·C, to session i mod S; a
// PerClient target's caller stays on session c mod S (its handle is bound
// to one session).
func plan(cfg Config, perClient bool) []*client {
	n := cfg.Callers
	content := strings.Repeat("x", cfg.MessageBytes)
	pool := &idPool{ids: make([]string, cfg.Appends)}
	for i := range pool.ids {
		pool.ids[i] = ids.New()
	}
	clients := make([]*client, n)
	for i := range clients {
		k := cfg.Appends / n
		if i < cfg.Appends%n {
			k++
		}
		c := &client{session: i % cfg.Sessions, msgs: make([]Message, k), sess: make([]int32, k), ids: pool,
			acked: make([]ackedMsg, 0, k)}
		for j := range c.msgs {
			c.msgs[j] = Message{Assistant: j%2 == 1, Content: content}
			c.sess[j] = int32((i + j*n) % cfg.Sessions)
			if perClient {
				c.sess[j] = int32(c.session)
			}
		}
		clients[i] = c
	}
	return clients
}

// With fresh set, each append's session is created first (timed with it,
// counted as one): sessions[c.sess[j]] is this client's alone to fill.
func (c *client) run(ctx context.Context, t Target, sessions []string, fresh bool, done *atomic.Int64) {
	for j := range c.msgs {
		m := &c.msgs[j]
		m.ID = c.ids.take()
		t0 := time.Now()
		var ack Ack
		var err error
		if fresh {
			var made []string
			if made, err = t.CreateSessions(ctx, 1); err == nil {
				sessions[c.sess[j]] = made[0]
			}
		}
		sessionID := sessions[c.sess[j]]
		switch {
		case err != nil:
		case c.own != nil:
			ack, err = c.own.Append(ctx, *m)
		default:
			ack, err = t.Append(ctx, sessionID, *m)
		}
		done.Add(1)
		if ack.Attempts > 1 {
			c.retries += ack.Attempts - 1
		}
		if err != nil {
			c.errors++
			if c.first == nil {
				c.first = err
			}
			continue
		}
		c.acked = append(c.acked, ackedMsg{id: m.ID, session: c.sess[j], seq: ack.Seq, start: t0, end: time.Now()})
	}
}

// progress calls cfg.Progress until the returned stop is called, which
// reports the final count once more and waits for the reporter to end.
func progress(cfg Config, done *atomic.Int64) (stop func()) {
	if cfg.Progress == nil {
		return func() {}
	}
	quit := make(chan struct{})
	ended := make(chan struct{})
	go func() {
		defer close(ended)
		tick := time.NewTicker(ProgressInterval)
		defer tick.Stop()
		for {
			select {
			case <-tick.C:
				cfg.Progress(int(done.Load()), cfg.Appends)
			case <-quit:
				cfg.Progress(int(done.Load()), cfg.Appends)
				return
			}
		}
	}()
	return func() { close(quit); <-ended }
}
