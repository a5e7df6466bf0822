package cm

import (
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// AllocatableForPods is capacity minus the reservations (kubelet's
// getNodeAllocatableInternalAbsolute: eviction thresholds are not taken
// off, so that eviction acts before the cgroup limit is hit). A
// reservation that does not parse is skipped (config validation has
// checked the quantities); a resource never goes below zero. capacity is
// not changed.
func AllocatableForPods(capacity v1.ResourceList, reserved ...map[string]string) v1.ResourceList {
	out := capacity.DeepCopy()
	for _, r := range reserved {
		for name, s := range r {
			q, err := resource.ParseQuantity(s)
			if err != nil {
				continue
			}
			if v, ok := out[v1.ResourceName(name)]; ok {
				v.Sub(q)
				if v.Sign() < 0 {
					v = resource.Quantity{}
				}
				out[v1.ResourceName(name)] = v
			}
		}
	}
	return out
}
