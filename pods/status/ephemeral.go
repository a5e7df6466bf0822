package status

import v1 "k8s.io/api/core/v1"

// ephemeralStatuses are status.ephemeralContainerStatuses: as app
// containers', but never ready (no probes, not part of the pod's
// readiness), as kubelet reports them.
func (b statusBuilder) ephemeralStatuses(pod *v1.Pod, old []v1.ContainerStatus) []v1.ContainerStatus {
	if len(pod.Spec.EphemeralContainers) == 0 {
		return nil
	}
	out := make([]v1.ContainerStatus, 0, len(pod.Spec.EphemeralContainers))
	for i := range pod.Spec.EphemeralContainers {
		c := v1.Container(pod.Spec.EphemeralContainers[i].EphemeralContainerCommon)
		st := b.containerStatus(&c, findContainerStatus(old, c.Name), false, true)
		st.Ready = false
		out = append(out, st)
	}
	return out
}
