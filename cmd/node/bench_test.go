package main

import (
	"bytes"
	"encoding/json"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentstate/agentstate/node/bench"
)

// TestBenchCommand runs node bench end to end on a tiny workload: flags to
// Config, JSON out, the plot, then report on the saved file.
func TestBenchCommand(t *testing.T) {
	dir := t.TempDir()
	plot := filepath.Join(dir, "bench.png")
	var out, errOut bytes.Buffer
	code := run([]string{"bench", "--mode", "inprocess,raw", "--sessions", "2", "--callers", "2",
		"--appends", "40", "--message-bytes", "16", "--durability", "normal", "--data-dir", dir,
		"--json", "--plot", plot}, &out, &errOut)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	var rs []bench.Result
	if err := json.Unmarshal(out.Bytes(), &rs); err != nil {
		t.Fatalf("%v: %s", err, out.String())
	}
	if len(rs) != 2 || rs[0].Mode != "inprocess" || rs[1].Mode != "raw" {
		t.Fatalf("results: %+v", rs)
	}
	for _, r := range rs {
		if !r.Complete || r.Appends != 40 || r.Sessions != 2 || r.Callers != 2 || r.MessageBytes != 16 || r.Synchronous != "normal" {
			t.Errorf("%s: %+v", r.Mode, r)
		}
	}
	f, err := os.Open(plot)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := png.Decode(f); err != nil {
		t.Fatalf("plot: %v", err)
	}

	saved := filepath.Join(dir, "r.json")
	if err := os.WriteFile(saved, out.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	out.Reset()
	if code := run([]string{"bench", "report", "--in", saved, "--in", saved, "--markdown"}, &out, &errOut); code != 0 {
		t.Fatalf("report exit %d: %s", code, errOut.String())
	}
	// The same file twice: each workload and mode once.
	if n := strings.Count(out.String(), "| inprocess | S=2×C=2 |"); n != 1 {
		t.Errorf("report rows for inprocess: %d\n%s", n, out.String())
	}
	if !strings.Contains(out.String(), "inprocess / raw appends/s") {
		t.Errorf("report without the ratio table:\n%s", out.String())
	}
}

func TestBenchCommandUsage(t *testing.T) {
	for _, args := range [][]string{
		{"bench", "--mode", "nope"},
		{"bench", "--durability", "off"},
		{"bench", "report"},
	} {
		var out, errOut bytes.Buffer
		if code := run(args, &out, &errOut); code != exitUsage {
			t.Errorf("%v: exit %d, want %d (%s)", args, code, exitUsage, errOut.String())
		}
	}
}

// nodeEnv makes this test binary act as the node program (TestMain), so
// that node bench can start it as its `node serve` process.
const nodeEnv = "AGENTSTATE_TEST_BINARY_IS_NODE"

func TestMain(m *testing.M) {
	if os.Getenv(nodeEnv) == "1" {
		os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

// TestBenchServed runs the grpc mode against a `node serve` process that
// node bench starts (this binary, as the node), and W-named workloads: the
// results are complete and carry the workload's name and shape.
func TestBenchServed(t *testing.T) {
	t.Setenv(nodeEnv, "1")
	dir := t.TempDir()
	var out, errOut bytes.Buffer
	code := run([]string{"bench", "--mode", "grpc,inprocess,raw-closed", "--workload", "W2",
		"--appends", "64", "--durability", "normal", "--data-dir", dir, "--json"}, &out, &errOut)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	var rs []bench.Result
	if err := json.Unmarshal(out.Bytes(), &rs); err != nil {
		t.Fatalf("%v: %s", err, out.String())
	}
	if len(rs) != 3 {
		t.Fatalf("results: %+v", rs)
	}
	for _, r := range rs {
		if !r.Complete || r.Appends != 64 || r.Name != "W2" || r.Sessions != 1 || r.Callers != 16 {
			t.Errorf("%s: %+v", r.Mode, r)
		}
	}
	if rs[2].MeanBatch != 16 {
		t.Errorf("raw-closed: %v rows per transaction, want C = 16", rs[2].MeanBatch)
	}
	if rs[0].CPUPerAppend <= 0 {
		t.Errorf("grpc: no CPU per append counted: %+v", rs[0])
	}
}

// TestBenchDefaultModesPlot runs node bench with its default modes (among
// them raw-closed, which once had no colour: the plot panicked and left an
// empty file) on a tiny workload and checks the plot is a PNG with content.
func TestBenchDefaultModesPlot(t *testing.T) {
	t.Setenv(nodeEnv, "1") // the grpc mode starts this binary as its node
	dir := t.TempDir()
	plot := filepath.Join(dir, "x.png")
	var out, errOut bytes.Buffer
	code := run([]string{"bench", "--sessions", "2", "--callers", "2", "--appends", "16", "--message-bytes", "16",
		"--durability", "normal", "--data-dir", dir, "--plot", plot}, &out, &errOut)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	for _, m := range []string{"inprocess", "grpc", "raw", "raw-closed"} {
		if !strings.Contains(out.String(), m) {
			t.Errorf("table without the default mode %s:\n%s", m, out.String())
		}
	}
	f, err := os.Open(plot)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatalf("plot: %v", err)
	}
	if b := img.Bounds(); b.Dx() == 0 || b.Dy() == 0 {
		t.Fatalf("plot of size %v", b)
	}
}
