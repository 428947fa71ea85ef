// Package directory owns the mapping from an identity (a session id, a plan
// id) to the one actor that owns it, in one process, and that actor's
// shell.
//
// A directory actor receives the requests of its kind that cannot go
// straight to a live owner, extracts the key, spawns the owner on demand
// and forwards the request to it. Requests that are not about one key (a
// list) run on the directory's Unkeyed handler. Callers reach live owners
// without it through LiveOwners, which the directory fills and empties.
//
// Invariant: at most one owner per key is alive at any time. Passivation
// keeps it: an idle owner asks to stop (Idle), the directory withdraws it
// from LiveOwners, stops routing to it and tells it to Passivate, the
// owner stops once its in-flight work is done, and only after its
// Terminated does the directory spawn a new owner for that key, handing it
// the requests buffered meanwhile. So a new owner's reload from the store
// always sees every write of the old one.
//
// Replies. Owners receive *Call values, each carrying a Replier, and answer
// each exactly once. Local callers (the Go API) pass a channel replier
// (Ask, AskOwner); remote and future senders that send a bare protobuf
// request get a replier that answers their PID with the reply or a
// *commonv1.Error. Admission is the one way any of them enters the
// writer's backlog.
//
// Owners. OwnerSpec makes the owner actor of a kind: a shell around the
// owner kernel (actors/lifecycle) and the kind's Domain. The shell maps
// messages to the kernel's events (a Call arrives, the writer's Applied,
// its own idle timer's tick, Passivate, a cluster's PoisonPill as MoveOut,
// Stopped) and the kernel's Ready to Proto.Actor (replies, Submit to the
// writer, Load, Idle to the directory, stop). The same shell serves as a
// directory's child (OwnerProps) and as a cluster kind (KindProps), whose
// identity comes from cluster.ClusterInit.
package directory
