package postgres

import (
	"testing"

	"github.com/agentstate/agentstate/persistence"
	"github.com/agentstate/agentstate/persistence/storetest"
)

// The suite again with the audit trail partitioned into
// persistence.MaxAuditChains chains from the start, as a DSN's
// audit_chains=16 opens it: every store contract holds with chains on.
func TestConformanceChains(t *testing.T) {
	requireServer(t)
	storetest.Run(t, func(t *testing.T) persistence.Store {
		dsn := withParam(freshDSN(t), "audit_chains", "16")
		return mustOpen(t, dsn)
	})
}
