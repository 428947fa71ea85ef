package server

import (
	"context"
	"sync"
)

// DefaultNamespaceCacheEntries bounds the sessions whose namespace the
// authorizer remembers (about 100 bytes each).
const DefaultNamespaceCacheEntries = 1 << 16

// namespaceCache remembers the namespace of sessions the store returned,
// so that a principal limited to some namespaces costs no store read per
// request on a session it used before.
//
// Invariants: it holds only what the store answered for a session that
// existed; a session's namespace never changes and its id is never reused
// (ids are ULIDs the node makes on create and on import), so an entry
// stays true for as long as the session exists. A deleted session's entry
// may linger: the authorizer only grants on it (the handler then finds no
// session and answers NOT_FOUND) and decides any refusal again from the
// store (decider.session), so a deleted session answers NOT_FOUND as a
// missing one. Misses are never remembered (ids an attacker makes up would
// fill it). At most max entries: two generations of max/2, the older
// dropped whole when the newer fills, so what is used stays.
type namespaceCache struct {
	max int

	mu        sync.Mutex
	cur, prev map[string]string
}

func newNamespaceCache(max int) *namespaceCache {
	if max < 2 {
		max = 2
	}
	return &namespaceCache{max: max, cur: make(map[string]string)}
}

// get is id's namespace, remembered (cached true) or read by load.
func (c *namespaceCache) get(ctx context.Context, id string, load func(context.Context, string) (string, error)) (ns string, cached bool, err error) {
	c.mu.Lock()
	ns, ok := c.cur[id]
	if !ok {
		if ns, ok = c.prev[id]; ok {
			c.putLocked(id, ns)
		}
	}
	c.mu.Unlock()
	if ok {
		return ns, true, nil
	}
	if ns, err = load(ctx, id); err != nil {
		return "", false, err
	}
	c.mu.Lock()
	c.putLocked(id, ns)
	c.mu.Unlock()
	return ns, false, nil
}

func (c *namespaceCache) putLocked(id, ns string) {
	if len(c.cur) >= c.max/2 {
		c.prev, c.cur = c.cur, make(map[string]string, c.max/2)
	}
	c.cur[id] = ns
}

// forget drops id (a refusal is decided again from the store).
func (c *namespaceCache) forget(id string) {
	c.mu.Lock()
	delete(c.cur, id)
	delete(c.prev, id)
	c.mu.Unlock()
}

// len is how many entries it holds.
func (c *namespaceCache) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.cur) + len(c.prev)
}
