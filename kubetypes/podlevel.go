package kubetypes

import (
	v1 "k8s.io/api/core/v1"
	resourcehelper "k8s.io/component-helpers/resource"
)

// Pod-level resources (spec.resources, feature PodLevelResources, beta and
// on by default in Kubernetes 1.34): cpu and memory requests and limits
// for the pod as a whole, which its containers share. The API server
// accepts only cpu, memory and hugepages-* there.

// PodLevelRequests is the pod's spec.resources.requests as the API server
// defaults them (v1 defaulting's defaultPodRequests) when pod-level limits
// are set: a resource with a pod-level limit and no pod-level request gets
// the containers' effective request when some container requests it, else
// the limit. Pods from the API server already carry these defaults; static
// pods are defaulted by the static source, and this keeps the two the
// same. Nil when the pod has no pod-level resources.
func PodLevelRequests(pod *v1.Pod) v1.ResourceList {
	r := pod.Spec.Resources
	if r == nil {
		return nil
	}
	if len(r.Limits) == 0 {
		return r.Requests
	}
	out := r.Requests.DeepCopy()
	if out == nil {
		out = v1.ResourceList{}
	}
	containers := resourcehelper.AggregateContainerRequests(pod, resourcehelper.PodResourcesOptions{})
	for name, q := range containers {
		// cpu and memory overcommit; hugepages do not.
		if _, ok := out[name]; !ok && (name == v1.ResourceCPU || name == v1.ResourceMemory) {
			out[name] = q.DeepCopy()
		}
	}
	for name, q := range r.Limits {
		if _, ok := out[name]; !ok && resourcehelper.IsSupportedPodLevelResource(name) {
			out[name] = q.DeepCopy()
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// ContainerLimitsWithPodLevel is the cpu and memory limits a container's
// cgroup gets (kubelet's getCPULimit and getMemoryLimit): the container's
// own, or, where it sets none and the pod has pod-level resources, the
// pod-level limit. Either may be zero (no limit).
func ContainerLimitsWithPodLevel(pod *v1.Pod, c *v1.Container) (cpu, memory int64) {
	cpuQ, memQ := c.Resources.Limits.Cpu(), c.Resources.Limits.Memory()
	if resourcehelper.IsPodLevelResourcesSet(pod) {
		if cpuQ.IsZero() {
			cpuQ = pod.Spec.Resources.Limits.Cpu()
		}
		if memQ.IsZero() {
			memQ = pod.Spec.Resources.Limits.Memory()
		}
	}
	return cpuQ.MilliValue(), memQ.Value()
}

// DownwardAPIAllocatable is what a container's limits.cpu, limits.memory
// and limits.ephemeral-storage default to in the downward API when the
// container sets none (kubelet's defaultPodLimitsForDownwardAPI): the
// node's allocatable, with cpu and memory replaced by the pod-level limits
// where the pod sets them.
func DownwardAPIAllocatable(pod *v1.Pod, allocatable v1.ResourceList) v1.ResourceList {
	if !resourcehelper.IsPodLevelLimitsSet(pod) {
		return allocatable
	}
	out := allocatable.DeepCopy()
	for _, name := range []v1.ResourceName{v1.ResourceCPU, v1.ResourceMemory} {
		if q, ok := pod.Spec.Resources.Limits[name]; ok && !q.IsZero() {
			if _, ok := out[name]; ok {
				out[name] = q.DeepCopy()
			}
		}
	}
	return out
}

// RemainingPodMemoryRequestPerContainer is the pod-level memory request
// not claimed by the containers' own requests, shared equally among the
// regular and init containers (kubelet's remainingPodMemReqPerContainer):
// kubelet adds it to each container's request when it computes the
// container's oom_score_adj. 0 without a pod-level memory request.
func RemainingPodMemoryRequestPerContainer(pod *v1.Pod) int64 {
	if !resourcehelper.IsPodLevelRequestsSet(pod) {
		return 0
	}
	podReq := pod.Spec.Resources.Requests.Memory()
	n := int64(len(pod.Spec.Containers) + len(pod.Spec.InitContainers))
	if podReq.IsZero() || n == 0 {
		return 0
	}
	containers := resourcehelper.AggregateContainerRequests(pod, resourcehelper.PodResourcesOptions{})
	return (podReq.Value() - containers.Memory().Value()) / n
}
