package bench

import (
	"bufio"
	"fmt"
	"os"
	"runtime"
	"strings"
)

// Machine describes where a run happened, for reports: the Go version, the
// CPUs Go may use, and the CPU model when the OS says (Linux).
func Machine() string {
	s := fmt.Sprintf("%s, %d CPUs", runtime.Version(), runtime.NumCPU())
	if m := cpuModel(); m != "" {
		s += ", " + m
	}
	return s
}

func cpuModel() string {
	f, err := os.Open("/proc/cpuinfo")
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return ""
}
