//go:build !unix

package main

import "time"

// processCPU is unknown here; CPUPerAppend stays 0.
func processCPU() time.Duration { return 0 }
