package main

import (
	"context"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/nodeagent/nodeagent/cm/cpumanager"
	"github.com/nodeagent/nodeagent/cm/topologymanager"
	"github.com/nodeagent/nodeagent/config"
	"github.com/nodeagent/nodeagent/pods"
	"github.com/nodeagent/nodeagent/runtime"
)

// sysCPUDir is where the CPUs' topology is read.
const sysCPUDir = "/sys/devices/system/cpu"

// newCPUManager is kubelet's CPU manager over <rootDir>/cpu_manager_state,
// restored: as kubelet, a checkpoint it cannot use stops the start.
func (a *agent) newCPUManager() (*cpumanager.Manager, error) {
	o := cpumanager.Options{
		Policy:          a.cfg.CPUManagerPolicy,
		ReconcilePeriod: a.cfg.CPUManagerReconcilePeriod.Duration,
		ReservedCPUs:    a.cfg.ReservedCPUSet(),
		StateDir:        a.cfg.RootDir,
		Align:           a.topology,
		Logger:          a.base.With("component", "cpumanager", "node", a.nodeName),
	}
	if o.Policy == config.CPUManagerPolicyStatic {
		topo, err := cpumanager.Discover(sysCPUDir)
		if err != nil {
			return nil, fmt.Errorf("cpu manager: %w", err)
		}
		o.Topology = topo
		sys, kube := a.cfg.Reservations()
		for _, m := range []map[string]string{sys, kube} {
			if q, err := resource.ParseQuantity(m["cpu"]); err == nil {
				o.Reserved.Add(q)
			}
		}
	}
	m, err := cpumanager.New(o)
	if err != nil {
		return nil, fmt.Errorf("cpu manager: %w", err)
	}
	if err := m.Restore(); err != nil {
		return nil, fmt.Errorf("start cpu manager error: %w", err)
	}
	return m, nil
}

// newTopologyManager is kubelet's topology manager for
// topologyManagerPolicy, on the NUMA nodes under config.SysNodeDir (config
// refuses a policy other than none on a machine with more than one).
func (a *agent) newTopologyManager() (*topologymanager.Manager, error) {
	n, err := config.NUMANodes(config.SysNodeDir)
	if err != nil {
		return nil, fmt.Errorf("topology manager: cannot discover NUMA topology: %w", err)
	}
	m, err := topologymanager.New(a.cfg.TopologyManagerPolicy, a.cfg.TopologyManagerScope, n, a.reg)
	if err != nil {
		return nil, fmt.Errorf("topology manager: %w", err)
	}
	return m, nil
}

// runCPUManager runs the CPU manager's reconcile loop over rt and pm's
// pods until ctx ends.
func (a *agent) runCPUManager(ctx context.Context, rt *runtime.Runtime, pm *pods.Manager) {
	a.cpus.Run(ctx, cpuRuntime{rt}, cpumanager.Pods{Active: pm.HoldingPods, Ready: pm.SourcesReady})
}

// cpuRuntime adapts the runtime to the CPU manager's reconcile loop.
type cpuRuntime struct{ rt *runtime.Runtime }

// cpuListTimeout bounds a listing of the containers for a reconcile.
const cpuListTimeout = 10 * time.Second

func (c cpuRuntime) RunningContainers(ctx context.Context) ([]cpumanager.Container, error) {
	ctx, cancel := context.WithTimeout(ctx, cpuListTimeout)
	defer cancel()
	cs, err := c.rt.ListContainers(ctx)
	if err != nil {
		return nil, err
	}
	var out []cpumanager.Container
	for _, x := range cs {
		if x.State == runtime.StateRunning {
			out = append(out, cpumanager.Container{PodUID: string(x.Pod.UID), Name: x.Name, ID: x.ID})
		}
	}
	return out, nil
}

func (c cpuRuntime) UpdateContainerCPUSet(ctx context.Context, id, cpus string) error {
	return c.rt.UpdateContainerCPUSet(ctx, id, cpus)
}
