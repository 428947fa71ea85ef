package actors_test

import "github.com/agentstate/agentstate/persistence"

func persistenceFilter(planID string) persistence.PlanFilter {
	return persistence.PlanFilter{PlanID: planID}
}
