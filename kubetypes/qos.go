package kubetypes

import (
	"slices"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// PodQOSClass is the pod's QoS class as the API defines it, from the cpu
// and memory requests and limits of its containers and init containers:
// BestEffort when none is set, Guaranteed when every container has cpu and
// memory limits and the pod's requests equal its limits, Burstable
// otherwise. A request that is not set counts as equal to its limit, as
// API defaulting makes it.
func PodQOSClass(pod *v1.Pod) v1.PodQOSClass {
	requests := v1.ResourceList{}
	limits := v1.ResourceList{}
	guaranteed := true
	add := func(l v1.ResourceList, name v1.ResourceName, q resource.Quantity) {
		sum := l[name]
		sum.Add(q)
		l[name] = sum
	}
	all := append(slices.Clip(pod.Spec.InitContainers), pod.Spec.Containers...)
	for _, c := range all {
		limited := 0
		for _, name := range []v1.ResourceName{v1.ResourceCPU, v1.ResourceMemory} {
			lim, hasLim := c.Resources.Limits[name]
			hasLim = hasLim && lim.Sign() > 0
			req, hasReq := c.Resources.Requests[name]
			hasReq = hasReq && req.Sign() > 0
			if !hasReq && hasLim {
				req, hasReq = lim, true
			}
			if hasReq {
				add(requests, name, req)
			}
			if hasLim {
				add(limits, name, lim)
				limited++
			}
		}
		if limited < 2 {
			guaranteed = false
		}
	}
	switch {
	case len(requests) == 0 && len(limits) == 0:
		return v1.PodQOSBestEffort
	case !guaranteed || len(requests) != len(limits):
		return v1.PodQOSBurstable
	}
	for name, req := range requests {
		if lim, ok := limits[name]; !ok || lim.Cmp(req) != 0 {
			return v1.PodQOSBurstable
		}
	}
	return v1.PodQOSGuaranteed
}
