// Package directory owns the mapping from an identity (a session id, a plan
// id) to the one actor that owns it, in one process.
//
// A directory actor receives every request of its kind, extracts the key,
// spawns the owner on demand and forwards the request to it. Requests that
// are not about one key (a list) run on the directory's Unkeyed handler.
//
// Invariant: at most one owner per key is alive at any time. Passivation
// keeps it: an idle owner asks to stop (Idle), the directory stops routing
// to it and tells it to Passivate, the owner stops once its in-flight work
// is done, and only after its Terminated does the directory spawn a new
// owner for that key, handing it the requests buffered meanwhile. So a new
// owner's reload from the store always sees every write of the old one.
//
// Replies. Owners receive *Call values, each carrying a Replier, and answer
// each exactly once. Local callers (the Go API) pass a channel replier
// (Ask); remote and future senders that send a bare protobuf request get a
// replier that answers their PID with the reply or a *commonv1.Error.
//
// Writing an owner: handle *Call; on *actor.Started call
// ctx.SetReceiveTimeout(Config.IdleTimeout) when it is positive (and set it
// again after each *actor.ReceiveTimeout: it fires once); on
// *actor.ReceiveTimeout with nothing in flight, ctx.Request(ctx.Parent(),
// &Idle{}) — Request, not Send: the directory knows the owner by the
// sender, and a stale Idle from a stopped owner must not passivate its
// successor; on *Passivate, stop (ctx.Stop(ctx.Self())) as soon as nothing is
// in flight. The same code can run as a cluster kind later: the owner's
// identity comes from the key it was spawned with.
package directory
