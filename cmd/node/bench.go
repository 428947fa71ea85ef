package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime/pprof"
	"strings"
	"time"

	"github.com/agentstate/agentstate/node/bench"
	nodeclient "github.com/agentstate/agentstate/node/client"
	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"
)

// benchFlags are node bench's flags.
type benchFlags struct {
	modes        string
	workloads    string
	sessions     int
	callers      int
	clients      int
	idleTimeout  time.Duration
	grpcInProc   bool
	appends      int
	messageBytes int
	durability   string
	addr         string
	dataDir      string
	postgres     string
	json         bool
	markdown     bool
	plot         string
	title        string
	cpuProfile   string
	tokenFile    string
	serveArgs    []string
}

// benchCommand is `node bench`: the standard workloads, a summary table
// (or JSON), the targets' ratios and optionally a plot.
func benchCommand() *cobra.Command {
	var f benchFlags
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Measure appends/s and latency: agentstate in-process and over gRPC, the seed baseline, the raw SQLite (or PostgreSQL) ceiling",
		Long: "bench runs the append workload — C concurrent callers in total (--callers), each a closed loop with\n" +
			"one append outstanding, append i going to session i mod S (--sessions), --appends in all — against\n" +
			"each --mode, then reads every session back and checks that every acknowledged message is stored,\n" +
			"dense and in order. --workload runs named workloads instead: W1 (S=64, C=64), W2 (S=1, C=16),\n" +
			"W3 (S=1024, C=256), W4 (S=10000, C=64, sessions passivated after 100ms idle, so most appends\n" +
			"activate theirs), 4096 (S=64, C=4096: 64 senders on each session, the older \"S=64×C=64\"),\n" +
			"new (64 callers, each creating a session and appending its first message, both timed); all.\n\n" +
			"Modes: inprocess (the Go API), grpc (over gRPC as the Go client appends: concurrent appends\n" +
			"share an AppendBatches stream per connection; --addr, or a `node serve` process started here\n" +
			"from this binary, whose CPU counts too; --grpc-in-process serves from this process instead),\n" +
			"grpc-stream (one AppendStream message per append), grpc-unary (one unary Append per append),\n" +
			"baseline (the seed design: count-then-insert on pooled database/sql), raw (one goroutine,\n" +
			"1000-row transactions: the SQLite ceiling), raw-closed (the same with transactions of C rows:\n" +
			"the most C closed-loop callers can share). Each mode gets a fresh database under --data-dir.\n" +
			"--postgres measures the PostgreSQL store instead (a fresh database per mode on that server; raw and\n" +
			"raw-closed then write the same rows with a plain pgx client, one pipelined commit per transaction;\n" +
			"db cpu/append is the CPU of the server's backends of the run's database, when it runs on this machine).\n" +
			"A progress bar goes to stderr; the table (or --json) to stdout. It fails when agentstate lost,\n" +
			"duplicated or reordered an acknowledged message.",
		RunE: func(cmd *cobra.Command, _ []string) error { return runBench(cmd, f) },
	}
	fl := cmd.Flags()
	fl.StringVar(&f.modes, "mode", "inprocess,grpc,raw,raw-closed", "comma-separated modes to run, in order (also: grpc-stream, grpc-unary, baseline)")
	fl.StringVar(&f.workloads, "workload", "", "comma-separated named workloads (W1, W2, W3, W4, 4096, new, or all) instead of --sessions/--callers")
	fl.IntVar(&f.sessions, "sessions", bench.DefaultSessions, "sessions written to (S)")
	fl.IntVar(&f.callers, "callers", bench.DefaultCallers, "concurrent callers in total (C), one append outstanding each")
	fl.IntVar(&f.clients, "clients", 0, "concurrent callers per session (the older flag; sets C = sessions × clients)")
	fl.DurationVar(&f.idleTimeout, "idle-timeout", 0, "passivate a session actor idle this long (0: the node's default; W4 sets 100ms)")
	fl.BoolVar(&f.grpcInProc, "grpc-in-process", false, "grpc modes without --addr: serve from this process instead of a `node serve` process")
	fl.IntVar(&f.appends, "appends", bench.DefaultAppends, "total appends, spread over sessions × clients")
	fl.IntVar(&f.messageBytes, "message-bytes", bench.DefaultMessageBytes, "content size of each message")
	fl.StringVar(&f.durability, "durability", bench.DefaultSynchronous, "SQLite synchronous: full (fsync per commit) or normal")
	fl.StringVar(&f.addr, "addr", "", "grpc modes: a running node's gRPC address (default: start one on loopback)")
	fl.StringVar(&f.postgres, "postgres", "", "measure the PostgreSQL store on this server (a postgres:// URL of a role that may create databases):\n"+
		"each mode on a database of its own, dropped after; raw and raw-closed are PostgreSQL's ceiling for the same rows")
	fl.StringVar(&f.dataDir, "data-dir", "", "where the runs' databases go (default: the system's temp dir); removed after")
	fl.BoolVar(&f.json, "json", false, "print the results as JSON instead of tables")
	fl.BoolVar(&f.markdown, "markdown", false, "print the tables as Markdown")
	fl.StringVar(&f.plot, "plot", "", "also write a PNG bar chart of appends/s to this file")
	fl.StringVar(&f.title, "title", "", "the plot's title (default: the workload and machine)")
	fl.StringVar(&f.cpuProfile, "cpuprofile", "", "write a CPU profile of the runs to this file (go tool pprof)")
	fl.StringVar(&f.tokenFile, "token-file", "", "grpc modes: file holding the bearer credential (token or JWT) to present")
	fl.StringArrayVar(&f.serveArgs, "serve-arg", nil, "grpc modes: an argument added to the `node serve` started here (repeat; e.g. --serve-arg=--auth-file=ids.json; its --log-level and --log-format are bench's: it waits for the node's serving line)")
	cmd.AddCommand(benchReportCommand(), benchIdleCommand(), benchClusterCommand())
	return cmd
}

