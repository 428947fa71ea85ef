package bench

import (
	"context"
	"sync/atomic"
	"testing"
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
