package main

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/agentstate/agentstate/node/bench"
	"github.com/spf13/cobra"
)

// benchIdleCommand is `node bench idle`: the memory an in-process node
// keeps once the sessions it created are all passivated.
func benchIdleCommand() *cobra.Command {
	var (
		cfg    bench.IdleConfig
		asJSON bool
	)
	cmd := &cobra.Command{
		Use:   "idle",
		Short: "Measure the memory a node keeps once the sessions it created are passivated",
		Long: "idle starts a node in this process, has --callers concurrent callers create --sessions sessions,\n" +
			"each with its first message (session actors passivate after --idle-timeout; 0 keeps them all\n" +
			"live until the end), passivates the rest and reports this process's resident memory then\n" +
			"(passivated) and after a forced collection that returns freed memory to the system (idle), the\n" +
			"live Go heap, the creation rate and the most session actors live at once. RSS is the whole\n" +
			"process's: run one size per process.",
		RunE: func(cmd *cobra.Command, _ []string) error {
			if cfg.Synchronous != "full" && cfg.Synchronous != "normal" {
				return usagef(cmd, "--durability %q: want full or normal", cfg.Synchronous)
			}
			res, err := bench.MeasureIdle(cmd.Context(), cfg)
			if err != nil {
				return err
			}
			if asJSON {
				return json.NewEncoder(cmd.OutOrStdout()).Encode(res)
			}
			const mib = 1 << 20
			_, err = fmt.Fprintf(cmd.OutOrStdout(),
				"sessions %d  callers %d  idle-timeout %v  %.0f sessions/s  peak live %d\n"+
					"RSS passivated %.1f MiB  idle %.1f MiB  heap %.1f MiB  Go other %.1f MiB\n",
				res.Sessions, res.Callers, res.IdleTimeout, res.PerSec, res.PeakLive,
				float64(res.RSSPassivated)/mib, float64(res.RSSIdle)/mib, float64(res.HeapLive)/mib, float64(res.GoOther)/mib)
			return err
		},
	}
	fl := cmd.Flags()
	fl.IntVar(&cfg.Sessions, "sessions", 10000, "sessions to create, each with its first message")
	fl.IntVar(&cfg.Callers, "callers", bench.DefaultCallers, "concurrent callers, each creating a session and appending to it in a loop")
	fl.DurationVar(&cfg.IdleTimeout, "idle-timeout", 2*time.Second, "passivate a session actor idle this long (0: none before the end)")
	fl.IntVar(&cfg.MessageBytes, "message-bytes", bench.DefaultMessageBytes, "content size of each first message")
	fl.StringVar(&cfg.Synchronous, "durability", bench.DefaultSynchronous, "SQLite synchronous: full (fsync per commit) or normal")
	fl.IntVar(&cfg.CacheKiB, "cache-kib", 0, "each SQLite connection's page cache in KiB, the database URL's cache_kib (0: the default, 2000)")
	fl.StringVar(&cfg.DataDir, "data-dir", "", "where the database goes (default: the system's temp dir); removed after")
	fl.BoolVar(&asJSON, "json", false, "print the result as JSON")
	return cmd
}
