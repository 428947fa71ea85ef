package persistence

import (
	"maps"
	"slices"

	sessionv1 "github.com/agentstate/agentstate/messages/agentstate/session/v1"
	"github.com/agentstate/agentstate/messages/errs"
)

// Stored bytes (Quota.MaxBytes). What a namespace stores, as its stores
// count it, is the sum of, each as stored (UTF-8 bytes of text, bytes of
// a blob):
//   - each message of its sessions: content + metadata_json (MessageBytes);
//   - each of its sessions' state (state_json, "{}" when empty: 2 bytes)
//     and snapshot (data);
//   - each shared scope of its (ScopeNamespace): state_json.
//
// Ids, keys, kinds, times, links, audit entries and the session rows'
// other columns do not count: they are bounded per message or per session
// (max_sessions bounds those). Every store keeps a running total per
// namespace (the default namespace's spelled DefaultScopeNamespace), moved
// in the same transaction as each write that stores or removes counted
// bytes, so it holds exactly across a crash; a schema migration counted
// the data stored before it.

// MessageBytes is what a stored message counts.
func MessageBytes(content, metadataJSON string) int64 {
	return int64(len(content) + len(metadataJSON))
}

// MessagesBytes is what ms count once stored (an empty metadata_json is
// stored as "{}").
func MessagesBytes(ms []*sessionv1.Message) int64 {
	var n int64
	for _, m := range ms {
		n += MessageBytes(m.GetContent(), m.GetMetadataJson())
		if m.GetMetadataJson() == "" {
			n += int64(len(EmptyState))
		}
	}
	return n
}

// StateChange is what a session's state moving from before to after
// adds (negative: frees).
func StateChange(before, after string) int64 { return StateBytes(after) - StateBytes(before) }

// TurnCharges are what storing a turn adds: its messages ms and its
// state change (stateBytes) to session id's namespace, and its scope
// writes to theirs.
func TurnCharges(id string, ms []*sessionv1.Message, stateBytes int64, scopes []ScopeWrite) []Charge {
	return append(ScopeCharges(scopes), Charge{Session: id, Bytes: MessagesBytes(ms) + stateBytes})
}

// CreateCharges are what c would add: the session's state, messages and
// snapshot to its namespace, its scopes (computed as scopes) to theirs.
func CreateCharges(c *CreateSession, scopes []ScopeWrite) []Charge {
	n := StateBytes(c.State) + MessagesBytes(c.Messages) + int64(len(c.Snapshot.GetData()))
	return append(ScopeCharges(scopes), Charge{Namespace: c.Session.GetNamespace(), Bytes: n})
}

// StateBytes is what a stored state counts; "" is stored as "{}".
func StateBytes(state string) int64 {
	if state == "" {
		return int64(len(EmptyState))
	}
	return int64(len(state))
}

// BytesQuotaError is the refusal of a write that would take namespace ns
// past its quota of max stored bytes (it stores stored; the write adds
// add): FAILED_PRECONDITION, like the other quotas, freed only by
// deletes.
func BytesQuotaError(ns string, max, stored, add int64) error {
	return errs.FailedPrecondition("namespace %q: its quota of %d stored bytes is reached: it stores %d and the write adds %d; "+
		"delete sessions, messages, snapshots or state of the namespace first", orDefaultNamespace(ns), max, stored, add)
}

// UsageDialect is what a Usage reads of its transaction, only when a
// namespace's quota of stored bytes is to be checked.
type UsageDialect interface {
	// SessionNamespace is a stored session's namespace; ok is false when
	// the session does not exist.
	SessionNamespace(sessionID string) (ns string, ok bool, err error)
	// StoredBytes is the namespace's running total as committed.
	StoredBytes(ns string) (int64, error)
}

