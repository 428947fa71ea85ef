package postgres

import (
	"testing"

	"github.com/agentstate/agentstate/persistence"
	"github.com/agentstate/agentstate/persistence/storetest"
)

// The read-only fault subtests of the suite run through this hook. A full
// disk cannot be simulated on a shared server; its mapping is tested in
// errors_test.go.
var _ storetest.ReadOnlySwitch = (*Store)(nil)

func TestConformance(t *testing.T) {
	requireServer(t)
	storetest.Run(t, func(t *testing.T) persistence.Store {
		s, _ := openFresh(t)
		return s
	})
}
