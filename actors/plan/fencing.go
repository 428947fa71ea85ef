package plan

// Fencing: the directory keeps one owner per plan in one process, but two
// processes (or two directories) may each activate one. The store decides
// which may write: each activation takes a new epoch (persistence.Activate,
// the owner's first write), every PlanWrite carries it, and a write of an
// older epoch fails with persistence.ErrFenced, storing nothing.
//
// The owner kernel (actors/lifecycle) keeps the rules: the epoch first,
// the load only once it committed, so the load sees everything the
// predecessor committed before the activation and the predecessor's later
// writes are fenced. Calls that arrive meanwhile wait; they are accepted,
// in arrival order, after the load. A fenced owner's state may be behind
// the store, so it answers every request it holds or receives with
// UNAVAILABLE and asks to be passivated; the caller's retry reaches a
// fresh owner with a new epoch. The fenced write stored nothing, so a
// retry records the error once.
