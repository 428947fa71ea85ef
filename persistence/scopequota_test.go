package persistence

import "testing"

func TestScopeNamespace(t *testing.T) {
	for name, want := range map[string]string{
		"app:myapp":          "myapp",
		"user:myapp/alice":   "myapp",
		"app:my%20app":       "my app",
		"app:my%2Fapp":       "my/app",
		"app:":               DefaultScopeNamespace,
		"plain":              DefaultScopeNamespace,
		"user:team-a/x/y":    "team-a",
		"app:bad%zzescape/u": "bad%zzescape",
	} {
		if got := ScopeNamespace(name); got != want {
			t.Errorf("ScopeNamespace(%q) = %q, want %q", name, got, want)
		}
	}
}
