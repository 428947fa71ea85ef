// Package adkstore is what every ADK version's session backend shares: how
// an ADK session, its state and its events sit in agentstate (names,
// scopes, state merging), the conditional append that refuses stale
// handles, and the handle itself, generic over the version's event type.
// The packages adapters/adk (google.golang.org/adk) and adapters/adk/v2
// (google.golang.org/adk/v2) add only what differs between versions: the
// event type and its JSON form, and their session package's named types
// and errors.
package adkstore
