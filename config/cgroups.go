package config

import (
	"errors"
	"fmt"
	"path"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

// validateCgroups checks the cgroup fields as kubelet does, for the values
// nodeagent supports.
func validateCgroups(c *NodeAgentConfiguration) field.ErrorList {
	var errs field.ErrorList
	drivers := []string{CgroupDriverCgroupfs, CgroupDriverSystemd}
	if !slices.Contains(drivers, c.CgroupDriver) {
		errs = append(errs, field.NotSupported(field.NewPath("cgroupDriver"), c.CgroupDriver, drivers))
	}
	if r := c.CgroupRoot; r != "" {
		p := field.NewPath("cgroupRoot")
		switch {
		case !strings.HasPrefix(r, "/") || path.Clean(r) != r:
			errs = append(errs, field.Invalid(p, r, "must be a clean absolute cgroup path such as /kube (or a slice path such as /kube.slice with the systemd driver)"))
		case c.CgroupDriver == CgroupDriverSystemd && r != "/":
			for _, comp := range strings.Split(strings.TrimPrefix(r, "/"), "/") {
				if !strings.HasSuffix(comp, ".slice") || comp == ".slice" {
					errs = append(errs, field.Invalid(p, r, "with cgroupDriver systemd every component must be a slice (name.slice), such as /kube.slice"))
					break
				}
			}
		}
	}
	p := field.NewPath("enforceNodeAllocatable")
	for i, v := range c.EnforceNodeAllocatable {
		switch v {
		case EnforceNodeAllocatablePods:
			if !c.CgroupsPerQOS {
				errs = append(errs, field.Invalid(p.Index(i), v, "enforcing node allocatable on pods requires cgroupsPerQOS"))
			}
		case EnforceNodeAllocatableNone:
			if len(c.EnforceNodeAllocatable) > 1 {
				errs = append(errs, field.Invalid(p.Index(i), v, "none cannot be combined with other values"))
			}
		default:
			// system-reserved and kube-reserved need systemReservedCgroup
			// and kubeReservedCgroup, which nodeagent does not manage.
			errs = append(errs, field.NotSupported(p.Index(i), v, []string{EnforceNodeAllocatablePods, EnforceNodeAllocatableNone}))
		}
	}
	if c.PodPidsLimit < -1 {
		errs = append(errs, field.Invalid(field.NewPath("podPidsLimit"), c.PodPidsLimit, "must be -1 (no limit) or greater"))
	}
	switch b := c.MemorySwap.SwapBehavior; b {
	case "", SwapBehaviorNoSwap, SwapBehaviorLimitedSwap:
	default:
		// kubelet's message.
		errs = append(errs, field.Invalid(field.NewPath("memorySwap", "swapBehavior"), b, fmt.Sprintf("must be one of: \"\", %q or %q", SwapBehaviorLimitedSwap, SwapBehaviorNoSwap)))
	}
	return errs
}

// EnforcePodsAllocatable says whether kubepods gets node allocatable's
// memory limit.
func (c *NodeAgentConfiguration) EnforcePodsAllocatable() bool {
	return c.CgroupsPerQOS && slices.Contains(c.EnforceNodeAllocatable, EnforceNodeAllocatablePods)
}

// ErrSingleProcessOOMKillV1 is kubelet's error for singleProcessOOMKill
// set to false on a cgroup v1 host, which has no memory.oom.group.
var ErrSingleProcessOOMKillV1 = errors.New("invalid configuration: singleProcessOOMKill must not be explicitly set to false when using cgroup v1")

// ErrFailCgroupV1 is kubelet's error for failCgroupV1 on a cgroup v1 host.
var ErrFailCgroupV1 = errors.New("kubelet is configured to not run on a host using cgroup v1. cgroup v1 support is in maintenance mode")

// CheckCgroupV1 is kubelet's check of failCgroupV1 on a host with
// (unified) or without the cgroup v2 unified hierarchy.
func (c *NodeAgentConfiguration) CheckCgroupV1(unified bool) error {
	if c.FailCgroupV1 && !unified {
		return ErrFailCgroupV1
	}
	return nil
}

// PodCapacity is the node's pods capacity as kubelet computes it: maxPods,
// capped at podsPerCore × numCPU when podsPerCore is greater than 0.
func (c *NodeAgentConfiguration) PodCapacity(numCPU int) int32 {
	if c.PodsPerCore > 0 && int64(c.PodsPerCore)*int64(numCPU) < int64(c.MaxPods) {
		return c.PodsPerCore * int32(numCPU)
	}
	return c.MaxPods
}

// EffectiveSingleProcessOOMKill is singleProcessOOMKill as kubelet applies
// it on a host with (unified) or without the cgroup v2 unified hierarchy:
// unset is false on v2 and true on v1, where false is refused with
// kubelet's error.
func (c *NodeAgentConfiguration) EffectiveSingleProcessOOMKill(unified bool) (bool, error) {
	if !unified {
		if c.SingleProcessOOMKill != nil && !*c.SingleProcessOOMKill {
			return false, ErrSingleProcessOOMKillV1
		}
		return true, nil
	}
	if c.SingleProcessOOMKill == nil {
		return false, nil
	}
	return *c.SingleProcessOOMKill, nil
}