func runBench(cmd *cobra.Command, f benchFlags) error {
	modes, err := bench.ParseModes(f.modes)
	if err != nil {
		return usagef(cmd, "%v", err)
	}
	if f.durability != "full" && f.durability != "normal" {
		return usagef(cmd, "--durability %q: want full or normal", f.durability)
	}
	if f.cpuProfile != "" {
		stop, err := startCPUProfile(f.cpuProfile)
		if err != nil {
			return err
		}
		defer stop()
	}
	runs := []bench.Workload{{Sessions: f.sessions, Callers: f.callers, IdleTimeout: f.idleTimeout}}
	if f.clients > 0 {
		runs[0].Callers = f.sessions * f.clients
	}
	if f.workloads != "" {
		list := f.workloads
		if strings.EqualFold(list, "all") {
			list = "W1,W2,W3,W4,4096,new"
		}
		if runs, err = bench.ParseWorkloads(list); err != nil {
			return usagef(cmd, "%v", err)
		}
	}
	var serve []string
	if !f.grpcInProc && f.addr == "" {
		exe, err := os.Executable()
		if err != nil {
			return err
		}
		serve = []string{exe, "serve"}
	}
	token := ""
	if f.tokenFile != "" {
		if token, err = nodeclient.ReadToken(f.tokenFile); err != nil {
			return err
		}
	}
	var results []bench.Result
	for _, w := range runs {
		idle := w.IdleTimeout
		if f.idleTimeout != 0 {
			idle = f.idleTimeout
		}
		for _, m := range modes {
			if w.NewSessions && (m == bench.ModeRaw || m == bench.ModeRawClosed || m == bench.ModeBaseline) {
				continue // nothing to compare a new session's create with there
			}
			res, err := benchOne(cmd, f, bench.Config{
				Mode: m, Name: w.Name, Sessions: w.Sessions, Callers: w.Callers, NewSessions: w.NewSessions, Appends: f.appends,
				MessageBytes: f.messageBytes, Synchronous: f.durability, Addr: f.addr, DataDir: f.dataDir, Postgres: f.postgres,
				IdleTimeout: idle, Serve: serve, ServeArgs: f.serveArgs, Token: token,
			})
			if err != nil {
				return err
			}
			results = append(results, res)
		}
	}
	if err := report(cmd.OutOrStdout(), results, format(f.json, f.markdown), f.plot, f.title); err != nil {
		return err
	}
	return agentstateIntact(results)
}

// benchOne runs one mode of one workload with a progress bar on stderr.
func benchOne(cmd *cobra.Command, f benchFlags, cfg bench.Config) (bench.Result, error) {
	label := cfg.Mode
	if cfg.Name != "" {
		label = cfg.Name + " " + cfg.Mode
	}
	bar := progressbar.NewOptions(f.appends,
		progressbar.OptionSetWriter(cmd.ErrOrStderr()),
		progressbar.OptionSetDescription(fmt.Sprintf("%-14s", label)),
		progressbar.OptionShowCount(),
		progressbar.OptionShowIts(),
		progressbar.OptionSetItsString("appends"),
		progressbar.OptionThrottle(bench.ProgressInterval),
		progressbar.OptionOnCompletion(func() { fmt.Fprintln(cmd.ErrOrStderr()) }),
	)
	cfg.Progress = func(done, _ int) { _ = bar.Set(done) }
	res, err := bench.Run(cmd.Context(), cfg)
	_ = bar.Finish()
	if err != nil {
		return res, fmt.Errorf("bench %s: %w", label, err)
	}
	return res, nil
}

