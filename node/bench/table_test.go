package bench

import (
	"io"
	"math"
	"strings"
	"testing"
	"time"
)

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

// On PostgreSQL, W1 is held to in-process ≥ 0.5 of raw-closed, and
// SQLite's target against raw does not apply.
func TestChecksOnPostgres(t *testing.T) {
	pg := pgDurabilityPrefix + "fsync=on sc=on"
	rs := []Result{
		{Mode: ModeInProcess, Sessions: 64, Callers: 64, AppendsPerSec: 3000, Synchronous: pg},
		{Mode: ModeRaw, Sessions: 64, Callers: 64, AppendsPerSec: 20000, Synchronous: pg},
		{Mode: ModeRawClosed, Sessions: 64, Callers: 64, AppendsPerSec: 8000, Synchronous: pg},
	}
	var closed, raw *Check
	for _, c := range Checks(rs) {
		switch c.Name {
		case "inprocess / raw-closed appends/s":
			closed = &c
		case "inprocess / raw appends/s":
			raw = &c
		}
	}
	if closed == nil || !closed.Target || closed.Want != 0.5 || closed.Pass {
		t.Fatalf("raw-closed check: %+v", closed)
	}
	if raw == nil || raw.Target {
		t.Fatalf("raw check: %+v", raw)
	}
}
