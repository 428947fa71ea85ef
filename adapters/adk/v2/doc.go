// Package adk is a Google ADK for Go v2 session backend
// (google.golang.org/adk/v2 session.Service) on agentstate, beside the v1
// backend (github.com/agentstate/agentstate/adapters/adk) and sharing
// everything with it but the types: the same Store (embedded or Remote
// over gRPC), Options and ErrStaleSession, the same layout of sessions,
// events and state in agentstate. A session written through either
// version reads back through the other (v1 leaves out the fields it lacks:
// v2's workflow fields).
//
//	import (
//		adk "github.com/agentstate/agentstate/adapters/adk/v2"
//		"google.golang.org/adk/v2/runner"
//	)
//
//	conn, err := client.Dial("127.0.0.1:7420", client.Options{})
//	svc := adk.New(adk.Remote(sessionv1.NewSessionServiceClient(conn)), adk.Options{})
//	r, err := runner.New(runner.Config{AppName: "app", Agent: a, SessionService: svc})
//
// The v1 package's documentation says how ADK's sessions map onto
// agentstate and what the limits are; all of it holds here.
package adk
