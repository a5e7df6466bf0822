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
//
// A pod with pod-level resources (spec.resources not nil, PodLevelResources
// on by default in 1.34) is classed from them alone, as the API's
// ComputePodQOS does: Guaranteed when its limits name cpu and memory and
// its requests (defaulted as the API server defaults them,
// PodLevelRequests) equal them; the containers' resources do not count.
func PodQOSClass(pod *v1.Pod) v1.PodQOSClass {
	add := func(l v1.ResourceList, name v1.ResourceName, q resource.Quantity) {
		sum := l[name]
		sum.Add(q)
		l[name] = sum
	}
	if pod.Spec.Resources != nil {
		return classOf(positive(PodLevelRequests(pod)), positive(pod.Spec.Resources.Limits), true)
	}
	requests := v1.ResourceList{}
	limits := v1.ResourceList{}
	guaranteed := true
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
	return classOf(requests, limits, guaranteed)
}

// classOf classes summed cpu and memory requests and limits; guaranteed
// is false when some container (or the pod level) lacks a cpu or memory
// limit.
func classOf(requests, limits v1.ResourceList, guaranteed bool) v1.PodQOSClass {
	if len(limits) < 2 {
		guaranteed = false
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

// positive keeps the cpu and memory quantities of l that are above zero,
// the only ones QoS looks at.
func positive(l v1.ResourceList) v1.ResourceList {
	out := v1.ResourceList{}
	for _, name := range []v1.ResourceName{v1.ResourceCPU, v1.ResourceMemory} {
		if q, ok := l[name]; ok && q.Sign() > 0 {
			out[name] = q
		}
	}
	return out
}
