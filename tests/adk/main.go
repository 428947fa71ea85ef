package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/schollz/progressbar/v3"
)

// Modes, in the order they run and print.
var allModes = []string{"inprocess", "adk", "adk-serialized"}

func main() {
	if err := run(os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "adk bench:", err)
		os.Exit(1)
	}
}

func run(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("adk", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var cfg config
	fs.IntVar(&cfg.Sessions, "sessions", 64, "sessions written to")
	fs.IntVar(&cfg.Clients, "clients", 64, "concurrent clients per session")
	fs.IntVar(&cfg.Appends, "appends", 65536, "total appends, spread over sessions × clients")
	fs.IntVar(&cfg.MessageBytes, "message-bytes", 256, "content size of each message")
	fs.StringVar(&cfg.Synchronous, "durability", "full", "SQLite synchronous: full or normal")
	fs.StringVar(&cfg.DataDir, "data-dir", "", "where the databases go (default: the system's temp dir); removed after")
	modes := fs.String("modes", strings.Join(allModes, ","), "comma-separated: "+strings.Join(allModes, ", "))
	asJSON := fs.Bool("json", false, "print JSON (node bench's result format) instead of a table")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if cfg.Sessions < 1 || cfg.Clients < 1 || cfg.Appends < 1 || cfg.MessageBytes < 1 {
		return errors.New("sessions, clients, appends and message-bytes must be ≥ 1")
	}
	if cfg.Synchronous != "full" && cfg.Synchronous != "normal" {
		return fmt.Errorf("durability %q: want full or normal", cfg.Synchronous)
	}
	var results []Result
	for _, m := range strings.Split(*modes, ",") {
		res, err := measure(context.Background(), cfg, strings.TrimSpace(m), stderr)
		if err != nil {
			return err
		}
		results = append(results, res)
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(results)
	}
	return writeTable(stdout, results)
}

// measure runs one mode on a fresh database.
func measure(ctx context.Context, cfg config, mode string, stderr io.Writer) (Result, error) {
	dir, err := os.MkdirTemp(cfg.DataDir, "adk-bench-*")
	if err != nil {
		return Result{}, err
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, mode+".db")

	var t interface {
		target
		Close() error
	}
	switch mode {
	case "inprocess":
		t, err = openAgentstate(path, cfg.Synchronous)
	case "adk", "adk-serialized":
		t, err = openADK(path, cfg.Synchronous, mode == "adk-serialized")
	default:
		return Result{}, fmt.Errorf("unknown mode %q (known: %s)", mode, strings.Join(allModes, ", "))
	}
	if err != nil {
		return Result{}, fmt.Errorf("%s: open: %w", mode, err)
	}
	var done atomic.Int64
	stop := progress(stderr, mode, cfg.Appends, &done)
	res, err := drive(ctx, cfg, mode, t, &done)
	stop()
	return res, errors.Join(err, t.Close())
}

// progress shows a bar on stderr until stop is called.
func progress(w io.Writer, mode string, total int, done *atomic.Int64) (stop func()) {
	bar := progressbar.NewOptions(total, progressbar.OptionSetWriter(w),
		progressbar.OptionSetDescription(fmt.Sprintf("%-14s", mode)), progressbar.OptionShowCount(),
		progressbar.OptionShowIts(), progressbar.OptionSetItsString("appends"))
	quit, ended := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(ended)
		tick := time.NewTicker(200 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-tick.C:
				_ = bar.Set(int(done.Load()))
			case <-quit:
				_ = bar.Set(int(done.Load()))
				_ = bar.Finish()
				fmt.Fprintln(w)
				return
			}
		}
	}()
	return func() { close(quit); <-ended }
}

// writeTable prints node bench's table format.
func writeTable(w io.Writer, rs []Result) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "mode\tworkload\tbytes\tsync\tappends\terrors\tretries\tappends/s\tp50\tp99\tp99.9\tcpu/append\tmean batch\tcomplete\t")
	for _, r := range rs {
		fmt.Fprintf(tw, "%s\tS=%d×C=%d\t%d\t%s\t%d\t%d\t%d\t%.0f\t%s\t%s\t%s\t%.1fµs\t%s\t%s\t\n",
			r.Mode, r.Sessions, r.Clients, r.MessageBytes, r.Synchronous, r.Appends, r.Errors, r.Retries,
			r.AppendsPerSec, latency(r.P50), latency(r.P99), latency(r.P999),
			float64(r.CPUPerAppend)/float64(time.Microsecond), batch(r.MeanBatch), completeness(r))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, r := range rs {
		if r.FirstError != "" {
			fmt.Fprintf(w, "%s first failure: %s\n", r.Mode, r.FirstError)
		}
	}
	return nil
}

func latency(d time.Duration) string {
	switch {
	case d == 0:
		return "-"
	case d < time.Millisecond:
		return fmt.Sprintf("%dµs", d.Microseconds())
	case d < time.Second:
		return fmt.Sprintf("%.1fms", float64(d)/float64(time.Millisecond))
	}
	return fmt.Sprintf("%.2fs", d.Seconds())
}

func batch(b float64) string {
	if b == 0 {
		return "-"
	}
	return fmt.Sprintf("%.1f", b)
}

func completeness(r Result) string {
	var bad []string
	for _, f := range []struct {
		n    int
		what string
	}{{r.Missing, "missing"}, {r.Duplicates, "dup"}, {r.Gaps, "gaps"}, {r.OutOfOrder, "order"},
		{r.Misplaced, "misplaced"}, {r.Unacked, "unacked"}} {
		if f.n > 0 {
			bad = append(bad, fmt.Sprintf("%s %d", f.what, f.n))
		}
	}
	switch {
	case r.Complete && len(bad) == 0:
		return "yes"
	case r.Complete:
		return "yes (" + strings.Join(bad, ", ") + ")"
	}
	return "NO (" + strings.Join(bad, ", ") + ")"
}
