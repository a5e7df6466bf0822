package status

import v1 "k8s.io/api/core/v1"

// withSharedConditions adds to conds (the merged conditions of a status
// write) the conditions the agent shares with controllers
// (DisruptionTarget), as kubelet's mergePodStatus: the agent's copy
// replaces the API's when the write moves the pod to a terminal phase
// (an eviction's DisruptionTarget), otherwise the API's stays.
func withSharedConditions(cur, want v1.PodStatus, conds []v1.PodCondition) []v1.PodCondition {
	if PodIsTerminal(cur) || !PodIsTerminal(want) {
		return conds
	}
	for _, c := range want.Conditions {
		if c.Type != v1.DisruptionTarget {
			continue
		}
		replaced := false
		for i := range conds {
			if conds[i].Type == c.Type {
				conds[i], replaced = c, true
			}
		}
		if !replaced {
			conds = append(conds, c)
		}
	}
	return conds
}
