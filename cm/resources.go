package cm

import (
	v1 "k8s.io/api/core/v1"
	resourcehelper "k8s.io/component-helpers/resource"
)

// CPU arithmetic of kubelet (pkg/kubelet/cm/helpers_linux.go).
const (
	MinShares      = 2
	MaxShares      = 262144
	SharesPerCPU   = 1024
	QuotaPeriod    = 100000 // µs
	MinQuotaPeriod = 1000   // µs
)

// ResourceConfig are the limits of one cgroup; nil means "leave as is".
type ResourceConfig struct {
	CPUShares *uint64
	CPUQuota  *int64
	CPUPeriod *uint64
	Memory    *int64
	PidsLimit *int64
	// HugePageLimit is the hugetlb limit in bytes per page size in bytes;
	// nil leaves hugetlb as is, otherwise every size the host supports is
	// set and those not named are 0 (see hugetlbLimits).
	HugePageLimit map[int64]int64
}

// MilliCPUToShares converts a cpu request to cgroup v1 cpu.shares.
func MilliCPUToShares(milli int64) uint64 {
	if milli == 0 {
		return MinShares
	}
	s := milli * SharesPerCPU / 1000
	switch {
	case s < MinShares:
		return MinShares
	case s > MaxShares:
		return MaxShares
	}
	return uint64(s)
}

// MilliCPUToQuota converts a cpu limit to a CFS quota over period; 0 for
// no limit, at least MinQuotaPeriod otherwise.
func MilliCPUToQuota(milli, period int64) int64 {
	if milli == 0 {
		return 0
	}
	q := milli * period / 1000
	if q < MinQuotaPeriod {
		return MinQuotaPeriod
	}
	return q
}

// SharesToWeight converts cpu.shares ([2, 262144]) to cgroup v2 cpu.weight
// ([1, 10000]), as runc and kubelet do.
func SharesToWeight(shares uint64) uint64 {
	if shares == 0 {
		return 0
	}
	return 1 + ((shares-2)*9999)/262142
}

// WithoutCPUQuota is rc with its CFS quota, if it has one, removed (-1):
// the pod cgroup of a pod with exclusive CPUs, and every pod cgroup with
// cpuCFSQuota false, as kubelet's ResourceConfigForPod makes it without
// enforceCPULimits.
func WithoutCPUQuota(rc ResourceConfig) ResourceConfig {
	if rc.CPUQuota != nil {
		none := int64(-1)
		rc.CPUQuota = &none
	}
	return rc
}

// PodResourceConfig is the pod cgroup's configuration, as kubelet's
// ResourceConfigForPod: cpu shares from the summed requests (the largest
// init container's if larger, plus overhead) for every class but
// BestEffort (2 shares); a CFS quota from the summed limits when every
// container has a cpu limit; a memory limit when every container has one
// (always for Guaranteed); the pids limit when podPidsLimit > 0; hugetlb
// limits of the summed hugepages-<size> requests (0 for the sizes it does
// not request) whatever its class.
func PodResourceConfig(pod *v1.Pod, podPidsLimit int64) ResourceConfig {
	reqs := resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{})
	cpuLimited, memLimited := true, true
	limits := resourcehelper.PodLimits(pod, resourcehelper.PodResourcesOptions{
		ContainerFn: func(res v1.ResourceList, _ resourcehelper.ContainerType) {
			if res.Cpu().IsZero() {
				cpuLimited = false
			}
			if res.Memory().IsZero() {
				memLimited = false
			}
		},
	})
	if resourcehelper.IsPodLevelResourcesSet(pod) {
		cpuLimited = cpuLimited || !pod.Spec.Resources.Limits.Cpu().IsZero()
		memLimited = memLimited || !pod.Spec.Resources.Limits.Memory().IsZero()
	}
	shares := MilliCPUToShares(reqs.Cpu().MilliValue())
	quota := MilliCPUToQuota(limits.Cpu().MilliValue(), QuotaPeriod)
	period := uint64(QuotaPeriod)
	mem := limits.Memory().Value()

	var rc ResourceConfig
	switch QOSClass(pod) {
	case v1.PodQOSGuaranteed:
		rc.CPUShares, rc.CPUQuota, rc.CPUPeriod, rc.Memory = &shares, &quota, &period, &mem
	case v1.PodQOSBurstable:
		rc.CPUShares = &shares
		if cpuLimited {
			rc.CPUQuota, rc.CPUPeriod = &quota, &period
		}
		if memLimited {
			rc.Memory = &mem
		}
	default:
		min := uint64(MinShares)
		rc.CPUShares = &min
	}
	if podPidsLimit > 0 {
		rc.PidsLimit = &podPidsLimit
	}
	rc.HugePageLimit = HugePageLimits(reqs)
	return rc
}

// podCPURequest is the pod's summed cpu request in millicores, which its
// QoS class's cgroup adds up.
func podCPURequest(pod *v1.Pod) int64 {
	reqs := resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{})
	return reqs.Cpu().MilliValue()
}

// BurstableShares is the burstable QoS cgroup's cpu shares: the summed cpu
// requests of the burstable pods (at least MinShares).
func BurstableShares(milliCPU int64) uint64 { return MilliCPUToShares(milliCPU) }

// NodeAllocatableConfig is kubepods' configuration from the resources it
// may use: cpu shares always (the default 1024 would starve pods next to
// the system), memory, pids and hugetlb limits only when enforced.
func NodeAllocatableConfig(alloc v1.ResourceList, enforce bool) ResourceConfig {
	var rc ResourceConfig
	if q, ok := alloc[v1.ResourceCPU]; ok {
		s := MilliCPUToShares(q.MilliValue())
		rc.CPUShares = &s
	}
	if !enforce {
		return rc
	}
	if q, ok := alloc[v1.ResourceMemory]; ok {
		m := q.Value()
		rc.Memory = &m
	}
	if q, ok := alloc["pid"]; ok {
		p := q.Value()
		rc.PidsLimit = &p
	}
	rc.HugePageLimit = HugePageLimits(alloc)
	return rc
}
