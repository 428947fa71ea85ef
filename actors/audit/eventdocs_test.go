package audit_test

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/agentstate/agentstate/actors/audit"
)

// docs/CLIENTS.md lists the caller event types and agentstate's own; the
// lists there are the code's.
func TestDocsListTheEventTypes(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "docs", "CLIENTS.md"))
	if err != nil {
		t.Fatal(err)
	}
	listed := func(prefix string) []string {
		for _, line := range strings.Split(string(b), "\n") {
			if rest, ok := strings.CutPrefix(line, prefix); ok {
				var names []string
				for _, m := range regexp.MustCompile("`([a-z_]+)`").FindAllStringSubmatch(rest, -1) {
					names = append(names, m[1])
				}
				return names
			}
		}
		t.Fatalf("docs/CLIENTS.md has no line %q", prefix)
		return nil
	}
	if got, want := listed("Caller event types: "), audit.CallerEventTypes(); !slices.Equal(got, want) {
		t.Errorf("docs list the caller event types\n%v\nthe code has\n%v", got, want)
	}
	if got, want := listed("agentstate's own event types: "), audit.ReservedEventTypes(); !slices.Equal(got, want) {
		t.Errorf("docs list agentstate's own event types\n%v\nthe code has\n%v", got, want)
	}
	all := append(audit.CallerEventTypes(), audit.ReservedEventTypes()...)
	slices.Sort(all)
	if !slices.Equal(all, audit.EventTypes()) {
		t.Errorf("caller and own types %v do not make up the registry %v", all, audit.EventTypes())
	}
}
