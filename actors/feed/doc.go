// Package feed serves the live feeds: the tail of one session's messages
// and the change feed (the audit trail in commit order, filtered), each
// from a cursor the subscriber keeps — a sequence or a position — then
// live, exactly once and in order, resumable after a disconnect or a
// restart from the last event seen.
//
// A Hub owns the feeds of one store. It is not the session actors: it
// reads only committed data, so passivating a session actor ends no tail,
// and nothing that did not commit is ever delivered. The writer calls
// OnCommit after every commit; the hub's one goroutine then reads what
// changed once and keeps it in bounded rings, where live tails find it.
// A tail whose cursor fell behind a ring reads the store until it caught
// up, so a slow or stuck subscriber costs the writer and the others
// nothing and holds at most one page. In a cluster (PostgreSQL shared by
// members) the hub also polls the store (Config.PollInterval), since
// other members' commits call no local hook.
//
// Interfaces: the Go API (Hub.TailSession, Hub.TailChanges: Next, or the
// All iterators), the Proto.Actor actor (Actor: a PID subscribes and gets
// protobuf events with an acknowledgement window), and the gRPC
// FeedService, which node/feedstream serves within a byte budget.
package feed
