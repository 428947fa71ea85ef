// Package actors is the one entry point for embedding agentstate in your
// own Proto.Actor system: Start wires the writer (actors/writer, the
// store's only writer), the audit trail, the sessions service and the
// plans service in the right order, and Node.Stop takes them down in the
// reverse order, draining every accepted write.
//
//	store, err := sqlite.Open("./data/agentstate.db")
//	if err != nil { ... }
//	defer store.Close() // after node.Stop
//	sys := actor.NewActorSystem()
//	node, err := actors.Start(sys, store, actors.Config{})
//	if err != nil { ... }
//	defer node.Stop(context.Background())
//
//	resp, err := node.Sessions().Append(ctx, &sessionv1.AppendRequest{...})
//
// Go callers use the services' methods (Sessions, Plans, Audit: each
// implements its gRPC service interface). Actors in the same system, or
// remote Proto.Actor senders, can instead send the bare protobuf requests
// of messages/ to the services' PIDs ("sessions", "plans", "audit") and
// get the response or a *commonv1.Error back.
//
// The live feeds (actors/feed) are not started here: a Hub is wired in
// through Config.Writer.OnCommit. node/server builds the networked node on
// top of this package (the gRPC API, the feeds, the guarded remote
// endpoint, metrics and graceful shutdown); cmd/node is its flags.
package actors
