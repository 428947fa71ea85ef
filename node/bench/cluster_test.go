package bench

import (
	"context"
	"strings"
	"testing"
)

// A cluster run with a kind it does not know, or nothing to run, fails
// before it creates a database or starts a member.
func TestRunClusterRefusesBadConfig(t *testing.T) {
	ok := ClusterConfig{Postgres: "postgres://nowhere.invalid/x", Serve: []string{"node", "serve"}, Members: 1,
		Kind: "append", Callers: 1, Ops: 1, Sessions: 1}
	for name, c := range map[string]struct {
		mut  func(*ClusterConfig)
		want string
	}{
		"unknown kind": {func(c *ClusterConfig) { c.Kind = "delete" }, `unknown cluster kind "delete"`},
		"no members":   {func(c *ClusterConfig) { c.Members = 0 }, "members, callers, ops and sessions ≥ 1"},
		"no serve":     {func(c *ClusterConfig) { c.Serve = nil }, "serve command"},
	} {
		t.Run(name, func(t *testing.T) {
			cfg := ok
			c.mut(&cfg)
			_, err := RunCluster(context.Background(), cfg)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err = %v, want one naming %q", err, c.want)
			}
		})
	}
	for _, k := range ClusterKinds {
		if _, ok := clusterOps[k]; !ok {
			t.Errorf("kind %s has no operation", k)
		}
	}
}

// The lock-wait share is the locked samples over the busy ones, 0 with none.
func TestLockShare(t *testing.T) {
	if got := (samples{}).lockShare(); got != 0 {
		t.Fatalf("no samples: %v", got)
	}
	if got := (samples{busy: 8, locked: 2}).lockShare(); got != 0.25 {
		t.Fatalf("2 of 8: %v", got)
	}
}
