package adk_test

import (
	"testing"

	"github.com/agentstate/agentstate/adapters/adk"
	"github.com/agentstate/agentstate/adapters/adk/internal/testnode"
	sessionv1 "github.com/agentstate/agentstate/messages/agentstate/session/v1"
)

var quietLogger = testnode.QuietLogger

// embedded is agentstate in this process and the ADK service over its
// sessions service.
type embedded struct {
	*testnode.Embedded
	Svc *adk.Service
}

// openEmbedded starts agentstate on the SQLite file path; stop is
// idempotent and also runs at the test's end.
func openEmbedded(t testing.TB, path string) (e *embedded, stop func()) {
	t.Helper()
	n, stop := testnode.OpenEmbedded(t, path)
	return &embedded{Embedded: n, Svc: adk.New(n.Node.Sessions(), adk.Options{})}, stop
}

// startNode starts a networked node in this process on the SQLite file
// path, and returns the ADK service over gRPC to it and the raw API.
func startNode(t testing.TB, path string) (svc *adk.Service, api sessionv1.SessionServiceClient, stop func()) {
	t.Helper()
	api, stop = testnode.Start(t, path)
	return adk.New(adk.Remote(api), adk.Options{}), api, stop
}

func dbPath(t testing.TB) string { return testnode.DBPath(t) }
