package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/agentstate/agentstate/node/bench"
	"github.com/schollz/progressbar/v3"
)

// Modes, in the order they run and print. inprocess is node bench's own
// mode; the adk modes are this module's targets driven by the same engine.
var allModes = []string{bench.ModeInProcess, "adk", "adk-serialized"}

func main() {
	if err := run(os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "adk bench:", err)
		os.Exit(1)
	}
}

func run(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("adk", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var cfg bench.Config
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
	var results []bench.Result
	for _, m := range strings.Split(*modes, ",") {
		res, err := measure(context.Background(), cfg, strings.TrimSpace(m), stderr)
		if err != nil {
			return err
		}
		results = append(results, res)
	}
	if *asJSON {
		return bench.WriteJSON(stdout, results)
	}
	return bench.WriteTable(stdout, results)
}

// measure runs one mode on a fresh database with node bench's engine, so
// that adk and agentstate are driven and verified by the same code.
func measure(ctx context.Context, cfg bench.Config, mode string, stderr io.Writer) (bench.Result, error) {
	cfg.Mode = mode
	bar := progressbar.NewOptions(max(cfg.Appends, 1), progressbar.OptionSetWriter(stderr),
		progressbar.OptionSetDescription(fmt.Sprintf("%-14s", mode)), progressbar.OptionShowCount(),
		progressbar.OptionShowIts(), progressbar.OptionSetItsString("appends"))
	cfg.Progress = func(done, _ int) { _ = bar.Set(done) }
	defer func() { _ = bar.Finish(); fmt.Fprintln(stderr) }()

	switch mode {
	case bench.ModeInProcess:
		return bench.Run(ctx, cfg)
	case "adk", "adk-serialized":
	default:
		return bench.Result{}, fmt.Errorf("unknown mode %q (known: %s)", mode, strings.Join(allModes, ", "))
	}
	dir, err := os.MkdirTemp(cfg.DataDir, "adk-bench-*")
	if err != nil {
		return bench.Result{}, err
	}
	defer os.RemoveAll(dir)
	sync := cfg.Synchronous
	if sync == "" {
		sync = bench.DefaultSynchronous
	}
	t, err := openADK(filepath.Join(dir, mode+".db"), sync, mode == "adk-serialized")
	if err != nil {
		return bench.Result{}, fmt.Errorf("%s: open: %w", mode, err)
	}
	res, err := bench.Drive(ctx, cfg, t)
	return res, errors.Join(err, t.Close())
}
