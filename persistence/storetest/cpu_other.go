//go:build !unix

package storetest

import "time"

// processCPU is unknown here: cpu-ns/row reads 0.
func processCPU() time.Duration { return 0 }
