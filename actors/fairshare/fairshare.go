// Package fairshare apportions a node's budgets (the writer's backlog,
// the requests in flight, the gRPC streams) among the principals using
// them, so that one principal's flood cannot starve another.
//
// The scheme is a per-principal cap within the global cap, the cap being
// an equal share of the budget among the principals using it now: a
// principal may take more only while it holds at most
// budget / n, where n counts the principals that hold some of the budget
// or were refused some within the last Window. Alone, a principal may
// take the whole budget; against one other, half; and a principal that
// holds nothing is admitted whenever the budget has room, so a request
// larger than a share still runs. A refused principal counts at once, so
// the principal that held everything is held to its share from the next
// request on, and the budget it gives back (requests end in milliseconds)
// goes to the newcomer.
//
// The global cap stays where it was (a semaphore of the budget's owner):
// a Ledger only decides whether a principal is within its share. The
// principal travels in the request's context (With, From); a request
// without one (the embedding program's own calls) is not apportioned.
package fairshare

import (
	"context"
	"sync"
	"time"
)

// Window is how long a principal refused for want of room keeps counting
// as one that uses the budget, though it holds none of it.
const Window = time.Second

// RemotePeers is the principal the requests of the Proto.Actor remote
// endpoint's peers are apportioned as, together: a share of their own
// beside the gRPC API's principals. The parentheses keep it apart from
// any principal's name in an identities file, which has none.
const RemotePeers = "(remote endpoint)"

type tenantKey struct{}

// With is ctx carrying the principal that budgets are apportioned by.
func With(ctx context.Context, principal string) context.Context {
	return context.WithValue(ctx, tenantKey{}, principal)
}

// From is the principal of ctx ("" when none: not apportioned).
func From(ctx context.Context) string {
	p, _ := ctx.Value(tenantKey{}).(string)
	return p
}

// Ledger counts what each principal holds of one budget of Cap units and
// decides whether a principal is within its share. It is safe for
// concurrent use; Take and Give do not allocate once a principal's
// account exists (accounts of principals that hold nothing are kept on a
// free list for reuse).
//
// Invariants (under mu): holding is the number of accounts with held > 0;
// waiting holds the accounts with held == 0 refused within Window of
// their refusal (pruned lazily); an account that holds nothing and is not
// waiting stays in the map (so a principal's steady use writes no map
// entry) until the map passes maxIdle such accounts, when they are swept
// to the free list.
type Ledger struct {
	cap int64
	// contended, when > 0, is the most a principal's share may be while
	// another principal uses the budget (WithContendedShare).
	contended int64
	// takers are the last two distinct principals that took, and when:
	// with a contended share, another principal that took within Window
	// makes the budget contended even when it holds nothing now (its
	// requests come and go; the flood's stay).
	takers [2]taker
	window int64
	now    func() int64

	mu      sync.Mutex
	users   map[string]*account
	spare   []*account
	waiting []*account
	holding int
}

// maxIdle is how many accounts that hold nothing a Ledger keeps in its map
// before it sweeps them (principals come and go with an identities
// file's reloads or a token's claims).
const maxIdle = 1024

type taker struct {
	name string
	at   int64
}

type account struct {
	name      string
	held      int64
	refusedAt int64
	waiting   bool
}

// NewLedger returns the ledger of a budget of cap units.
func NewLedger(cap int64) *Ledger {
	return &Ledger{cap: cap, window: int64(Window), now: monotonic, users: map[string]*account{}}
}

var epoch = time.Now()

func monotonic() int64 { return int64(time.Since(epoch)) }

// Share is the most a principal that already holds some of the budget may
// hold now: the budget divided among the principals using it, counting
// principal itself.
func (l *Ledger) Share(principal string) int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.pruneLocked(l.now())
	return l.shareLocked(l.users[principal])
}

func (l *Ledger) shareLocked(a *account) int64 {
	n := l.holding + len(l.waiting)
	if a == nil || (a.held == 0 && !a.waiting) {
		n++ // the asker, not yet counted
	}
	share := l.cap / int64(max(n, 1))
	if l.contended > 0 && (n > 1 || (a != nil && l.tookBesides(a.name))) {
		share = min(share, l.contended)
	}
	return share
}

// tookBesides reports whether a principal other than name took within
// Window.
func (l *Ledger) tookBesides(name string) bool {
	now := l.now()
	for _, t := range l.takers {
		if t.name != "" && t.name != name && now-t.at < l.window {
			return true
		}
	}
	return false
}

