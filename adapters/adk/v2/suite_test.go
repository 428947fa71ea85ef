package adk_test

import (
	"testing"

	"github.com/agentstate/agentstate/adapters/adk/internal/testnode"
	adk "github.com/agentstate/agentstate/adapters/adk/v2"
	"google.golang.org/adk/v2/session"
	"google.golang.org/adk/v2/session/sessiontestsuite"
)

// adk v2's own conformance suite for session services, unchanged, against
// the service embedded in this process: a fresh agentstate per case.
func TestADKSuiteEmbedded(t *testing.T) {
	sessiontestsuite.RunServiceTests(t, sessiontestsuite.SuiteOptions{SupportsUserProvidedSessionID: true},
		func(t *testing.T) session.Service {
			e, _ := testnode.OpenEmbedded(t, testnode.DBPath(t))
			return adk.New(e.Node.Sessions(), adk.Options{})
		})
}

// The same suite over gRPC to a node (started in this process with
// node/server, listening on loopback).
func TestADKSuiteOverGRPC(t *testing.T) {
	sessiontestsuite.RunServiceTests(t, sessiontestsuite.SuiteOptions{SupportsUserProvidedSessionID: true},
		func(t *testing.T) session.Service {
			api, _ := testnode.Start(t, testnode.DBPath(t))
			return adk.New(adk.Remote(api), adk.Options{})
		})
}
