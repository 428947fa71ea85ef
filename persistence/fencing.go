package persistence

// Fencing keeps "one owner per session or plan" true even where the actor
// runtime cannot (a cluster that activated the same grain on two members).
//
// An owner starts by applying Activate for its key: the store atomically
// increments the key's epoch and returns it. Every later write of that owner
// carries the epoch (the Epoch fields of the commands below); the store
// applies a write only while its epoch is the key's current one and fails it
// with ErrFenced otherwise. So when two activations exist, the older one's
// writes fail from the moment the newer one activated, and the two can never
// both write.
//
// Epoch 0 on a command means "unfenced": accepted only while the key has never
// been activated (an import writing a brand-new session, a tool). A command
// with Epoch > 0 for a key that was never activated is ErrFenced too.

// OwnerKind names what an epoch belongs to.
type OwnerKind int32

const (
	OwnerSession OwnerKind = 1
	OwnerPlan    OwnerKind = 2
)

// Activate takes a new epoch for one session or plan; Result.Epoch is the
// new epoch (1 on the first activation). It never fails on its own except
// for an invalid Kind or empty ID (INVALID_ARGUMENT).
type Activate struct {
	Kind OwnerKind
	ID   string
}

func (*Activate) Size() int { return rowOverhead }
