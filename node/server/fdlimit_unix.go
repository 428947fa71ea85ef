//go:build unix

package server

import "syscall"

// openFileLimit is the process's soft limit on open descriptors (the Go
// runtime raised it to the hard limit at start), or 0 if unknown.
func openFileLimit() uint64 {
	var r syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &r); err != nil || r.Cur >= 1<<62 {
		return 0
	}
	return r.Cur
}
