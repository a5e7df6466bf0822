package config

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/cpuset"
)

// Kubelet's CPU manager policies (cpuManagerPolicy).
const (
	CPUManagerPolicyNone   = "none"
	CPUManagerPolicyStatic = "static"
)

// DefaultCPUManagerReconcilePeriod is kubelet's cpuManagerReconcilePeriod.
const DefaultCPUManagerReconcilePeriod = 10 * time.Second

// staticPolicyOptions are the static policy's options a kubelet 1.34
// knows (cpuManagerPolicyOptions); nodeagent implements none of them.
var staticPolicyOptions = []string{
	"align-by-socket", "distribute-cpus-across-cores", "distribute-cpus-across-numa",
	"full-pcpus-only", "prefer-align-cpus-by-uncorecache", "strict-cpu-reservation",
}

// DefaultCPUCFSQuotaPeriod is kubelet's CFS period, the only one
// nodeagent uses (cm.QuotaPeriod).
const DefaultCPUCFSQuotaPeriod = 100 * time.Millisecond

// validateCPUCFSQuota checks cpuCFSQuotaPeriod as kubelet does without
// the CustomCPUCFSQuotaPeriod gate (its message), which nodeagent does not
// implement: any other period than 100ms is refused.
func validateCPUCFSQuota(c *NodeAgentConfiguration) field.ErrorList {
	if d := c.CPUCFSQuotaPeriod.Duration; d != DefaultCPUCFSQuotaPeriod {
		return field.ErrorList{field.Invalid(field.NewPath("cpuCFSQuotaPeriod"), d.String(),
			"requires feature gate "+FeatureCustomCPUCFSQuotaPeriod+" (nodeagent does not implement the gate: its CFS period is 100ms)")}
	}
	return nil
}

// validateCPUManager checks the CPU manager fields as kubelet does at
// start (its messages): a known policy; options refused (none is
// implemented, and kubelet's none policy takes none); reservedSystemCPUs
// a cpuset; the static policy needs a CPU reservation.
func validateCPUManager(c *NodeAgentConfiguration) field.ErrorList {
	var errs field.ErrorList
	p := field.NewPath("cpuManagerPolicy")
	switch c.CPUManagerPolicy {
	case CPUManagerPolicyNone, CPUManagerPolicyStatic:
	default:
		errs = append(errs, field.NotSupported(p, c.CPUManagerPolicy, []string{CPUManagerPolicyNone, CPUManagerPolicyStatic}))
	}
	op := field.NewPath("cpuManagerPolicyOptions")
	for _, k := range slices.Sorted(maps.Keys(c.CPUManagerPolicyOptions)) {
		v := c.CPUManagerPolicyOptions[k]
		switch {
		case c.CPUManagerPolicy != CPUManagerPolicyStatic:
			errs = append(errs, field.Invalid(op.Key(k), v, fmt.Sprintf("None policy: received unsupported options=%v", c.CPUManagerPolicyOptions)))
		case slices.Contains(staticPolicyOptions, k):
			errs = append(errs, field.Invalid(op.Key(k), v, "nodeagent does not implement this static policy option; remove it"))
		default:
			errs = append(errs, field.Invalid(op.Key(k), v, fmt.Sprintf("unsupported cpumanager option: %q (%s)", k, v)))
		}
	}
	if c.CPUManagerReconcilePeriod.Duration <= 0 {
		errs = append(errs, field.Invalid(field.NewPath("cpuManagerReconcilePeriod"), c.CPUManagerReconcilePeriod.Duration.String(), "must be greater than 0"))
	}
	set, err := cpuset.Parse(c.ReservedSystemCPUs)
	if err != nil {
		errs = append(errs, field.Invalid(field.NewPath("reservedSystemCPUs"), c.ReservedSystemCPUs,
			fmt.Sprintf("invalid configuration: unable to parse reservedSystemCPUs (--reserved-cpus) %v, error: %v", c.ReservedSystemCPUs, err)))
	}
	if c.CPUManagerPolicy == CPUManagerPolicyStatic && err == nil && set.IsEmpty() {
		sys, kube := c.Reservations()
		total := resource.Quantity{}
		for _, m := range []map[string]string{sys, kube} {
			if q, err := resource.ParseQuantity(m["cpu"]); err == nil {
				total.Add(q)
			}
		}
		if total.Sign() <= 0 {
			errs = append(errs, field.Invalid(p, c.CPUManagerPolicy,
				"[cpumanager] the static policy requires systemreserved.cpu + kubereserved.cpu to be greater than zero (or reservedSystemCPUs)"))
		}
	}
	return errs
}

// Reservations are systemReserved and kubeReserved as kubelet uses them:
// with reservedSystemCPUs set, systemReserved cpu is the number of those
// CPUs and kubeReserved has no cpu.
func (c *NodeAgentConfiguration) Reservations() (system, kube map[string]string) {
	system, kube = maps.Clone(c.SystemReserved), maps.Clone(c.KubeReserved)
	set, err := cpuset.Parse(c.ReservedSystemCPUs)
	if err != nil || set.IsEmpty() {
		return system, kube
	}
	if system == nil {
		system = map[string]string{}
	}
	delete(kube, "cpu")
	system["cpu"] = strconv.Itoa(set.Size())
	return system, kube
}

// ReservedCPUSet is reservedSystemCPUs parsed (empty when unset or
// invalid; Validate refuses an invalid one).
func (c *NodeAgentConfiguration) ReservedCPUSet() cpuset.CPUSet {
	set, _ := cpuset.Parse(c.ReservedSystemCPUs)
	return set
}
