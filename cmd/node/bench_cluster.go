package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/agentstate/agentstate/node/bench"
	"github.com/spf13/cobra"
)

// benchClusterCommand is `node bench cluster`: writes over gRPC to 1..N
// `node serve --cluster` members on one PostgreSQL, per kind, with the
// N-to-1 ratios of the same run and where the database's backends wait.
func benchClusterCommand() *cobra.Command {
	var (
		postgres   string
		members    string
		kinds      string
		callers    int
		ops        int
		sessions   int
		profileDir string
		nodeBinary string
		chains     int
		route      bool
		asJSON     bool
	)
	cmd := &cobra.Command{
		Use:   "cluster",
		Short: "Measure writes to a cluster of `node serve` members on one PostgreSQL: per kind, 1 member and N",
		Long: "cluster starts, for each --members count and each --kind, that many `node serve --cluster` processes of\n" +
			"this binary (automanaged membership on loopback) on a fresh database of the --postgres server, and drives\n" +
			"them over gRPC with --callers unary callers, caller c on member c mod N, --ops writes in all: append (one\n" +
			"message to one of --sessions sessions), state (UpdateState of a session's own state), scope (UpdateState\n" +
			"changing a shared scope, one per session), create (a session; audited) or plan (RecordError on one of\n" +
			"--sessions plans; audited). Audited writes take PostgreSQL's audit chain lock. It reports writes/s,\n" +
			"each member's CPU per write, the database's commits and WAL bytes per write, the share of busy backends waiting on a\n" +
			"lock (pg_stat_activity sampled every 5ms) and the top wait events, and each count's rate over the first's.\n" +
			"With --route-to-owner, a caller's writes of a session or plan go to the member that owns it once a member\n" +
			"named it (the client's RouteToOwner), instead of to its own member, which forwards them; the table's\n" +
			"routed/hinted are the writes sent to an owner and the answers that named one.",
		RunE: func(cmd *cobra.Command, _ []string) error {
			if postgres == "" {
				return usagef(cmd, "--postgres is required (a postgres:// URL of a role that may create databases)")
			}
			counts, err := parseCounts(members)
			if err != nil {
				return usagef(cmd, "--members: %v", err)
			}
			exe := nodeBinary
			if exe == "" {
				if exe, err = os.Executable(); err != nil {
					return err
				}
			}
			var rs []bench.ClusterResult
			for _, kind := range strings.Split(kinds, ",") {
				for _, n := range counts {
					fmt.Fprintf(cmd.ErrOrStderr(), "cluster %s, %d member(s)...\n", kind, n)
					dir := ""
					if profileDir != "" {
						if dir, err = os.MkdirTemp(profileDir, fmt.Sprintf("%s-%d-", kind, n)); err != nil {
							return err
						}
					}
					r, err := bench.RunCluster(cmd.Context(), bench.ClusterConfig{Postgres: postgres, Serve: []string{exe, "serve"},
						Members: n, Kind: strings.TrimSpace(kind), Callers: callers, Ops: ops, Sessions: sessions, AuditChains: chains, ProfileDir: dir,
						RouteToOwner: route})
					if errors.Is(err, bench.ErrDropDatabase) && r.Duration > 0 {
						fmt.Fprintf(cmd.ErrOrStderr(), "cluster %s, %d member(s): %v (the figures stand)\n", kind, n, err)
					} else if err != nil {
						return fmt.Errorf("cluster %s, %d member(s): %w", kind, n, err)
					}
					rs = append(rs, r)
				}
			}
			if asJSON {
				e := json.NewEncoder(cmd.OutOrStdout())
				e.SetIndent("", "  ")
				return e.Encode(rs)
			}
			return writeClusterTable(cmd.OutOrStdout(), rs)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&postgres, "postgres", "", "the PostgreSQL server (postgres:// URL); each run gets a database of its own, dropped after")
	fl.StringVar(&members, "members", "1,2", "comma-separated member counts; the first is the ratios' base")
	fl.StringVar(&kinds, "kind", strings.Join(bench.ClusterKinds, ","), "comma-separated write kinds: "+strings.Join(bench.ClusterKinds, ", "))
	fl.IntVar(&callers, "callers", 64, "concurrent unary callers in total, spread over the members")
	fl.IntVar(&ops, "ops", 8192, "writes per run")
	fl.IntVar(&sessions, "sessions", 64, "sessions (plans) the appends, state changes (plan records) go to")
	fl.StringVar(&nodeBinary, "node-binary", "", "the program the members run as `node serve` (default: this binary)")
	fl.IntVar(&chains, "audit-chains", 0, "partition the members' audit trail into this many chains (the DSN's audit_chains; 0: the store's default)")
	fl.StringVar(&profileDir, "profile-dir", "", "write each member's CPU profile under this directory (a folder per run)")
	fl.BoolVar(&route, "route-to-owner", false, "send each caller's writes of a session or plan to its owner once a member named it "+
		"(off: to the caller's member, which forwards them, as in runs before the flag)")
	fl.BoolVar(&asJSON, "json", false, "print the results as JSON")
	return cmd
}

func parseCounts(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return nil, fmt.Errorf("%q is not a member count ≥ 1", f)
		}
		out = append(out, n)
	}
	return out, nil
}

