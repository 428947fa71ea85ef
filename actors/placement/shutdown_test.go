package placement_test

import (
	"context"
	"testing"

	sessionv1 "github.com/agentstate/agentstate/messages/agentstate/session/v1"
	"github.com/agentstate/agentstate/messages/errs"
	"github.com/agentstate/agentstate/messages/ids"
)

// The test's last act stops an activation: a missing session's actor
// answers NOT_FOUND and stops. Its termination reaches disthash's
// placement actor while the member shuts down. That actor reads the
// library's member list with no lock; the provider writes the list when it
// deregisters the member. Under -race this test failed in 8 of 12 runs
// until startMember's cleanup stopped the placement actor, and waited for
// it, before Shutdown (0 of 12 since). It guards that order.
func TestActivationStoppingAtShutdown(t *testing.T) {
	m := startOneMember(t)
	_, err := m.node.Sessions().Close(context.Background(), &sessionv1.CloseSessionRequest{SessionId: ids.New()})
	if errs.CodeOf(err) != errs.NotFoundCode {
		t.Fatalf("closing a missing session: %v, want NOT_FOUND", err)
	}
}
