package main

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agentstate/agentstate/messages/ids"
)

// config is one measurement; the fields mean what node bench's flags mean.
type config struct {
	Sessions, Clients, Appends, MessageBytes int
	Synchronous                              string
	DataDir                                  string
}

// Result has node bench's JSON field names, so `node bench report` can
// merge and plot both.
type Result struct {
	Mode          string        `json:"mode"`
	Sessions      int           `json:"sessions"`
	Clients       int           `json:"clients"`
	MessageBytes  int           `json:"message_bytes"`
	Synchronous   string        `json:"synchronous"`
	Appends       int           `json:"appends"`
	Errors        int           `json:"errors"`
	Retries       int           `json:"retries"`
	FirstError    string        `json:"first_error,omitempty"`
	Duration      time.Duration `json:"duration_ns"`
	AppendsPerSec float64       `json:"appends_per_sec"`
	P50           time.Duration `json:"p50_ns"`
	P99           time.Duration `json:"p99_ns"`
	P999          time.Duration `json:"p999_ns"`
	CPUPerAppend  time.Duration `json:"cpu_per_append_ns"`
	MeanBatch     float64       `json:"mean_batch,omitempty"`
	Stored        int           `json:"stored"`
	Missing       int           `json:"missing"`
	Duplicates    int           `json:"duplicates"`
	Gaps          int           `json:"gaps"`
	OutOfOrder    int           `json:"out_of_order"`
	Misplaced     int           `json:"misplaced"`
	Unacked       int           `json:"unacked"`
	Complete      bool          `json:"complete"`
}

// target is a system under test. NewClient is called once per client
// before the timed window; a client's Append is called from one goroutine.
type target interface {
	CreateSessions(ctx context.Context, n int) ([]string, error)
	NewClient(ctx context.Context, sessionID string) (appender, error)
	// ReadBack returns the session's stored message ids in its order and,
	// where the system has them, their sequences (else -1).
	ReadBack(ctx context.Context, sessionID string) ([]stored, error)
}

type appender interface {
	// Append returns the sequence assigned (-1: none), the attempts it
	// took, and nil once the message is acknowledged.
	Append(ctx context.Context, m message) (seq int64, attempts int, err error)
}

type message struct {
	ID        string
	Assistant bool
	Content   string
}

type stored struct {
	ID  string
	Seq int64
}

type acked struct {
	id         string
	seq        int64
	start, end time.Time
}

type client struct {
	session int
	app     appender
	msgs    []message
	acked   []acked
	errors  int
	retries int
	first   error
}