// Usage is one transaction's ledger of the stored bytes it adds and
// removes, by namespace, for the store to add to its running totals
// before COMMIT (Deltas), and the check of the quotas of stored bytes
// (Check). A store moves it at every statement that stores or removes
// counted bytes (or when it queues that statement, for an attempt that
// is abandoned whole if one fails), so that it always equals what the
// transaction changed. A session's bytes are booked under the session
// until its namespace is known (Learn): the store resolves them in the
// statement that adds the totals, which saves a lookup per append.
//
// Mark and Restore follow the savepoints of a replay: a command rolled
// back takes its bookings with it. Until the first Mark (an attempt
// without savepoints, abandoned whole on any failure) nothing is logged,
// and the maps are made on first use: a transaction that books one
// namespace costs a map of one key.
type Usage struct {
	quotas Quotas
	d      UsageDialect
	ns     map[string]int64
	sess   map[string]int64
	names  map[string]string
	// read are the running totals read for checks, by namespace.
	read    map[string]int64
	logging bool
	log     []booking
	mark    int
}

type booking struct {
	session bool
	key     string
	n       int64
}

// NewUsage is the ledger of a transaction under quotas q (nil: none),
// reading through d.
func NewUsage(q Quotas, d UsageDialect) *Usage {
	return &Usage{quotas: q, d: d}
}

// Checks reports whether the transaction checks quotas of stored bytes
// (some are set). Only then must every booking be made before the next
// check; otherwise a store may hold an append's bytes until its statement
// that moves the session tells the session's namespace.
func (u *Usage) Checks() bool { return u.quotas != nil }

func (u *Usage) book(session bool, key string, n int64) {
	if n == 0 {
		return
	}
	if session {
		if u.sess == nil {
			u.sess = make(map[string]int64, 64)
		}
		u.sess[key] += n
	} else {
		if u.ns == nil {
			u.ns = map[string]int64{}
		}
		u.ns[key] += n
	}
	if u.logging {
		u.log = append(u.log, booking{session, key, n})
	}
}

// AddNamespace books n bytes (negative: removed) of namespace ns.
func (u *Usage) AddNamespace(ns string, n int64) { u.book(false, orDefaultNamespace(ns), n) }

// AddScope books n bytes of shared scope scope (of its ScopeNamespace).
func (u *Usage) AddScope(scope string, n int64) { u.AddNamespace(ScopeNamespace(scope), n) }

// AddSession books n bytes of session id.
func (u *Usage) AddSession(id string, n int64) {
	if ns, ok := u.names[id]; ok {
		u.book(false, ns, n)
		return
	}
	u.book(true, id, n)
}

// Learn tells the ledger session id's namespace (a create, or a read
// before a delete): what it booked under the session moves there.
func (u *Usage) Learn(id, ns string) {
	ns = orDefaultNamespace(ns)
	if u.names == nil {
		u.names = map[string]string{}
	}
	u.names[id] = ns
	if n := u.sess[id]; n != 0 {
		u.book(true, id, -n)
		u.book(false, ns, n)
	}
}

// Mark remembers the ledger as it stands (a replay's savepoint).
func (u *Usage) Mark() { u.logging, u.mark = true, len(u.log) }

// Restore undoes the bookings made since the last Mark.
func (u *Usage) Restore() {
	for i := len(u.log) - 1; i >= u.mark; i-- {
		b := u.log[i]
		if b.session {
			u.sess[b.key] -= b.n
		} else {
			u.ns[b.key] -= b.n
		}
	}
	u.log = u.log[:u.mark]
}

// Charge is what one write would add: Bytes of a namespace, or of a
// session (Session set, its namespace looked up).
type Charge struct {
	Session, Namespace string
	Bytes              int64
}

// Check refuses (BytesQuotaError) a write that would add to a namespace
// with a quota of stored bytes more than it has left, counting what the
// transaction booked so far. A namespace the write adds nothing to (or
// frees bytes of) always passes, as does every write when no quota is
// set. A charge of a missing session passes: the write fails on its own.
func (u *Usage) Check(charges ...Charge) error {
	if u.quotas == nil {
		return nil
	}
	var adds map[string]int64
	for _, c := range charges {
		ns := c.Namespace
		if c.Session != "" {
			var ok bool
			var err error
			if ns, ok, err = u.namespaceOf(c.Session); err != nil || !ok {
				if err != nil {
					return err
				}
				continue
			}
		}
		if adds == nil {
			adds = map[string]int64{}
		}
		adds[orDefaultNamespace(ns)] += c.Bytes
	}
	for _, ns := range slices.Sorted(maps.Keys(adds)) {
		add := adds[ns]
		max := QuotaOf(u.quotas, ns).MaxBytes
		if add <= 0 || max <= 0 {
			continue
		}
		stored, err := u.stored(ns)
		if err != nil {
			return err
		}
		if stored+add > max {
			return BytesQuotaError(ns, max, stored, add)
		}
	}
	return nil
}

