package pods

import (
	v1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
)

// needsSync reports whether an update of the pod from prev to next is news
// for its worker. As in kubelet's pod config, an update that changes only
// the status (and the metadata the API server maintains: resourceVersion,
// managedFields) is a reconcile, not a reason to sync: every status the
// agent writes comes back this way, and syncing on it doubled the syncs of
// every pod and cut a failing sync's retry back-off short by its own
// write. The exception is kubelet's readiness reconcile: a condition named
// by a readiness gate (set by a controller) changes the Ready condition the
// worker computes.
func needsSync(prev, next *v1.Pod) bool {
	if prev == nil || next == nil {
		return true
	}
	a, b := prev.ObjectMeta, next.ObjectMeta
	a.ResourceVersion, b.ResourceVersion = "", ""
	a.ManagedFields, b.ManagedFields = nil, nil
	if !apiequality.Semantic.DeepEqual(a, b) || !apiequality.Semantic.DeepEqual(prev.Spec, next.Spec) {
		return true
	}
	return gateConditionsChanged(prev, next)
}

// gateConditionsChanged reports whether a condition named by one of next's
// readiness gates differs between prev's and next's status.
func gateConditionsChanged(prev, next *v1.Pod) bool {
	for _, g := range next.Spec.ReadinessGates {
		a, b := findPodCondition(prev.Status.Conditions, g.ConditionType), findPodCondition(next.Status.Conditions, g.ConditionType)
		if (a == nil) != (b == nil) || (a != nil && a.Status != b.Status) {
			return true
		}
	}
	return false
}

func findPodCondition(cs []v1.PodCondition, t v1.PodConditionType) *v1.PodCondition {
	for i := range cs {
		if cs[i].Type == t {
			return &cs[i]
		}
	}
	return nil
}
