//go:build !unix

package bench

import "time"

// processCPU is unknown here; CPUPerAppend stays 0.
func processCPU() time.Duration { return 0 }
