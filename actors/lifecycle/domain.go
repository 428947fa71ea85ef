package lifecycle

import (
	"time"

	"github.com/agentstate/agentstate/persistence"
	"google.golang.org/protobuf/proto"
)

// Replier delivers the one reply to a request (the shell's; the kernel
// never calls it).
type Replier interface {
	Reply(resp proto.Message, err error)
}

// Request is one request to an owner. The kernel orders and holds it; the
// domain reads Msg and may keep its own decision in Value.
type Request struct {
	// Seq is the request's arrival number in this owner, from 1.
	Seq uint64
	// Msg is the request, as the domain normalised it (Accept may
	// replace it).
	Msg proto.Message
	// Replier is where the shell delivers the reply.
	Replier Replier
	// Checked: the sender validated and normalised Msg already (the
	// façade does, in the caller's goroutine); otherwise Accept does.
	Checked bool
	// Value is the domain's (e.g. the outcome it computed on Accept).
	Value any
	// Principal is who sent the request (package principal): the audit
	// entries its write records name it.
	Principal string
}

// Batching says how a request may share a write with its neighbours in
// the queue.
type Batching int

const (
	// Alone: the request is a write of its own.
	Alone Batching = iota
	// Batched: the request rides with the Batched requests around it.
	Batched
	// Leads: Batched, but only as the first request of a write (it is
	// decided against the committed state, not against requests carried
	// before it in the same write).
	Leads
)

// Write is a command submitted to the writer and the requests it carries.
type Write struct {
	// Tag identifies the submission; a result with another tag is stale.
	Tag uint64
	Cmd persistence.Command
	// Carried are answered when the write is applied (Domain.Applied).
	Carried []*Request
	// Data is the domain's (what to do with the result).
	Data any
	// folded: Cmd carries the owner's activation (Folding); activates:
	// Cmd is the owner's Activate alone. Both are set by the kernel.
	folded, activates bool
	// Window opts the write into the commit window (Kernel: window.go):
	// once it committed, the next write may wait up to Window, and no
	// longer than this one took, for the callers it answered to come
	// back. Zero: the next write starts at once.
	Window time.Duration
}

// Outcome is what a domain makes of an applied write.
type Outcome struct {
	// Stale: memory and store may disagree; the kernel loads the state
	// again before anything else is decided.
	Stale bool
	// Rebase: the committed state stays as it was (the write failed and
	// stored nothing); the domain recomputes what it derived from the
	// queue (Domain.Rebase). Implied by Stale, after the load.
	Rebase bool
	// Requeue are carried requests that were not answered: they go back
	// to the head of the queue, before the requests waiting there (and
	// are refused with it when the owner is moving out).
	Requeue []*Request
	// Continue, when set, is the next command of the same requests: it is
	// submitted at once, before anything queued is decided (e.g. the next
	// chunk of a long truncation). The other fields are then ignored.
	Continue persistence.Command
	// ContinueData is the Write.Data of Continue.
	ContinueData any
	// Partial: the write was a blind fold (Folding.Blind), and its result
	// told the domain only part of the committed state: until a load,
	// the kernel decides only Partly requests and loads before any
	// other. Only a Folding domain sets it.
	Partial bool
}

// Domain is what one kind of owner decides. Its methods run on the
// owner's goroutine, one at a time; they answer requests only through a
// (the kernel turns those into Ready.Replies, in order).
type Domain interface {
	// Describe names the owner in errors ("session", id).
	Describe() (kind, id string)
	// Activate is the owner's first write: it takes the epoch.
	Activate() persistence.Command
	// Accept takes a request that arrived, in arrival order, once the
	// state is loaded. It returns true to queue it for a write; false
	// when it was answered (or is answered later, with another request:
	// a retry that follows its original).
	Accept(r *Request, a *Answers) bool
	// Batching says how r may share a write, and estimates its bytes.
	Batching(r *Request) (b Batching, size int)
	// Limits bounds one coalesced write: requests and estimated bytes.
	Limits() (maxRequests, maxBytes int)
	// Decide builds the write of run, the next requests of the queue in
	// arrival order (coalesced by the kernel). It answers through a the
	// requests it refuses, and returns the write carrying the others, or
	// nil when none needs one.
	Decide(run []*Request, epoch int64, a *Answers) *Write
	// Applied answers w's requests with res (res.Err non-nil: the write
	// stored nothing, or OUTCOME_UNKNOWN) and advances the state.
	Applied(w *Write, res persistence.Result, a *Answers) Outcome
	// Refuse answers a queued (accepted, unwritten) request with err.
	Refuse(r *Request, err error, a *Answers)
	// Rebase recomputes what the domain derived from the queued requests
	// after the committed state changed under them (loaded, rolled back).
	Rebase(queue []*Request)
	// Owns reports whether the loaded state holds anything to own; an
	// idle owner of nothing asks to be passivated at once.
	Owns() bool
}

// Folding is a Domain whose first write may carry its activation, so a
// cold owner's first write takes one trip through the writer instead of
// three (activation, load, write): the kernel loads first (reads need no
// epoch), decides the first run against that load, and submits its write
// folded into the activation (persistence.Activate with Then), which the
// store refuses whole unless the state still stands as loaded once the
// epoch is taken. A request that is Blind is decided with no load at all:
// the store decides what the load would have told, or refuses the write
// (a create of a session that exists; an append to one that is missing or
// closed, whose sequence and state the store reads and reports). After a
// blind append the domain may know its state only in part
// (Outcome.Partial): enough for Partly requests. Whatever the folded write's failure, its requests were not answered:
// they go back to the head of the queue, and the owner activates alone,
// loads and decides them again (today's path).
type Folding interface {
	// Folds reports whether the write of a run headed by r may carry the
	// activation.
	Folds(r *Request) bool
	// Blind reports whether r, heading a fresh owner's queue, is decided
	// without a load: against "nothing stored", because its write fails
	// when something is (a create); or by the store, inside the folded
	// write (an append).
	Blind(r *Request) bool
	// Partly reports whether r, heading the queue, can be decided on the
	// state a blind fold's result told (Outcome.Partial), without a load.
	Partly(r *Request) bool
	// Fold returns cmd, a write of epoch 0 that Decide built, folded into
	// the owner's activation; loaded: a load preceded the decision (what
	// it saw goes into the command, for the store to check).
	Fold(cmd persistence.Command, loaded bool) persistence.Command
}

// Answers collects replies in the order they are given.
type Answers struct {
	list []Reply
}

// Reply is one answer to one request.
type Reply struct {
	Req *Request
	Msg proto.Message
	Err error
}

// Reply answers r.
func (a *Answers) Reply(r *Request, resp proto.Message, err error) {
	a.list = append(a.list, Reply{Req: r, Msg: resp, Err: err})
}
