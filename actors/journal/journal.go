package journal

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/agentstate/agentstate/actors/session"
	sessionv1 "github.com/agentstate/agentstate/messages/agentstate/session/v1"
	"github.com/agentstate/agentstate/messages/errs"
	"github.com/asynkron/protoactor-go/persistence"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoregistry"
)

// Sessions is what a Journal needs of the sessions service.
// *session.Service implements it; every write it takes goes through the
// session's actor and the group-commit writer.
type Sessions interface {
	Get(context.Context, *sessionv1.GetSessionRequest) (*sessionv1.GetSessionResponse, error)
	Create(context.Context, *sessionv1.CreateSessionRequest) (*sessionv1.CreateSessionResponse, error)
	Append(context.Context, *sessionv1.AppendRequest) (*sessionv1.AppendResponse, error)
	ListMessages(context.Context, *sessionv1.ListMessagesRequest) (*sessionv1.ListMessagesResponse, error)
	Truncate(context.Context, *sessionv1.TruncateRequest) (*sessionv1.TruncateResponse, error)
	PutSnapshot(context.Context, *sessionv1.PutSnapshotRequest) (*sessionv1.PutSnapshotResponse, error)
	GetSnapshot(context.Context, *sessionv1.GetSnapshotRequest) (*sessionv1.GetSnapshotResponse, error)
	DeleteSnapshot(context.Context, *sessionv1.DeleteSnapshotRequest) (*sessionv1.DeleteSnapshotResponse, error)
}

var _ Sessions = (*session.Service)(nil)

// Config configures a Journal; zero values take the defaults.
type Config struct {
	// Namespace holds the actors' sessions (their client keys are unique
	// within it). Default "protoactor".
	Namespace string
	// SnapshotInterval is what GetSnapshotInterval returns: the Mixin asks
	// the actor for a snapshot at every event index that is a multiple of
	// it. Returned as given (see the package doc).
	SnapshotInterval int
	// Timeout bounds each call to the sessions service (one write, one
	// page of a replay). Default 30 s.
	Timeout time.Duration
	// Types resolves the stored type names of events and snapshots on
	// replay. Default protoregistry.GlobalTypes.
	Types *protoregistry.Types
}

const (
	defaultNamespace = "protoactor"
	defaultTimeout   = 30 * time.Second
	// maxCachedIDs bounds the actor name → session id cache; past it an
	// arbitrary entry is dropped (a lookup costs one indexed read).
	maxCachedIDs = 1 << 16
)

// replayPage is the ListMessages page size of a replay (its maximum); the
// tests lower it to replay across pages.
var replayPage int32 = 1000

// Journal is a persistence.Provider whose state is itself: one Journal
// serves every actor that uses it, concurrently.
type Journal struct {
	svc Sessions
	cfg Config

	mu  sync.Mutex
	ids map[string]string // actor name → session id, only ids seen stored
}

var (
	_ persistence.Provider      = (*Journal)(nil)
	_ persistence.ProviderState = (*Journal)(nil)
)

// New returns a Journal writing through svc.
func New(svc Sessions, cfg Config) *Journal {
	if cfg.Namespace == "" {
		cfg.Namespace = defaultNamespace
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = defaultTimeout
	}
	if cfg.Types == nil {
		cfg.Types = protoregistry.GlobalTypes
	}
	return &Journal{svc: svc, cfg: cfg, ids: map[string]string{}}
}

// Error is the panic value of a failed call: Op on the journal of Actor
// (at event or snapshot Index, -1 when the call has none) failed with Err.
// Unless Err is OUTCOME_UNKNOWN, nothing of the call was stored.
type Error struct {
	Op    string
	Actor string
	Index int
	Err   error
}

func (e *Error) Error() string {
	return fmt.Sprintf("journal: %s for actor %q at index %d: %v", e.Op, e.Actor, e.Index, e.Err)
}

func (e *Error) Unwrap() error { return e.Err }

