package admission

import (
	"fmt"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	resourcehelper "k8s.io/component-helpers/resource"
)

// ReasonPodLevelResourcesNotSupported is kubelet's rejection reason for a
// pod with pod-level resources on a node where the PodLevelResources
// feature gate is off.
const ReasonPodLevelResourcesNotSupported = "PodLevelResourcesNotSupported"

// AdmitFeatures is kubelet's pod-features admit handler: a pod that uses
// a feature the node's feature gates turn off is rejected with kubelet's
// reason and message: pod-level resources (spec.resources) with
// PodLevelResources off, image volumes with ImageVolume off.
func AdmitFeatures(pod *v1.Pod, o SecurityOptions) (ok bool, reason, message string) {
	if o.PodLevelResourcesDisabled && resourcehelper.IsPodLevelResourcesSet(pod) {
		return false, ReasonPodLevelResourcesNotSupported, "PodLevelResources feature gate is disabled"
	}
	if !o.ImageVolume {
		var paths []string
		for i := range pod.Spec.Volumes {
			if pod.Spec.Volumes[i].Image != nil {
				paths = append(paths, field.NewPath("spec", "volumes").Index(i).Child("image").String())
			}
		}
		// kubelet with the gate off has no image volume plugin and leaves
		// the pod Pending with FailedMount events; nodeagent says why.
		if len(paths) > 0 {
			return false, ReasonUnsupportedPodSpec, fmt.Sprintf("Pod was rejected: %s: image volumes need the ImageVolume feature gate, which is off on this node", strings.Join(paths, ", "))
		}
	}
	return true, "", ""
}
