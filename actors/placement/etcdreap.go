package placement

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net"
	"sync"
	"syscall"
	"time"

	"github.com/asynkron/protoactor-go/remote"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// peerReaper shortens how long a killed member stays in the cluster. The
// library's etcd provider only learns that a member died when its lease
// expires: 3 s (hard-coded, and etcd rounds a shorter TTL up to its own
// minimum of about 2 s), plus up to half a second before etcd's lessor
// notices. Its sessions go unserved all that time.
//
// A member whose remote connection to a peer breaks (EndpointTerminatedEvent)
// probes the peer's remote port at once, and every reapSweep it probes every
// peer of its topology (a connection exists only to peers it sent to: one
// that just joined, or that no request went to, breaks none); when the
// port refuses the connection
// reapProbes times in a row, no process listens there any more — the peer
// is gone, not merely unreachable — and its registration is deleted from
// etcd. The provider's watch on every member then reports the departure at
// once, as it does a graceful leave.
//
// False positives are guarded three ways. A refusal is required, not a
// timeout: a partition, a slow peer or a full accept queue drop packets
// and time out; only a closed port (or a host that is up without the
// process) answers with a reset. Each member binds a fresh remote port per
// start, so a refused address is never a restarted member's. And the key is
// deleted only if it still holds the registration read (same create and
// mod revision), so a member registered again in between is left alone.
// Should a live member still lose its key, its own registration check sees
// it gone and it stops taking activations, saying so on /readyz (etcdHealth),
// as when its lease expires: the cluster never has two owners it believes
// in, only one member too few.
type peerReaper struct {
	kv      clientv3.KV
	prefix  string                 // PREFIX/CLUSTER/
	healthy func() bool            // this member's own registration is confirmed
	has     func(addr string) bool // the topology holds addr
	peers   func() []string        // the topology's other members
	dial    func(ctx context.Context, addr string) error
	log     *slog.Logger

	mu     sync.Mutex
	busy   map[string]bool // addresses being probed
	closed bool            // wait was called: no more reaps start
	wg     sync.WaitGroup
}

const (
	reapProbes   = 2                      // consecutive refusals that prove a peer gone
	reapProbeGap = 50 * time.Millisecond  // between them
	reapDial     = 500 * time.Millisecond // a probe's connect timeout
	reapTimeout  = 3 * time.Second        // a whole reap, etcd included
	// reapSweep is how often every peer is probed: a refused connection
	// costs its peer nothing (nothing listens); an accepted one is closed
	// before anything is sent, which the gRPC server drops silently.
	reapSweep = 250 * time.Millisecond
)

func newPeerReaper(kv clientv3.KV, prefix string, healthy func() bool, has func(string) bool, peers func() []string, log *slog.Logger) *peerReaper {
	return &peerReaper{kv: kv, prefix: prefix, healthy: healthy, has: has, peers: peers, log: log, busy: map[string]bool{},
		dial: func(ctx context.Context, addr string) error {
			c, err := (&net.Dialer{Timeout: reapDial}).DialContext(ctx, "tcp", addr)
			if err == nil {
				c.Close()
			}
			return err
		}}
}

// event is the reaper's event-stream subscriber: a broken connection to a
// member of the topology starts a reap of its address. ctx ends the reaps
// when the member leaves.
func (r *peerReaper) event(ctx context.Context, ev any) {
	if e, ok := ev.(*remote.EndpointTerminatedEvent); ok {
		r.start(ctx, e.Address)
	}
}

// run starts a reap of every peer each reapSweep until ctx ends.
func (r *peerReaper) run(ctx context.Context) {
	t := time.NewTicker(reapSweep)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		for _, addr := range r.peers() {
			r.start(ctx, addr)
		}
	}
}

// start reaps addr in the background if it is a member of the topology
// and no reap of it runs.
func (r *peerReaper) start(ctx context.Context, addr string) {
	if !r.has(addr) || ctx.Err() != nil {
		return
	}
	r.mu.Lock()
	if r.busy[addr] || r.closed {
		r.mu.Unlock()
		return
	}
	r.busy[addr] = true
	r.wg.Add(1)
	r.mu.Unlock()
	go func() {
		defer r.wg.Done()
		ctx, cancel := context.WithTimeout(ctx, reapTimeout)
		defer cancel()
		r.reap(ctx, addr)
		r.mu.Lock()
		delete(r.busy, addr)
		r.mu.Unlock()
	}()
}

// reap deletes the registration of the member at addr if its port refuses
// connections, and reports whether it did.
func (r *peerReaper) reap(ctx context.Context, addr string) bool {
	if !r.healthy() {
		return false // cut off from etcd: the view of the cluster is frozen
	}
	for i := range reapProbes {
		if i > 0 {
			t := time.NewTimer(reapProbeGap)
			select {
			case <-ctx.Done():
				t.Stop()
				return false
			case <-t.C:
			}
		}
		if err := r.dial(ctx, addr); !errors.Is(err, syscall.ECONNREFUSED) {
			return false // listening, or unreachable (not proof of death): its lease decides
		}
	}
	resp, err := r.kv.Get(ctx, r.prefix, clientv3.WithPrefix())
	if err != nil {
		return false
	}
	reaped := false
	for _, kv := range resp.Kvs {
		var n registeredNode
		if json.Unmarshal(kv.Value, &n) != nil || n.addr() != addr {
			continue
		}
		key := string(kv.Key)
		tr, err := r.kv.Txn(ctx).If(
			clientv3.Compare(clientv3.CreateRevision(key), "=", kv.CreateRevision),
			clientv3.Compare(clientv3.ModRevision(key), "=", kv.ModRevision),
		).Then(clientv3.OpDelete(key)).Commit()
		if err != nil || !tr.Succeeded {
			continue // gone already (another member reaped it) or registered again
		}
		reaped = true
		r.log.Warn("cluster membership: a member's connection broke and its port refuses connections; its registration was deleted from etcd so the others rebalance now, not when its lease expires",
			"key", key, "member", addr)
	}
	return reaped
}

// wait starts no more reaps and waits for those under way (they end with
// the member's context).
func (r *peerReaper) wait() {
	r.mu.Lock()
	r.closed = true
	r.mu.Unlock()
	r.wg.Wait()
}
