package admission

import (
	v1 "k8s.io/api/core/v1"
	resourcehelper "k8s.io/component-helpers/resource"
)

// ReasonPodLevelResourcesNotSupported is kubelet's rejection reason for a
// pod with pod-level resources on a node where the PodLevelResources
// feature gate is off.
const ReasonPodLevelResourcesNotSupported = "PodLevelResourcesNotSupported"

// AdmitFeatures is kubelet's pod-features admit handler: a pod that uses
// a feature the node's feature gates turn off is rejected with kubelet's
// reason and message. Today that is pod-level resources (spec.resources)
// with PodLevelResources off.
func AdmitFeatures(pod *v1.Pod, o SecurityOptions) (ok bool, reason, message string) {
	if o.PodLevelResourcesDisabled && resourcehelper.IsPodLevelResourcesSet(pod) {
		return false, ReasonPodLevelResourcesNotSupported, "PodLevelResources feature gate is disabled"
	}
	return true, "", ""
}