// startCPUProfile profiles this process's CPU into path until stop.
func startCPUProfile(path string) (stop func(), err error) {
	out, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(out); err != nil {
		out.Close()
		return nil, err
	}
	return func() { pprof.StopCPUProfile(); out.Close() }, nil
}

// agentstateIntact fails when an agentstate mode lost an acknowledged
// message or broke its order: that is a bug, not a slow run.
func agentstateIntact(rs []bench.Result) error {
	var bad []string
	for _, r := range rs {
		agentstate := r.Mode == bench.ModeInProcess || r.Mode == bench.ModeGRPC || r.Mode == bench.ModeGRPCStream ||
			r.Mode == bench.ModeGRPCUnary
		if agentstate && (!r.Complete || r.Unacked > 0) {
			bad = append(bad, fmt.Sprintf("%s %s", r.Mode, r.Workload()))
		}
	}
	if len(bad) > 0 {
		return errors.New("agentstate did not store what it acknowledged, in order: " + strings.Join(bad, "; "))
	}
	return nil
}

// The output formats of node bench and node bench report.
const (
	formatText = iota
	formatJSON
	formatMarkdown
)

func format(asJSON, markdown bool) int {
	switch {
	case asJSON:
		return formatJSON
	case markdown:
		return formatMarkdown
	}
	return formatText
}

// report prints rs as tables (results, then the targets' ratios), JSON or
// Markdown, and draws the plot when asked.
func report(w io.Writer, rs []bench.Result, form int, plot, title string) error {
	switch form {
	case formatJSON:
		if err := bench.WriteJSON(w, rs); err != nil {
			return err
		}
	case formatMarkdown:
		if err := bench.WriteMarkdown(w, rs); err != nil {
			return err
		}
	default:
		if err := bench.WriteTable(w, rs); err != nil {
			return err
		}
		if cs := bench.Checks(rs); len(cs) > 0 {
			fmt.Fprintln(w)
			if err := bench.WriteChecks(w, cs); err != nil {
				return err
			}
		}
	}
	if plot == "" {
		return nil
	}
	if title == "" {
		title = "appends/s by mode and workload (" + bench.Machine() + ")"
	}
	// Drawn in memory first: a plot that fails leaves no file behind, not
	// an empty one.
	var png bytes.Buffer
	if err := bench.WritePlot(&png, title, rs); err != nil {
		return err
	}
	return os.WriteFile(plot, png.Bytes(), 0o644)
}

// benchReportCommand is `node bench report`: tables, ratios and a plot of
// results saved earlier with --json (several runs, other tools' too).
func benchReportCommand() *cobra.Command {
	var (
		in       []string
		asJSON   bool
		markdown bool
		plot     string
		title    string
	)
	cmd := &cobra.Command{
		Use:   "report",
		Short: "Merge results saved with --json (node bench, tests/adk) into tables and a plot",
		Long: "report reads result files written by `node bench --json` or `go run ./tests/adk -json` and prints\n" +
			"them as one table with the targets' ratios (or JSON, or Markdown) and draws --plot. Where two files\n" +
			"hold the same workload and mode, the first file's result is kept.",
		RunE: func(cmd *cobra.Command, _ []string) error {
			if len(in) == 0 {
				return usagef(cmd, "--in is required (one or more JSON result files)")
			}
			var all []bench.Result
			for _, p := range in {
				rs, err := readResults(p)
				if err != nil {
					return err
				}
				all = append(all, rs...)
			}
			return report(cmd.OutOrStdout(), bench.Dedupe(all), format(asJSON, markdown), plot, title)
		},
	}
	cmd.Flags().StringSliceVar(&in, "in", nil, "JSON result files (repeat or comma-separate)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the merged results as JSON instead of tables")
	cmd.Flags().BoolVar(&markdown, "markdown", false, "print the tables as Markdown")
	cmd.Flags().StringVar(&plot, "plot", "", "write a PNG bar chart of appends/s to this file")
	cmd.Flags().StringVar(&title, "title", "", "the plot's title")
	return cmd
}

func readResults(path string) ([]bench.Result, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	rs, err := bench.ReadJSON(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return rs, nil
}