// GetState returns j: the Mixin asks each actor's provider for its state.
func (j *Journal) GetState() persistence.ProviderState { return j }

// Restart does nothing: the store is the state, and nothing is cached that
// a failed call did not already drop.
func (j *Journal) Restart() {}

// GetSnapshotInterval returns Config.SnapshotInterval.
func (j *Journal) GetSnapshotInterval() int { return j.cfg.SnapshotInterval }

// PersistEvent appends event as the actor's event index: stored only if
// index is the session's next sequence. It returns once committed, and
// panics with an *Error otherwise.
func (j *Journal) PersistEvent(actorName string, index int, event proto.Message) {
	msg, err := encodeEvent(event)
	if err != nil {
		panic(j.fail("persist event", actorName, index, err))
	}
	ctx, cancel := j.ctx()
	defer cancel()
	id, _, err := j.sessionID(ctx, actorName, true)
	if err == nil {
		expected := int64(index)
		_, err = j.svc.Append(ctx, &sessionv1.AppendRequest{
			SessionId:            id,
			Messages:             []*sessionv1.NewMessage{msg},
			ExpectedNextSequence: &expected,
		})
	}
	if err != nil {
		panic(j.fail("persist event", actorName, index, err))
	}
}

// GetEvents calls callback with each stored event from index start up to
// end (exclusive; 0: to the last), in index order. Truncated indexes are
// skipped: the first event passed may lie past start.
func (j *Journal) GetEvents(actorName string, start, end int, callback func(e interface{})) {
	id, ok := j.lookup("get events", actorName, start)
	if !ok {
		return
	}
	from := int64(max(start, 0))
	for end <= 0 || from < int64(end) {
		page, err := j.listPage(id, from)
		if err != nil {
			panic(j.fail("get events", actorName, int(from), err))
		}
		if len(page.GetMessages()) == 0 {
			return
		}
		for _, m := range page.GetMessages() {
			if end > 0 && m.GetSequence() >= int64(end) {
				return
			}
			ev, err := j.decodeEvent(m)
			if err != nil {
				panic(j.fail("get events", actorName, int(m.GetSequence()), err))
			}
			callback(ev)
		}
		from = page.GetNextSequence()
	}
}

func (j *Journal) listPage(id string, from int64) (*sessionv1.ListMessagesResponse, error) {
	ctx, cancel := j.ctx()
	defer cancel()
	return j.svc.ListMessages(ctx, &sessionv1.ListMessagesRequest{SessionId: id, FromSequence: from, Limit: replayPage})
}

// DeleteEvents removes the events with index <= inclusiveToIndex; later
// events keep their indexes and the next index does not change.
func (j *Journal) DeleteEvents(actorName string, inclusiveToIndex int) {
	if inclusiveToIndex < 0 {
		return
	}
	id, ok := j.lookup("delete events", actorName, inclusiveToIndex)
	if !ok {
		return
	}
	ctx, cancel := j.ctx()
	defer cancel()
	if _, err := j.svc.Truncate(ctx, &sessionv1.TruncateRequest{SessionId: id, ThroughSequence: int64(inclusiveToIndex)}); err != nil {
		panic(j.fail("delete events", actorName, inclusiveToIndex, err))
	}
}

// GetSnapshot returns the actor's snapshot and the index of the first
// event it does not cover.
func (j *Journal) GetSnapshot(actorName string) (snapshot interface{}, eventIndex int, ok bool) {
	id, found := j.lookup("get snapshot", actorName, -1)
	if !found {
		return nil, 0, false
	}
	ctx, cancel := j.ctx()
	defer cancel()
	resp, err := j.svc.GetSnapshot(ctx, &sessionv1.GetSnapshotRequest{SessionId: id})
	if err != nil {
		panic(j.fail("get snapshot", actorName, -1, err))
	}
	s := resp.GetSnapshot()
	if s == nil {
		return nil, 0, false
	}
	msg, err := j.decodeSnapshot(s.GetData())
	if err != nil {
		panic(j.fail("get snapshot", actorName, int(s.GetSequence()+1), err))
	}
	return msg, int(s.GetSequence() + 1), true
}

