package adk_test

import (
	"testing"

	"google.golang.org/adk/session"
	"google.golang.org/adk/session/sessiontestsuite"
)

// adk's own conformance suite for session services, unchanged, against
// the service embedded in this process: a fresh agentstate per case.
func TestADKSuiteEmbedded(t *testing.T) {
	sessiontestsuite.RunServiceTests(t, sessiontestsuite.SuiteOptions{SupportsUserProvidedSessionID: true},
		func(t *testing.T) session.Service {
			e, _ := openEmbedded(t, dbPath(t))
			return e.Svc
		})
}

// The same suite over gRPC to a node (started in this process with
// node/server, listening on loopback).
func TestADKSuiteOverGRPC(t *testing.T) {
	sessiontestsuite.RunServiceTests(t, sessiontestsuite.SuiteOptions{SupportsUserProvidedSessionID: true},
		func(t *testing.T) session.Service {
			svc, _, _ := startNode(t, dbPath(t))
			return svc
		})
}