// CheckTurn is Check of TurnCharges(id, ms, stateBytes, scopes), which it
// builds only when a quota is set: it is on every append's path.
func (u *Usage) CheckTurn(id string, ms []*sessionv1.Message, stateBytes int64, scopes []ScopeWrite) error {
	if u.quotas == nil {
		return nil
	}
	return u.Check(TurnCharges(id, ms, stateBytes, scopes)...)
}

// CheckNewTurn is CheckTurn for a turn t that may be a retry: a turn past
// a quota is refused (bad) unless its first message is stored already
// (stored says), for a retry adds nothing and the store answers it as
// one. err is a store failure.
func (u *Usage) CheckNewTurn(id string, t *Turn, stateBytes int64, scopes []ScopeWrite,
	stored func(sessionID, messageID string) (bool, error)) (bad, err error) {
	bad = u.CheckTurn(id, t.Messages, stateBytes, scopes)
	if bad == nil || !IsCommandError(bad) || len(t.Messages) == 0 {
		return bad, nil
	}
	switch retry, err := stored(id, t.Messages[0].GetMessageId()); {
	case err != nil:
		return nil, err
	case retry:
		return nil, nil
	}
	return bad, nil
}

// namespaceOf is session id's namespace, looked up once per transaction.
func (u *Usage) namespaceOf(id string) (string, bool, error) {
	if ns, ok := u.names[id]; ok {
		return ns, true, nil
	}
	ns, ok, err := u.d.SessionNamespace(id)
	if err != nil || !ok {
		return "", false, err
	}
	u.Learn(id, ns)
	return u.names[id], true, nil
}

// stored is namespace ns's total as this transaction leaves it so far:
// the committed total and its own bookings, those of its sessions
// resolved first.
func (u *Usage) stored(ns string) (int64, error) {
	for _, id := range slices.Sorted(maps.Keys(u.sess)) {
		if u.sess[id] == 0 {
			continue
		}
		if _, _, err := u.namespaceOf(id); err != nil {
			return 0, err
		}
	}
	total, ok := u.read[ns]
	if !ok {
		var err error
		if total, err = u.d.StoredBytes(ns); err != nil {
			return 0, err
		}
		if u.read == nil {
			u.read = map[string]int64{}
		}
		u.read[ns] = total
	}
	return total + u.ns[ns], nil
}

// Deltas are the transaction's bookings: by namespace, and by session for
// the sessions whose namespace the store resolves. Either may hold zeros;
// the maps are the ledger's own, to be read only.
func (u *Usage) Deltas() (namespaces, sessions map[string]int64) {
	return u.ns, u.sess
}

// Bounded lists, in byte order, the namespaces with a quota of stored
// bytes that the transaction adds to, the namespace of each session it
// adds to looked up first: those a store must check again once it has
// added (Overdrawn) when other writers may add to the same namespace at
// the same time. Nil when no quota is set.
func (u *Usage) Bounded() ([]string, error) {
	if u.quotas == nil {
		return nil, nil
	}
	for _, id := range slices.Sorted(maps.Keys(u.sess)) {
		if u.sess[id] <= 0 {
			continue
		}
		if _, _, err := u.namespaceOf(id); err != nil {
			return nil, err
		}
	}
	var out []string
	for _, ns := range slices.Sorted(maps.Keys(u.ns)) {
		if u.ns[ns] > 0 && QuotaOf(u.quotas, ns).MaxBytes > 0 {
			out = append(out, ns)
		}
	}
	return out, nil
}

// Overdrawn reports whether namespace ns, found at total after the
// transaction's delta was added, went past its quota because another
// writer's commit landed between this transaction's check and its
// update: it then must run again (its checks read the new total).
func (u *Usage) Overdrawn(ns string, total int64) bool {
	if u.quotas == nil {
		return false
	}
	max := QuotaOf(u.quotas, ns).MaxBytes
	_, checked := u.read[ns]
	// Without a race the checks kept every namespace the transaction
	// added to within its quota.
	return checked && max > 0 && total > max && u.ns[ns] > 0
}
