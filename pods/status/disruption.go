package status

import (
	"time"

	v1 "k8s.io/api/core/v1"
)

// withDisruption sets the DisruptionTarget condition (True, reason
// TerminationByKubelet, message msg) in conds when msg is set, replacing
// one kept from the old status; its lastTransitionTime is kept when the
// old one was already True. Without msg conds is returned as is.
func withDisruption(conds, old []v1.PodCondition, msg string, now time.Time) []v1.PodCondition {
	if msg == "" {
		return conds
	}
	c := v1.PodCondition{
		Type:               v1.DisruptionTarget,
		Status:             v1.ConditionTrue,
		Reason:             v1.PodReasonTerminationByKubelet,
		Message:            msg,
		LastTransitionTime: apiTime(now),
	}
	if oc := findCondition(old, v1.DisruptionTarget); oc != nil && oc.Status == v1.ConditionTrue {
		c.LastTransitionTime = apiTime(oc.LastTransitionTime.Time)
	}
	out := make([]v1.PodCondition, 0, len(conds)+1)
	for _, x := range conds {
		if x.Type != v1.DisruptionTarget {
			out = append(out, x)
		}
	}
	return append(out, c)
}