// writeClusterTable prints one row per run: the rate, its ratio to the
// same kind's first run, CPU per write per member, commits per write and
// the lock-wait share with the top wait events.
func writeClusterTable(w io.Writer, rs []bench.ClusterResult) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "kind\tmembers\twrites\terrors\twrites/s\tvs first\tp50\tp99\tcpu/write per member\tclient cpu/write\tcommits/write\tWAL/write\tlock wait\ttop waits\trouted/hinted\tload\t")
	first := map[string]float64{}
	for _, r := range rs {
		if _, ok := first[r.Kind]; !ok {
			first[r.Kind] = r.OpsPerSec
		}
		var cpu []string
		for _, c := range r.MemberCPUPerOp {
			cpu = append(cpu, us(c))
		}
		ratio := "-"
		if f := first[r.Kind]; f > 0 {
			ratio = fmt.Sprintf("%.2f", r.OpsPerSec/f)
		}
		routed := "-"
		if r.RouteToOwner {
			routed = fmt.Sprintf("%d/%d", r.Routed, r.Hinted)
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%.0f\t%s\t%s\t%s\t%s\t%s\t%.2f\t%.0fB\t%.1f%%\t%s\t%s\t%s\t\n", r.Kind, r.Members, r.Ops, r.Errors,
			r.OpsPerSec, ratio, ms(r.P50), ms(r.P99), strings.Join(cpu, " "), us(r.ClientCPUPerOp), r.CommitsPerOp, r.WALBytesPerOp,
			100*r.LockWaitShare, topWaits(r.Waits, 3), routed, r.Load)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, r := range rs {
		if r.FirstErr != "" {
			fmt.Fprintf(w, "%s, %d member(s), first error: %s\n", r.Kind, r.Members, r.FirstErr)
		}
	}
	return nil
}

func us(d time.Duration) string { return fmt.Sprintf("%.0fµs", float64(d.Nanoseconds())/1e3) }
func ms(d time.Duration) string { return fmt.Sprintf("%.1fms", float64(d.Nanoseconds())/1e6) }

// topWaits names the n most sampled wait events with their shares.
func topWaits(w map[string]int, n int) string {
	total := 0
	type kv struct {
		k string
		v int
	}
	var all []kv
	for k, v := range w {
		all = append(all, kv{k, v})
		total += v
	}
	if total == 0 {
		return "-"
	}
	slices.SortFunc(all, func(a, b kv) int {
		if a.v != b.v {
			return b.v - a.v
		}
		return strings.Compare(a.k, b.k)
	})
	var out []string
	for _, e := range all[:min(n, len(all))] {
		out = append(out, fmt.Sprintf("%s %.0f%%", e.k, 100*float64(e.v)/float64(total)))
	}
	return strings.Join(out, ", ")
}
