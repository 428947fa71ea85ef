package bench

import (
	"context"
	"io"
	"math"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// tiny is the smallest workload that still has concurrent clients per
// session.
func tiny(mode Mode) Config {
	return Config{Mode: mode, Sessions: 2, Clients: 2, Appends: 50, MessageBytes: 64, DataDir: ""}
}

func TestRunEachMode(t *testing.T) {
	for _, mode := range []Mode{ModeInProcess, ModeGRPC, ModeGRPCStream, ModeGRPCUnary, ModeRaw, ModeRawClosed} {
		t.Run(mode, func(t *testing.T) {
			cfg := tiny(mode)
			cfg.DataDir = t.TempDir()
			var last, total atomic.Int64
			cfg.Progress = func(done, all int) { last.Store(int64(done)); total.Store(int64(all)) }
			res, err := Run(context.Background(), cfg)
			if err != nil {
				t.Fatal(err)
			}
			assertComplete(t, res, 50)
			if last.Load() != 50 || total.Load() != 50 {
				t.Errorf("last progress %d/%d, want 50/50", last.Load(), total.Load())
			}
			if res.MeanBatch <= 0 {
				t.Errorf("mean batch %v: the in-process node's commits were not counted", res.MeanBatch)
			}
			// The writer runs one transaction at a time: it cannot be busy
			// for longer than the window (plus the last commit's answer).
			if !isRaw(mode) && (res.WriterBusy <= 0 || res.WriterBusy > 1.05) {
				t.Errorf("writer busy %v, want (0, 1]", res.WriterBusy)
			}
			// raw-closed commits C rows at a time (the last transaction
			// takes the remainder): tiny's 2×2 callers, 50 rows.
			if mode == ModeRawClosed && res.MeanBatch != 50.0/13 {
				t.Errorf("raw-closed: %v rows per transaction, want 50 in transactions of 4", res.MeanBatch)
			}
		})
	}
}

// The baseline is only race-free with one client per session; with more
// its duplicates are the point, so there only the accounting is checked.
func TestRunBaseline(t *testing.T) {
	cfg := tiny(ModeBaseline)
	cfg.Clients = 1
	cfg.DataDir = t.TempDir()
	res, err := Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	assertComplete(t, res, 50)

	cfg = tiny(ModeBaseline)
	cfg.DataDir = t.TempDir()
	res, err = Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if res.Appends+res.Errors != 50 || res.Stored != res.Appends-res.Missing+res.Unacked {
		t.Errorf("baseline accounting: appends %d errors %d stored %d missing %d unacked %d",
			res.Appends, res.Errors, res.Stored, res.Missing, res.Unacked)
	}
	if res.Complete != (res.Duplicates == 0 && res.Gaps == 0 && res.Missing == 0 && res.OutOfOrder == 0 && res.Misplaced == 0) {
		t.Errorf("Complete=%v disagrees with its counters: %+v", res.Complete, res)
	}
}

func TestRunGRPCAgainstAddr(t *testing.T) {
	n, err := startNode(t.TempDir()+"/remote.db", "normal")
	if err != nil {
		t.Fatal(err)
	}
	srv, addr, err := loopbackServer(n)
	if err != nil {
		t.Fatal(err)
	}
	cfg := tiny(ModeGRPC)
	cfg.Addr = addr
	res, err := Run(context.Background(), cfg)
	srv.GracefulStop()
	if stopErr := stopNode(n); stopErr != nil {
		t.Error(stopErr)
	}
	if err != nil {
		t.Fatal(err)
	}
	assertComplete(t, res, 50)
	if res.MeanBatch != 0 {
		t.Errorf("mean batch %v for a node in no known process", res.MeanBatch)
	}
}

func isRaw(m Mode) bool { return m == ModeRaw || m == ModeRawClosed }

func assertComplete(t *testing.T, res Result, appends int) {
	t.Helper()
	if !res.Complete || res.Appends != appends || res.Stored != appends || res.Errors != 0 || res.Unacked != 0 {
		t.Fatalf("%s: want %d complete appends, got %+v", res.Mode, appends, res)
	}
	if res.AppendsPerSec <= 0 || res.Duration <= 0 {
		t.Errorf("%s: no rate: %+v", res.Mode, res)
	}
	if !isRaw(res.Mode) && (res.P50 <= 0 || res.P50 > res.P99 || res.P99 > res.P999) {
		t.Errorf("%s: percentiles not ordered: p50 %v p99 %v p99.9 %v", res.Mode, res.P50, res.P99, res.P999)
	}
}

func TestConfigRejects(t *testing.T) {
	for name, cfg := range map[string]Config{
		"negative sessions": {Mode: ModeRaw, Sessions: -1},
		"too many clients":  {Mode: ModeRaw, Sessions: 1024, Clients: 1024},
		"huge message":      {Mode: ModeRaw, MessageBytes: 2 << 20},
		"bad synchronous":   {Mode: ModeRaw, Synchronous: "off"},
		"unknown mode":      {Mode: "nope"},
	} {
		if _, err := Run(context.Background(), cfg); err == nil {
			t.Errorf("%s: Run accepted %+v", name, cfg)
		}
	}
}

func TestParseModes(t *testing.T) {
	got, err := ParseModes(" inprocess, RAW,,grpc")
	if err != nil || len(got) != 3 || got[0] != ModeInProcess || got[1] != ModeRaw || got[2] != ModeGRPC {
		t.Fatalf("ParseModes = %v, %v", got, err)
	}
	for _, bad := range []string{"", ",", "inprocess,adk"} {
		if _, err := ParseModes(bad); err == nil {
			t.Errorf("ParseModes(%q) accepted", bad)
		}
	}
}

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

func TestChecks(t *testing.T) {
	ms := time.Millisecond
	rs := []Result{
		{Mode: ModeInProcess, Sessions: 64, Callers: 64, AppendsPerSec: 70, P50: 2 * ms, P99: 5 * ms, CPUPerAppend: 30},
		{Mode: ModeRaw, Sessions: 64, Callers: 64, AppendsPerSec: 100},
		{Mode: ModeRawClosed, Sessions: 64, Callers: 64, AppendsPerSec: 50},
		{Mode: ModeGRPC, Sessions: 64, Callers: 64, AppendsPerSec: 63},
		{Mode: ModeGRPCUnary, Sessions: 64, Callers: 64, AppendsPerSec: 35},
		// W2 in the older form (callers per session): C = 1 × 16.
		{Mode: ModeInProcess, Sessions: 1, Clients: 16, AppendsPerSec: 10},
		{Mode: ModeRaw, Sessions: 1, Clients: 16, AppendsPerSec: 100},
		{Mode: ModeInProcess, Sessions: 64, Callers: 4096, CPUPerAppend: 10},
		{Mode: ModeInProcess, Sessions: 10000, Callers: 64, AppendsPerSec: 40},
		{Mode: ModeInProcess, Sessions: 1024, Callers: 256, AppendsPerSec: 40},
		{Mode: ModeRaw, Sessions: 1024, Callers: 256, AppendsPerSec: 50},
	}
	type want struct {
		ratio        float64
		pass, target bool
	}
	wants := map[string]want{
		"S=64×C=64 inprocess / raw appends/s":        {0.7, true, true},
		"S=64×C=64 inprocess / raw-closed appends/s": {1.4, true, false},
		"S=64×C=64 raw-closed / raw appends/s":       {0.5, true, false},
		"S=64×C=64 inprocess p99 / p50":              {2.5, true, true},
		"S=64×C=64 grpc / inprocess appends/s":       {0.9, true, true},
		"S=64×C=64 grpc-unary / inprocess appends/s": {0.5, false, false},
		"S=1×C=16 inprocess / raw appends/s":         {0.1, false, true},
		"S=1024×C=256 inprocess / raw appends/s":     {0.8, true, false},
		"W1 / 4096 cpu per append":                   {3, false, true},
		"W4 / W1 inprocess appends/s":                {40.0 / 70, true, true},
	}
	cs := Checks(rs)
	if len(cs) != len(wants) {
		t.Fatalf("got %d checks, want %d: %+v", len(cs), len(wants), cs)
	}
	for _, c := range cs {
		w, ok := wants[c.Workload+" "+c.Name]
		if !ok {
			t.Errorf("unexpected check %+v", c)
			continue
		}
		if math.Abs(c.Ratio-w.ratio) > 1e-9 || c.Pass != w.pass || c.Target != w.target {
			t.Errorf("%s %s: %+v, want %+v", c.Workload, c.Name, c, w)
		}
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

func TestDedupe(t *testing.T) {
	rs := Dedupe([]Result{
		{Mode: ModeInProcess, Sessions: 1, Clients: 16, AppendsPerSec: 1},
		{Mode: "adk", Sessions: 1, Clients: 16},
		{Mode: ModeInProcess, Sessions: 1, Clients: 16, AppendsPerSec: 2},
		{Mode: ModeInProcess, Sessions: 64, Clients: 64},
	})
	if len(rs) != 3 || rs[0].AppendsPerSec != 1 || rs[2].Sessions != 64 {
		t.Fatalf("Dedupe = %+v", rs)
	}
}

func TestTables(t *testing.T) {
	rs := []Result{
		{Mode: ModeInProcess, Sessions: 64, Callers: 64, Appends: 10, AppendsPerSec: 80, P99: 1500 * time.Microsecond, Complete: true},
		{Mode: ModeBaseline, Sessions: 64, Callers: 64, Appends: 10, AppendsPerSec: 2, P99: 2 * time.Second, Duplicates: 3},
	}
	for name, write := range map[string]func(io.Writer, []Result) error{"text": WriteTable, "markdown": WriteMarkdown} {
		var b strings.Builder
		if err := write(&b, rs); err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{"inprocess", "S=64×C=64", "1.5ms", "2.00s", "yes", "NO (dup 3)"} {
			if !strings.Contains(b.String(), want) {
				t.Errorf("%s table lacks %q:\n%s", name, want, b.String())
			}
		}
	}
	var b strings.Builder
	if err := WriteMarkdown(&b, rs); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "| S=64×C=64 | inprocess / baseline appends/s | 40 | - | (no target) |") {
		t.Errorf("markdown checks:\n%s", b.String())
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
