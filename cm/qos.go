package cm

import (
	v1 "k8s.io/api/core/v1"

	"github.com/nodeagent/nodeagent/kubetypes"
)

// QOSClass is the pod's QoS class: status.qosClass once set (it never
// changes), else computed from the containers' cpu and memory requests and
// limits as the API defines it (a request defaults to its limit).
func QOSClass(pod *v1.Pod) v1.PodQOSClass {
	if q := pod.Status.QOSClass; q != "" {
		return q
	}
	return kubetypes.PodQOSClass(pod)
}

// OOM score adjustments of kubelet's policy (pkg/kubelet/qos).
const (
	GuaranteedOOMScoreAdj = -997
	BestEffortOOMScoreAdj = 1000
	// burstable scores stay within (guaranteed+1000 .. besteffort).
	minBurstableOOMScoreAdj = 1000 + GuaranteedOOMScoreAdj
)

// SystemNodeCritical is the priority class of pods the node needs most.
const SystemNodeCritical = "system-node-critical"

// isNodeCritical: a critical pod (static, mirror, or of critical priority)
// of the system-node-critical class.
func isNodeCritical(pod *v1.Pod) bool {
	return kubetypes.IsCriticalPod(pod) && pod.Spec.PriorityClassName == SystemNodeCritical
}

// OOMScoreAdj is the oom_score_adj of container c of pod on a node with
// memoryCapacity bytes, as kubelet computes it: node-critical and
// Guaranteed pods -997, BestEffort 1000, Burstable 1000 - 1000 ×
// request/capacity kept within [3, 999] (the request plus its share of the
// pod-level memory request the containers do not claim); a sidecar scores no higher than
// the pod's smallest regular container.
func OOMScoreAdj(pod *v1.Pod, c *v1.Container, memoryCapacity int64) int {
	if isNodeCritical(pod) {
		return GuaranteedOOMScoreAdj
	}
	switch QOSClass(pod) {
	case v1.PodQOSGuaranteed:
		return GuaranteedOOMScoreAdj
	case v1.PodQOSBestEffort:
		return BestEffortOOMScoreAdj
	}
	if memoryCapacity <= 0 {
		return BestEffortOOMScoreAdj - 1
	}
	// With a pod-level memory request, the part of it the containers do
	// not request is shared among them (kubelet's policy with
	// PodLevelResources).
	extra := kubetypes.RemainingPodMemoryRequestPerContainer(pod)
	score := 1000 - 1000*(c.Resources.Requests.Memory().Value()+extra)/memoryCapacity
	if isSidecar(pod, c) {
		if minScore := 1000 - 1000*(minRegularMemoryRequest(pod)+extra)/memoryCapacity; score > minScore {
			score = minScore
		}
	}
	switch {
	case score < minBurstableOOMScoreAdj:
		return minBurstableOOMScoreAdj
	case score >= BestEffortOOMScoreAdj:
		return BestEffortOOMScoreAdj - 1
	}
	return int(score)
}

func isSidecar(pod *v1.Pod, c *v1.Container) bool {
	if c.RestartPolicy == nil || *c.RestartPolicy != v1.ContainerRestartPolicyAlways {
		return false
	}
	for i := range pod.Spec.InitContainers {
		if pod.Spec.InitContainers[i].Name == c.Name {
			return true
		}
	}
	return false
}

// minRegularMemoryRequest is the smallest memory request of the pod's
// regular containers (0 when one has none).
func minRegularMemoryRequest(pod *v1.Pod) int64 {
	var min int64 = -1
	for _, c := range pod.Spec.Containers {
		r := c.Resources.Requests.Memory().Value()
		if min < 0 || r < min {
			min = r
		}
	}
	if min < 0 {
		return 0
	}
	return min
}
