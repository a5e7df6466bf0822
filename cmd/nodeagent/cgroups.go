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

// newCgroupManager builds the pod cgroup layout from the configuration and
// the host's capacity, and lays out kubepods and its QoS levels.
func (a *agent) newCgroupManager(ctx context.Context) (*cm.Manager, error) {
	root, err := cm.RootFor(a.cfg.CgroupDriver == config.CgroupDriverSystemd, a.cfg.CgroupRoot, a.cfg.ContainerRuntimeNamespace)
	if err != nil {
		return nil, err
	}
	host := &nodestatus.Host{}
	capacity := v1.ResourceList{}
	if n, err := host.NumCPU(); err == nil {
		capacity[v1.ResourceCPU] = *resource.NewQuantity(int64(n), resource.DecimalSI)
	}
	var memCapacity, swapCapacity int64
	if mi, err := host.Meminfo(); err == nil {
		memCapacity, swapCapacity = int64(mi.Total), int64(mi.SwapTotal)
		capacity[v1.ResourceMemory] = *resource.NewQuantity(memCapacity, resource.BinarySI)
	}
	sysReserved, kubeReserved := a.cfg.Reservations()
	m, err := cm.New(cm.Config{
		Systemd:            a.cfg.CgroupDriver == config.CgroupDriverSystemd,
		Root:               root,
		CgroupsPerQOS:      a.cfg.CgroupsPerQOS,
		PodPidsLimit:       a.cfg.PodPidsLimit,
		Allocatable:        cm.AllocatableForPods(capacity, sysReserved, kubeReserved),
		EnforceAllocatable: a.cfg.EnforcePodsAllocatable(),
		MemoryCapacity:     memCapacity,
		Swap:               swapConfig(a.cfg, swapCapacity, a.log),
		LegacyParent:       runtime.DefaultCgroupParent,
		PodExclusiveCPUs:   a.cpus.PodExclusive,
		NoCPUQuota:         !a.cfg.CPUCFSQuota,
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

// cgroupDriverError names the field for a layout that cannot be made.
func cgroupDriverError(c *config.NodeAgentConfiguration, err error) error {
	return fmt.Errorf("pod cgroups (cgroupDriver %s, cgroupRoot %q): %w", c.CgroupDriver, c.CgroupRoot, err)
}
