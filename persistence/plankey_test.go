package persistence_test

import (
	"testing"

	"github.com/agentstate/agentstate/persistence"
)

// A plan key names one plan: the default namespace's plans keep their
// bare ids, every other key splits back to its namespace and id, and no
// two plans share a key, even where a namespace contains '/'.
func TestPlanKeyNamesOnePlan(t *testing.T) {
	plans := [][2]string{
		{"", "p"}, {"local", "q"}, {"a", "p"}, {"a/b", "p"}, {"a", "b:p"}, {"team a", "p.1"}, {"/", "p"}, {"a/", "p"},
	}
	seen := map[string][2]string{}
	for _, p := range plans {
		key := persistence.PlanKey(p[0], p[1])
		ns, id := persistence.SplitPlanKey(key)
		want := persistence.PlanNamespace(p[0])
		if ns != want || id != p[1] {
			t.Errorf("PlanKey(%q, %q) = %q splits to (%q, %q)", p[0], p[1], key, ns, id)
		}
		if want == persistence.DefaultNamespace && key != p[1] {
			t.Errorf("plan %q of the default namespace is keyed %q, not by its id", p[1], key)
		}
		if other, dup := seen[key]; dup && (persistence.PlanNamespace(other[0]) != want || other[1] != p[1]) {
			t.Errorf("plans %v and %v share the key %q", other, p, key)
		}
		seen[key] = p
	}
}
