package directory_test

import (
	"testing"
	"time"

	"github.com/agentstate/agentstate/actors/directory"
)

// With MaxOwners, activating one owner more passivates the oldest-spawned
// one: the live owners never stay above the bound, the newest are the
// ones kept, and a passivated owner's key activates again with its state.
func TestMaxOwnersPassivatesTheOldest(t *testing.T) {
	sys := newSystem(t)
	store := &counterStore{counts: map[string]int64{}, alive: map[string]int{}}
	cfg := testConfig(store)
	cfg.MaxOwners = 4
	pid := sys.Root.Spawn(directory.Props(cfg))
	keys := []string{"a", "b", "c", "d", "e", "f", "g", "h", "i", "j"}
	for _, k := range keys {
		if got := ask(t, sys, pid, k); got != 1 {
			t.Fatalf("%s counted %d, want 1", k, got)
		}
	}
	// The evicted owners stop once their Passivate is handled.
	deadline := time.After(10 * time.Second)
	for {
		n, stopped := store.live()
		if n == cfg.MaxOwners {
			break
		}
		if n < cfg.MaxOwners {
			t.Fatalf("%d owners live, want %d: the newest were passivated too", n, cfg.MaxOwners)
		}
		select {
		case <-stopped:
		case <-deadline:
			t.Fatalf("%d owners still live, want %d", n, cfg.MaxOwners)
		}
	}
	store.mu.Lock()
	for _, k := range keys[len(keys)-cfg.MaxOwners:] {
		if store.alive[k] != 1 {
			t.Errorf("newest key %s has %d live owners, want 1", k, store.alive[k])
		}
	}
	store.mu.Unlock()
	spawns := store.spawns.Load()
	if got := ask(t, sys, pid, "a"); got != 2 {
		t.Fatalf("a counted %d after reactivation, want 2 (state lost)", got)
	}
	if store.spawns.Load() != spawns+1 {
		t.Fatalf("asking the evicted key a spawned %d owners, want 1", store.spawns.Load()-spawns)
	}
}
