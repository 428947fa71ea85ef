//go:build linux

package checker_test

import (
	"testing"
	"time"

	"github.com/agentstate/agentstate/tests/checker"
	"google.golang.org/grpc/codes"
)

// TestFaultRun makes the node's database unable to grow mid-load (a file
// size limit set on the live process — it binds root too, unlike
// permissions), checks that the callers get RESOURCE_EXHAUSTED or
// UNAVAILABLE, lifts the limit while the node runs and checks that appends
// are acknowledged again, then kills and restarts the node and checks that
// nothing acknowledged — before, during or after the fault — was lost.
func TestFaultRun(t *testing.T) {
	ctx := runContext(t)
	s := seed(t)
	n, conn := startNode(t, ctx)
	start := time.Now()
	fr, err := checker.FaultRun(ctx, n, conn, checker.FaultConfig{
		Load:     loadConfig(s),
		Progress: *flagProgress,
		Slack:    *flagSlack,
		Seed:     s,
		Logf:     t.Logf,
	})
	if err != nil {
		t.Fatalf("fault run: %v (figures so far: %s)", err, fr.String())
	}
	t.Logf("figures after %v: %s", time.Since(start).Round(time.Millisecond), fr.String())
	t.Logf("during the fault (limit %d bytes): %d acknowledged, failures %s",
		fr.LimitBytes, fr.AckedDuringFault, checker.FormatFailures(fr.DuringFault))
	for c, m := range fr.Messages {
		t.Logf("last %s: %s", c, m)
	}
	if fr.DuringFault[codes.ResourceExhausted]+fr.DuringFault[codes.Unavailable] == 0 {
		t.Errorf("no caller saw RESOURCE_EXHAUSTED or UNAVAILABLE during the fault")
	}
	if err := fr.Err(); err != nil {
		t.Fatal(err)
	}
}