// drive runs the workload against t and verifies it; done counts answered
// appends for the progress line.
func drive(ctx context.Context, cfg config, mode string, t target, done *atomic.Int64) (Result, error) {
	res := Result{Mode: mode, Sessions: cfg.Sessions, Clients: cfg.Clients,
		MessageBytes: cfg.MessageBytes, Synchronous: cfg.Synchronous}
	sessions, err := t.CreateSessions(ctx, cfg.Sessions)
	if err != nil {
		return res, fmt.Errorf("%s: create sessions: %w", mode, err)
	}
	n := cfg.Sessions * cfg.Clients
	content := strings.Repeat("x", cfg.MessageBytes)
	// Ids are made up front in one ordered pool that clients draw from at
	// send time, as node bench does (see its plan): they reach the store in
	// roughly id order, as ULIDs made at send time do, and are not timed.
	pool := make([]string, cfg.Appends)
	for i := range pool {
		pool[i] = ids.New()
	}
	var taken atomic.Int64
	clients := make([]*client, n)
	for i := range clients {
		k := cfg.Appends / n
		if i < cfg.Appends%n {
			k++
		}
		c := &client{session: i % cfg.Sessions, msgs: make([]message, k)}
		for j := range c.msgs {
			c.msgs[j] = message{Assistant: j%2 == 1, Content: content}
		}
		if c.app, err = t.NewClient(ctx, sessions[c.session]); err != nil {
			return res, fmt.Errorf("%s: client: %w", mode, err)
		}
		clients[i] = c
	}

	start := make(chan struct{})
	var wg sync.WaitGroup
	for _, c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			for j := range c.msgs {
				m := &c.msgs[j]
				m.ID = pool[taken.Add(1)-1]
				t0 := time.Now()
				seq, attempts, err := c.app.Append(ctx, *m)
				done.Add(1)
				c.retries += max(0, attempts-1)
				if err != nil {
					c.errors++
					if c.first == nil {
						c.first = err
					}
					continue
				}
				c.acked = append(c.acked, acked{id: m.ID, seq: seq, start: t0, end: time.Now()})
			}
		}()
	}
	committer, _ := t.(interface{ Commits() int64 })
	var commits0 int64
	if committer != nil {
		commits0 = committer.Commits()
	}
	cpu0, t0 := processCPU(), time.Now()
	close(start)
	wg.Wait()
	res.Duration = time.Since(t0)
	cpu := processCPU() - cpu0

	var lat []time.Duration
	bySession := make([][]*client, len(sessions))
	for _, c := range clients {
		bySession[c.session] = append(bySession[c.session], c)
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
	res.AppendsPerSec = float64(res.Appends) / res.Duration.Seconds()
	if res.Appends > 0 {
		res.CPUPerAppend = cpu / time.Duration(res.Appends)
	}
	if committer != nil {
		if n := committer.Commits() - commits0; n > 0 {
			res.MeanBatch = float64(res.Appends) / float64(n)
		}
	}
	if len(lat) > 0 {
		slices.Sort(lat)
		rank := func(q float64) time.Duration {
			return lat[max(0, min(len(lat)-1, int(math.Ceil(q*float64(len(lat))))-1))]
		}
		res.P50, res.P99, res.P999 = rank(0.5), rank(0.99), rank(0.999)
	}
	for i, sid := range sessions {
		st, err := t.ReadBack(ctx, sid)
		if err != nil {
			return res, fmt.Errorf("%s: read back: %w", mode, err)
		}
		check(st, bySession[i], &res)
	}
	res.Complete = res.Missing == 0 && res.Duplicates == 0 && res.Gaps == 0 &&
		res.OutOfOrder == 0 && res.Misplaced == 0
	return res, nil
}

// check is node bench's verification of one session: positions are the
// stored sequences, or the read-back index where there are none.
func check(st []stored, clients []*client, res *Result) {
	res.Stored += len(st)
	pos := make(map[string]int64, len(st))
	var seqs []int64
	for i, s := range st {
		p := s.Seq
		if p < 0 {
			p = int64(i)
		}
		if _, dup := pos[s.ID]; dup {
			res.Duplicates++
			continue
		}
		pos[s.ID] = p
		seqs = append(seqs, p)
	}
	slices.Sort(seqs)
	distinct := 0
	for i, q := range seqs {
		if i > 0 && q == seqs[i-1] {
			res.Duplicates++
			continue
		}
		distinct++
	}
	if len(seqs) > 0 {
		res.Gaps += int(seqs[len(seqs)-1]+1) - distinct
	}

	type placed struct {
		start, end time.Time
		pos        int64
	}
	var ms []placed
	present := 0
	for _, c := range clients {
		for _, a := range c.acked {
			p, ok := pos[a.id]
			if !ok {
				res.Missing++
				continue
			}
			present++
			if a.seq >= 0 && a.seq != p {
				res.Misplaced++
			}
			ms = append(ms, placed{a.start, a.end, p})
		}
	}
	res.Unacked += len(pos) - present

	// Acknowledgement order: nothing may be stored before a message that
	// was answered before it was sent.
	byEnd := slices.Clone(ms)
	slices.SortFunc(byEnd, func(a, b placed) int { return a.end.Compare(b.end) })
	slices.SortFunc(ms, func(a, b placed) int { return a.start.Compare(b.start) })
	j, highest := 0, int64(-1)
	for _, m := range ms {
		for ; j < len(byEnd) && byEnd[j].end.Before(m.start); j++ {
			highest = max(highest, byEnd[j].pos)
		}
		if m.pos <= highest {
			res.OutOfOrder++
		}
	}
}
