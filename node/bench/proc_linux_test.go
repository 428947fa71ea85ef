package bench

import (
	"os"
	"testing"
	"time"
)

// childCPU reads /proc; for this process it must agree with getrusage to
// within /proc's clock tick (and the time between the two reads).
func TestChildCPUReadsProc(t *testing.T) {
	deadline := processCPU() + 50*time.Millisecond
	x := 0
	for processCPU() < deadline {
		x++
	}
	own, proc := processCPU(), childCPU(os.Getpid())
	if proc <= 0 || proc > own+20*time.Millisecond || proc < own-20*time.Millisecond {
		t.Fatalf("/proc says %v of CPU, getrusage %v (spun %d)", proc, own, x)
	}
	if childCPU(-1) != 0 {
		t.Error("a process that does not exist has CPU time")
	}
}
