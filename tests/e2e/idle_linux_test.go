package e2e_test

import (
	"encoding/json"
	"testing"

	"github.com/agentstate/agentstate/node/bench"
)

// The memory a node keeps once its sessions are passivated is bounded by
// what is live, not by how many sessions it created or how many were live
// at once (issue 26): an embedded node (`node bench idle`, one process per
// size, under a soft memory limit) that had 20,000 session actors live at
// once keeps, after passivating them all, at most twice the resident memory
// of one that had 2,000, and its live heap grows by well under a kilobyte
// per session (Proto.Actor's process registry keeps a map per shard it
// ever used, a fixed few MiB; a session actor's own state is kilobytes).
// Before, the directory's actors were Proto.Actor children, whose set kept
// the PIDs, and through them the whole state, of the actors that had
// stopped: 30,000 kept 203 MiB against 51 MiB.
func TestIdleMemoryAfterPassivation(t *testing.T) {
	measure := func(sessions string) bench.IdleResult {
		t.Helper()
		// --idle-timeout 0: every session stays live until all are
		// created, then all are passivated at once.
		r := runCLI(t, []string{"GOMEMLIMIT=256MiB"}, "bench", "idle", "--sessions", sessions,
			"--idle-timeout", "0", "--durability", "normal", "--json")
		if r.code != 0 {
			t.Fatalf("node %v: exit %d\nstdout: %s\nstderr: %s", r.args, r.code, r.stdout, r.stderr)
		}
		var res bench.IdleResult
		if err := json.Unmarshal([]byte(r.stdout), &res); err != nil {
			t.Fatalf("node %v printed %q: %v", r.args, r.stdout, err)
		}
		t.Logf("%d sessions (peak live %d): RSS idle %d MiB (passivated %d MiB), heap %d MiB",
			res.Sessions, res.PeakLive, res.RSSIdle>>20, res.RSSPassivated>>20, res.HeapLive>>20)
		if res.RSSIdle <= 0 || res.HeapLive <= 0 {
			t.Fatalf("node %v measured nothing: %+v", r.args, res)
		}
		return res
	}
	small, large := measure("2000"), measure("20000")
	if large.PeakLive < 20000 {
		t.Fatalf("only %d of 20,000 session actors were live at once; the bound is about a burst", large.PeakLive)
	}
	if large.RSSIdle > 2*small.RSSIdle {
		t.Errorf("idle RSS after 20,000 live sessions %d MiB > 2 × %d MiB after 2,000", large.RSSIdle>>20, small.RSSIdle>>20)
	}
	if perSession := (large.HeapLive - small.HeapLive) / (20000 - 2000); perSession > 700 {
		t.Errorf("the idle live heap grew by %d bytes per passivated session (%d → %d MiB); want ≤ 700",
			perSession, small.HeapLive>>20, large.HeapLive>>20)
	}
}
