// Package adk is a Google ADK for Go session backend (google.golang.org/adk
// session.Service) on agentstate: ADK's sessions, events and state are
// stored by agentstate's sessions service, embedded in the process or over
// gRPC to a node.
//
//	// Embedded: the sessions service of an agentstate node in this process.
//	node, err := actors.Start(actor.NewActorSystem(), store, actors.Config{})
//	svc := adk.New(node.Sessions(), adk.Options{})
//
//	// Over gRPC to a node.
//	conn, err := client.Dial("127.0.0.1:7420", client.Options{})
//	svc := adk.New(adk.Remote(sessionv1.NewSessionServiceClient(conn)), adk.Options{})
//
//	r, err := runner.New(runner.Config{AppName: "app", Agent: a, SessionService: svc})
//
// What ADK asks of a session service maps onto agentstate's own features,
// with nothing emulated in the client:
//
//   - ids as given: an ADK session is addressed by a client key (the
//     user and ADK's session id), an event is a message whose id is
//     ADK's event id; retries with the same id are idempotent;
//   - state: the session's own keys are agentstate session state, "app:"
//     and "user:" keys are shared scopes (one per app, one per app and
//     user); an event's delta changes all three in the transaction that
//     stores the event; "temp:" keys are never stored;
//   - Get reads the state without reading the history, and the events
//     with the server's "last N" (NumRecentEvents) and time filter
//     (After);
//   - stale sessions: an append is conditional on the sequence the
//     handle was read at, so an append through an outdated handle is
//     refused (ErrStaleSession) and stores nothing.
//
// Options.SessionTTL gives sessions agentstate's time to live (the node's
// expiry sweep deletes them), which ADK's own services do not offer.
//
// Limits are agentstate's: an ADK session id (with its user id) and an app
// name are at most 256 bytes in all; an event id is 1-128 bytes of
// printable ASCII without spaces; an event is at most the node's message
// size (1 MiB by default) as JSON; a state at most 256 KiB.
//
// The package is its own module, so that adk's dependencies stay out of
// agentstate's go.mod. Its sub-package v2 serves google.golang.org/adk/v2
// the same way, on the same sessions; both are thin layers of their
// version's types over internal/adkstore.
package adk
