// Package proc reads what Linux says of a process (/proc/<pid>/status):
// the subprocess tests' memory figures.
package proc

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// Status reads a size field of /proc/<pid>/status ("VmRSS", "VmHWM",
// "VmSize"), in bytes.
func Status(pid int, field string) (int64, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		name, value, ok := strings.Cut(sc.Text(), ":")
		if !ok || name != field {
			continue
		}
		kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(value), " kB"), 10, 64)
		if err != nil {
			return 0, fmt.Errorf("%s of %d: %w", field, pid, err)
		}
		return kb << 10, nil
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	return 0, fmt.Errorf("no %s in /proc/%d/status", field, pid)
}
