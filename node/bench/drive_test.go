package bench

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// fake is an in-memory Target whose read-back can be corrupted, to prove
// the verifier notices each kind of fault.
type fake struct {
	mu     sync.Mutex
	stored map[string][]Stored
	// corrupt rewrites a session's read-back.
	corrupt func([]Stored) []Stored
	made    int // sessions created so far
}

func (f *fake) CreateSessions(_ context.Context, n int) ([]string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.stored == nil {
		f.stored = map[string][]Stored{}
	}
	out := make([]string, n)
	for i := range out {
		out[i] = string(rune('a' + f.made))
		f.made++
	}
	return out, nil
}

func (f *fake) Append(_ context.Context, sid string, m Message) (Ack, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	seq := int64(len(f.stored[sid]))
	f.stored[sid] = append(f.stored[sid], Stored{ID: m.ID, Seq: seq})
	return Ack{Seq: seq, Attempts: 1}, nil
}

func (f *fake) ReadBack(_ context.Context, sid string) ([]Stored, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := append([]Stored(nil), f.stored[sid]...)
	if f.corrupt != nil && len(out) > 3 {
		out = f.corrupt(out)
	}
	return out, nil
}

func TestVerifierFindsEachFault(t *testing.T) {
	cfg := Config{Mode: "fake", Sessions: 1, Clients: 1, Appends: 10, MessageBytes: 1}
	cases := map[string]struct {
		corrupt func([]Stored) []Stored
		field   func(Result) int
	}{
		"honest": {nil, func(r Result) int { return 0 }},
		"missing": {func(s []Stored) []Stored { return append(s[:2], s[3:]...) },
			func(r Result) int { return r.Missing }},
		"duplicate sequence": {func(s []Stored) []Stored { s[3].Seq = 2; return s },
			func(r Result) int { return r.Duplicates }},
		"gap": {func(s []Stored) []Stored { s[len(s)-1].Seq += 5; return s },
			func(r Result) int { return r.Gaps }},
		"out of order": {func(s []Stored) []Stored { s[1].Seq, s[2].Seq = s[2].Seq, s[1].Seq; return s },
			func(r Result) int { return r.OutOfOrder }},
		"unacked extra": {func(s []Stored) []Stored { return append(s, Stored{ID: "ghost", Seq: int64(len(s))}) },
			func(r Result) int { return r.Unacked }},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			res, err := Drive(context.Background(), cfg, &fake{corrupt: tc.corrupt})
			if err != nil {
				t.Fatal(err)
			}
			n := tc.field(res)
			switch {
			case name == "honest" && !res.Complete:
				t.Fatalf("an honest target is not complete: %+v", res)
			case name != "honest" && n == 0:
				t.Fatalf("fault not counted: %+v", res)
			case name != "honest" && name != "unacked extra" && res.Complete:
				t.Fatalf("fault counted but still Complete: %+v", res)
			}
		})
	}
}

// TestNewSessions: each append goes to a session created just before it,
// so every session holds exactly one message, and the result says so.
func TestNewSessions(t *testing.T) {
	cfg := Config{Mode: "fake", Callers: 3, NewSessions: true, Appends: 12, MessageBytes: 1}
	f := &fake{}
	res, err := Drive(context.Background(), cfg, f)
	if err != nil {
		t.Fatal(err)
	}
	assertComplete(t, res, 12)
	if len(f.stored) != 12 || res.Sessions != 12 || !res.NewSessions {
		t.Fatalf("%d sessions stored, result %+v", len(f.stored), res)
	}
	for sid, ms := range f.stored {
		if len(ms) != 1 {
			t.Errorf("session %q holds %d messages, want its first only", sid, len(ms))
		}
	}
	if _, err := Drive(context.Background(), cfg, &perClientFake{}); err == nil {
		t.Error("new sessions with per-client handles (bound to a session each) accepted")
	}
}

// TestCallersSpreadOverSessions: with fewer callers than sessions (W4's
// shape), append i goes to session i mod S, so every session gets its share
// and each is verified on its own.
func TestCallersSpreadOverSessions(t *testing.T) {
	cfg := Config{Mode: "fake", Sessions: 7, Callers: 3, Appends: 30, MessageBytes: 1}
	f := &fake{}
	res, err := Drive(context.Background(), cfg, f)
	if err != nil {
		t.Fatal(err)
	}
	assertComplete(t, res, 30)
	for s := range 7 {
		sid := string(rune('a' + s)) // fake's session ids
		want := 0
		for i := range 30 {
			if i%7 == s {
				want++
			}
		}
		if got := len(f.stored[sid]); got != want {
			t.Errorf("session %d holds %d appends, want %d (append i to session i mod S)", s, got, want)
		}
	}
	if res.TotalCallers() != 3 || res.Workload() != "S=7×C=3" {
		t.Errorf("result says %s, callers %d", res.Workload(), res.TotalCallers())
	}
}

func TestAckOrder(t *testing.T) {
	at := func(ms int) time.Time { return time.Unix(0, int64(ms)*int64(time.Millisecond)) }
	// b was sent after a was answered, so it must be stored after a.
	a := placed{start: at(0), end: at(10), pos: 1}
	b := placed{start: at(11), end: at(20), pos: 0}
	if n := ackOrderViolations([]placed{a, b}); n != 1 {
		t.Errorf("sequential appends stored in reverse: %d violations, want 1", n)
	}
	// Overlapping appends may land in either order.
	b.start = at(5)
	if n := ackOrderViolations([]placed{a, b}); n != 0 {
		t.Errorf("overlapping appends: %d violations, want 0", n)
	}
	a.pos, b.pos = 0, 1
	b.start = at(11)
	if n := ackOrderViolations([]placed{b, a}); n != 0 {
		t.Errorf("in order: %d violations, want 0", n)
	}
}

// perClientFake is fake with a handle per client: every append must come
// through the handle Drive asked for, never through Target.Append.
type perClientFake struct {
	fake
	handles   atomic.Int64
	viaShared atomic.Int64
}

type fakeHandle struct {
	f   *perClientFake
	sid string
	n   int
}

func (p *perClientFake) NewClient(_ context.Context, sid string) (Appender, error) {
	p.handles.Add(1)
	return &fakeHandle{f: p, sid: sid}, nil
}

func (p *perClientFake) Append(ctx context.Context, sid string, m Message) (Ack, error) {
	p.viaShared.Add(1)
	return p.fake.Append(ctx, sid, m)
}

func (h *fakeHandle) Append(ctx context.Context, m Message) (Ack, error) {
	h.n++
	return h.f.fake.Append(ctx, h.sid, m)
}

func TestDrivePerClient(t *testing.T) {
	cfg := Config{Mode: "fake", Sessions: 2, Clients: 3, Appends: 30, MessageBytes: 1}
	p := &perClientFake{}
	res, err := Drive(context.Background(), cfg, p)
	if err != nil {
		t.Fatal(err)
	}
	if p.handles.Load() != 6 || p.viaShared.Load() != 0 {
		t.Fatalf("%d handles (want 6, one per client), %d appends through Target.Append (want 0)", p.handles.Load(), p.viaShared.Load())
	}
	assertComplete(t, res, 30)
}