func (l *Ledger) tookLocked(name string) {
	if l.contended == 0 {
		return
	}
	now := l.now()
	if l.takers[0].name != name {
		l.takers[1] = l.takers[0]
	}
	l.takers[0] = taker{name: name, at: now}
}

// WithContendedShare caps a principal's share at max while another
// principal uses the budget, and returns l. An equal share of a large
// budget is still a long queue: a principal that holds half of the
// writer's in-flight appends (thousands) makes every transaction, and so
// every other principal's wait, as long as its own work. A principal
// alone still has the whole budget.
func (l *Ledger) WithContendedShare(max int64) *Ledger {
	l.contended = max
	return l
}

// Take takes w units for principal if that keeps it within its share (or
// it holds nothing); false when it would not, and the principal is then
// refused and counts as using the budget for Window. The caller takes the
// units of the global budget after Take, and gives them back with Give
// (and calls Refused) when the global budget has no room. The empty
// principal is not apportioned: Take always succeeds and counts nothing;
// nor is a take of nothing (w <= 0).
func (l *Ledger) Take(principal string, w int64) bool {
	if principal == "" || w <= 0 {
		return true
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.waiting) > 0 {
		l.pruneLocked(l.now())
	}
	a := l.users[principal]
	if a != nil && a.held > 0 && a.held+w > l.shareLocked(a) {
		l.refuseLocked(a, l.now())
		return false
	}
	if a == nil {
		a = l.accountLocked(principal)
	}
	if a.held == 0 {
		l.holding++
		if a.waiting {
			l.unwaitLocked(a)
		}
	}
	a.held += w
	l.tookLocked(principal)
	return true
}

// Give gives back w units principal took.
func (l *Ledger) Give(principal string, w int64) {
	if principal == "" || w <= 0 {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	a := l.users[principal]
	if a == nil || a.held < w {
		panic("fairshare: Give of more than was taken")
	}
	a.held -= w
	if a.held == 0 {
		l.holding--
		if len(l.users)-l.holding-len(l.waiting) > maxIdle {
			l.sweepLocked()
		}
	}
}

// sweepLocked moves the accounts that hold nothing and are not waiting
// to the free list.
func (l *Ledger) sweepLocked() {
	for _, a := range l.users {
		l.dropLocked(a)
	}
}

// Refused records that principal was refused for want of room in the
// global budget: it counts as using the budget for Window, so the others
// are held to their shares.
func (l *Ledger) Refused(principal string) {
	if principal == "" {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	a := l.users[principal]
	if a == nil {
		a = l.accountLocked(principal)
	}
	l.refuseLocked(a, now)
}

// Holds is what principal holds now.
func (l *Ledger) Holds(principal string) int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	if a := l.users[principal]; a != nil {
		return a.held
	}
	return 0
}

func (l *Ledger) refuseLocked(a *account, now int64) {
	a.refusedAt = now
	if a.held == 0 && !a.waiting {
		a.waiting = true
		l.waiting = append(l.waiting, a)
	}
}

func (l *Ledger) accountLocked(principal string) *account {
	var a *account
	if n := len(l.spare); n > 0 {
		a, l.spare = l.spare[n-1], l.spare[:n-1]
		*a = account{name: principal}
	} else {
		a = &account{name: principal}
	}
	l.users[principal] = a
	return a
}

// dropLocked forgets an account that holds nothing and is not waiting.
func (l *Ledger) dropLocked(a *account) {
	if a.held != 0 || a.waiting {
		return
	}
	delete(l.users, a.name)
	l.spare = append(l.spare, a)
}

func (l *Ledger) unwaitLocked(a *account) {
	for i, w := range l.waiting {
		if w == a {
			l.waiting = append(l.waiting[:i], l.waiting[i+1:]...)
			break
		}
	}
	a.waiting = false
}

// pruneLocked ends the waiting of the accounts refused more than window
// ago.
func (l *Ledger) pruneLocked(now int64) {
	for i := 0; i < len(l.waiting); {
		a := l.waiting[i]
		if now-a.refusedAt <= l.window {
			i++
			continue
		}
		l.waiting = append(l.waiting[:i], l.waiting[i+1:]...)
		a.waiting = false
		l.dropLocked(a)
	}
}
