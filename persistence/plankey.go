package persistence

import "strings"

// A plan is named by its namespace and its plan id: the same plan id in
// two namespaces names two plans, stored apart (the plan tables are keyed
// by (namespace, plan_id)) and owned by two actors.

// PlanNamespace is the namespace a plan request names: "" is
// DefaultNamespace, as for a session created without one.
func PlanNamespace(ns string) string {
	if ns == "" {
		return DefaultNamespace
	}
	return ns
}

// PlanKey is the one string that names plan planID of namespace ns where
// one string is needed: the plan actor's identity (directory and cluster
// routing) and its fencing row in owners. A plan of DefaultNamespace is
// keyed by its bare plan id, so the fencing rows and the routing of plans
// stored before plans had namespaces stay theirs; any other is
// "<namespace>/<plan id>". Plan ids never contain '/' (ids.CheckPlanID),
// so the key splits back at its last '/' (SplitPlanKey) and no two plans
// share one.
func PlanKey(ns, planID string) string {
	ns = PlanNamespace(ns)
	if ns == DefaultNamespace {
		return planID
	}
	return ns + "/" + planID
}

// SplitPlanKey is PlanKey's inverse.
func SplitPlanKey(key string) (ns, planID string) {
	i := strings.LastIndexByte(key, '/')
	if i < 0 {
		return DefaultNamespace, key
	}
	return key[:i], key[i+1:]
}
