package postgres

import (
	"testing"

	"github.com/agentstate/agentstate/persistence"
	"github.com/agentstate/agentstate/persistence/storetest"
)

// The suite again on a trail of one chain, as a DSN's audit_chains=1
// keeps it (TestConformance runs on the default, 16 chains): positions
// dense, every entry linked to the one before.
func TestConformanceOneChain(t *testing.T) {
	requireServer(t)
	storetest.Run(t, func(t *testing.T) persistence.Store {
		return mustOpen(t, withParam(freshDSN(t), "audit_chains", "1"))
	})
}
