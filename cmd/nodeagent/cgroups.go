package main

import (
	"context"
	"fmt"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/nodeagent/nodeagent/cm"
	"github.com/nodeagent/nodeagent/config"
	"github.com/nodeagent/nodeagent/nodestatus"
	"github.com/nodeagent/nodeagent/runtime"
)

// cgroupRootFor is the cgroup the agent's kubepods hierarchy lives under:
// cgroupRoot when set; otherwise the host's root for the k8s.io namespace
// (kubelet's paths) and a root of the agent's own for any other namespace,
// derived from the namespace as netnsDirFor derives its directory, so that
// agents sharing a host never touch each other's QoS cgroups.
func cgroupRootFor(c *config.NodeAgentConfiguration) (cm.CgroupName, error) {
	if c.CgroupRoot != "" {
		return cm.ParseRoot(c.CgroupDriver == config.CgroupDriverSystemd, c.CgroupRoot)
	}
	return cm.RootForNamespace(c.ContainerRuntimeNamespace), nil
}

// newCgroupManager builds the pod cgroup layout from the configuration and
// the host's capacity, and lays out kubepods and its QoS levels.
func (a *agent) newCgroupManager(ctx context.Context) (*cm.Manager, error) {
	root, err := cgroupRootFor(a.cfg)
	if err != nil {
		return nil, err
	}
	host := &nodestatus.Host{}
	capacity := v1.ResourceList{}
	if n, err := host.NumCPU(); err == nil {
		capacity[v1.ResourceCPU] = *resource.NewQuantity(int64(n), resource.DecimalSI)
	}
	var memCapacity int64
	if mi, err := host.Meminfo(); err == nil {
		memCapacity = int64(mi.Total)
		capacity[v1.ResourceMemory] = *resource.NewQuantity(memCapacity, resource.BinarySI)
	}
	m, err := cm.New(cm.Config{
		Systemd:            a.cfg.CgroupDriver == config.CgroupDriverSystemd,
		Root:               root,
		CgroupsPerQOS:      a.cfg.CgroupsPerQOS,
		PodPidsLimit:       a.cfg.PodPidsLimit,
		Allocatable:        allocatableForPods(capacity, a.cfg.SystemReserved, a.cfg.KubeReserved),
		EnforceAllocatable: a.cfg.EnforcePodsAllocatable(),
		MemoryCapacity:     memCapacity,
		LegacyParent:       runtime.DefaultCgroupParent,
		Logger:             a.base.With("component", "cm"),
	})
	if err != nil {
		return nil, err
	}
	if err := m.Setup(); err != nil {
		return nil, err
	}
	go m.Run(ctx)
	return m, nil
}

// allocatableForPods is capacity minus the reservations (kubelet's
// getNodeAllocatableInternalAbsolute: eviction thresholds are not taken
// off, so that eviction acts before the cgroup limit is hit). Config
// validation has checked the quantities.
func allocatableForPods(capacity v1.ResourceList, reserved ...map[string]string) v1.ResourceList {
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

// cgroupDriverError names the field for a layout that cannot be made.
func cgroupDriverError(c *config.NodeAgentConfiguration, err error) error {
	return fmt.Errorf("pod cgroups (cgroupDriver %s, cgroupRoot %q): %w", c.CgroupDriver, c.CgroupRoot, err)
}