// PersistSnapshot replaces the actor's snapshot with one that covers the
// events before snapshotIndex.
func (j *Journal) PersistSnapshot(actorName string, snapshotIndex int, snapshot proto.Message) {
	data, err := encodeSnapshot(snapshot)
	if err != nil {
		panic(j.fail("persist snapshot", actorName, snapshotIndex, err))
	}
	ctx, cancel := j.ctx()
	defer cancel()
	id, _, err := j.sessionID(ctx, actorName, true)
	if err == nil {
		_, err = j.svc.PutSnapshot(ctx, &sessionv1.PutSnapshotRequest{SessionId: id, Sequence: int64(snapshotIndex) - 1, Data: data})
	}
	if err != nil {
		panic(j.fail("persist snapshot", actorName, snapshotIndex, err))
	}
}

// DeleteSnapshots removes the actor's snapshot if its index is at most
// inclusiveToIndex.
func (j *Journal) DeleteSnapshots(actorName string, inclusiveToIndex int) {
	id, ok := j.lookup("delete snapshots", actorName, inclusiveToIndex)
	if !ok {
		return
	}
	ctx, cancel := j.ctx()
	defer cancel()
	if _, err := j.svc.DeleteSnapshot(ctx, &sessionv1.DeleteSnapshotRequest{SessionId: id, ThroughSequence: int64(inclusiveToIndex) - 1}); err != nil {
		panic(j.fail("delete snapshots", actorName, inclusiveToIndex, err))
	}
}

func (j *Journal) ctx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), j.cfg.Timeout)
}

// lookup finds the actor's session without creating it; ok is false when
// the actor never wrote. A failed lookup panics.
func (j *Journal) lookup(op, actorName string, index int) (id string, ok bool) {
	ctx, cancel := j.ctx()
	defer cancel()
	id, ok, err := j.sessionID(ctx, actorName, false)
	if err != nil {
		panic(j.fail(op, actorName, index, err))
	}
	return id, ok
}

// sessionID returns the session of the actor's journal, creating it when
// create is set. Two journals (processes) creating one actor's session at
// once both end with the session whose key won: the loser's create is
// ALREADY_EXISTS, and it reads the winner's.
func (j *Journal) sessionID(ctx context.Context, actorName string, create bool) (string, bool, error) {
	j.mu.Lock()
	id, ok := j.ids[actorName]
	j.mu.Unlock()
	if ok {
		return id, true, nil
	}
	key := clientKey(actorName)
	get := func() (string, error) {
		resp, err := j.svc.Get(ctx, &sessionv1.GetSessionRequest{Namespace: j.cfg.Namespace, ClientKey: key})
		return resp.GetSession().GetSessionId(), err
	}
	id, err := get()
	if errs.CodeOf(err) == errs.NotFoundCode {
		if !create {
			return "", false, nil
		}
		var resp *sessionv1.CreateSessionResponse
		resp, err = j.svc.Create(ctx, &sessionv1.CreateSessionRequest{ActorName: key, Namespace: j.cfg.Namespace, ClientKey: key})
		id = resp.GetSession().GetSessionId()
		if errs.CodeOf(err) == errs.AlreadyExistsCode {
			id, err = get()
		}
	}
	if err != nil {
		return "", false, err
	}
	j.mu.Lock()
	if len(j.ids) >= maxCachedIDs {
		for k := range j.ids {
			delete(j.ids, k)
			break
		}
	}
	j.ids[actorName] = id
	j.mu.Unlock()
	return id, true, nil
}

// fail forgets the actor's session id (it may have been deleted, or be
// another's now) and describes the failure.
func (j *Journal) fail(op, actorName string, index int, err error) *Error {
	j.mu.Lock()
	delete(j.ids, actorName)
	j.mu.Unlock()
	return &Error{Op: op, Actor: actorName, Index: index, Err: err}
}
