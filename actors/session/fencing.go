package session

// Fencing: the directory keeps one owner per session in one process, but
// two processes (or two directories) may each activate one. The store
// decides which of them may write: each activation takes a new epoch
// (persistence.Activate, the owner's first write), every write carries it,
// and a write of an older epoch fails with persistence.ErrFenced, storing
// nothing.
//
// The owner kernel (actors/lifecycle) keeps the rules: it takes the epoch
// before anything else and loads the session only after that, so the load
// sees every write its predecessor committed before the activation and
// every later write of the predecessor is fenced. A fenced owner knows its
// state may be behind the store; it answers everything it holds, and
// everything that still reaches it, with UNAVAILABLE, and asks to be
// passivated. The caller's retry reaches a fresh owner, which activates
// anew; retries of appends are safe because message ids make them
// idempotent, and a fenced write stored nothing.
