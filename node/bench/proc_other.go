//go:build !linux

package bench

import "time"

// childCPU is unknown here: a served node's CPU is left out of
// CPUPerAppend.
func childCPU(int) time.Duration { return 0 }

// residentBytes is unknown here.
func residentBytes() int64 { return 0 }
