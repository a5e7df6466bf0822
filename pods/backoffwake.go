package pods

import (
	v1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
)

// statusOnly reports whether next differs from prev only in its status and
// in metadata the API server maintains (resourceVersion, managedFields):
// for kubelet such an update is a reconcile, not a reason to sync. Every
// status the agent writes comes back this way; a sync that fails (a CNI
// ADD, a volume) writes a status, so without this its retry back-off was
// cut short by its own write.
func statusOnly(prev, next *v1.Pod) bool {
	if prev == nil || next == nil {
		return false
	}
	a, b := prev.ObjectMeta, next.ObjectMeta
	a.ResourceVersion, b.ResourceVersion = "", ""
	a.ManagedFields, b.ManagedFields = nil, nil
	return apiequality.Semantic.DeepEqual(a, b) && apiequality.Semantic.DeepEqual(prev.Spec, next.Spec)
}

// setFailing records whether the last sync failed (read by update).
func (w *worker) setFailing(failed bool) {
	w.mu.Lock()
	w.failing = failed
	w.mu.Unlock()
}
