package directory

import (
	"sync"

	"github.com/asynkron/protoactor-go/actor"
)

// LiveOwners lets callers reach a live owner without relaying through the
// directory's mailbox: the directory publishes each owner it spawned and
// withdraws it before it tells it to passivate. A caller that finds no
// open owner sends to the directory, which spawns one (spawn and terminate
// stay serialized there, so at most one owner per key is alive).
//
// Invariant: every request sent to an owner through LiveOwners is in the
// owner's mailbox before the directory's Passivate: a sender holds the
// entry's read lock while it sends, and the directory closes the entry
// under the write lock before it sends Passivate. So no request reaches an
// owner after it stopped.
type LiveOwners struct {
	m sync.Map // key -> *liveOwner
}

type liveOwner struct {
	mu     sync.RWMutex
	pid    *actor.PID
	closed bool
}

// Send hands msg to key's live owner and reports whether it could; when
// it could not, the caller sends msg to the directory.
func (l *LiveOwners) Send(root *actor.RootContext, key string, msg any) bool {
	v, ok := l.m.Load(key)
	if !ok {
		return false
	}
	o := v.(*liveOwner)
	o.mu.RLock()
	defer o.mu.RUnlock()
	if o.closed {
		return false
	}
	root.Send(o.pid, msg)
	return true
}

func (l *LiveOwners) open(key string, pid *actor.PID) {
	l.m.Store(key, &liveOwner{pid: pid})
}

// close withdraws key's owner pid (if it is the one published); after it
// returns, no sender can reach pid through l.
func (l *LiveOwners) close(key string, pid *actor.PID) {
	v, ok := l.m.Load(key)
	if !ok {
		return
	}
	o := v.(*liveOwner)
	if !o.pid.Equal(pid) {
		return
	}
	o.mu.Lock()
	o.closed = true
	o.mu.Unlock()
	l.m.CompareAndDelete(key, o)
}
