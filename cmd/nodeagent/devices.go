package main

import (
	"context"
	"path/filepath"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodeagent/nodeagent/cm/devicemanager"
	"github.com/nodeagent/nodeagent/cm/podresources"
	"github.com/nodeagent/nodeagent/pods"
	"github.com/nodeagent/nodeagent/pods/containerspec"
	"github.com/nodeagent/nodeagent/runtime"
)

// Kubelet's directories under the root directory.
const (
	devicePluginsDir = "device-plugins"
	podResourcesDir  = "pod-resources"
)

// newDevices is the device manager on <rootDir>/device-plugins; it
// serves once startDevices runs.
func (a *agent) newDevices() *devicemanager.Manager {
	return devicemanager.New(devicemanager.Options{
		Dir:              filepath.Join(a.cfg.RootDir, devicePluginsDir),
		Logger:           a.base.With("component", "devicemanager", "node", a.nodeName),
		ContainerRunning: a.containerRunning,
		Registerer:       a.reg,
		Align:            a.topology,
	})
}

// containerRunning asks containerd whether a container runs (the device
// manager keeps a running container's devices at re-admission).
func (a *agent) containerRunning(uid types.UID, name string) bool {
	rt := a.rt.Load()
	if rt == nil {
		return false
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	cs, err := rt.ListContainers(ctx)
	if err != nil {
		a.log.Error("cannot list containers for the device manager", "err", err)
		return false
	}
	for _, c := range cs {
		if c.Pod.UID == uid && c.Name == name && c.State == runtime.StateRunning {
			return true
		}
	}
	return false
}

// startDevices serves the device plugins' registration socket; the agent
// runs pods without device plugins when it cannot.
func (a *agent) startDevices(ctx context.Context) pods.Devices {
	if err := a.devices.Start(ctx); err != nil {
		a.log.Error("device plugins disabled", "err", err)
		return nil
	}
	return podDevices{a.devices}
}

// servePodResources serves the pod-resources API over pm's pods.
func (a *agent) servePodResources(ctx context.Context, pm *pods.Manager) {
	srv := &podresources.Server{Pods: pm, Devices: a.devices, CPUs: a.cpus, Metrics: podresources.NewMetrics(a.reg)}
	if err := podresources.Serve(ctx, filepath.Join(a.cfg.RootDir, podResourcesDir), srv,
		a.base.With("component", "podresources")); err != nil {
		a.log.Error("pod resources API not served", "err", err)
	}
}

// podDevices adapts the device manager to the pod workers.
type podDevices struct{ m *devicemanager.Manager }

func (d podDevices) Allocate(pod *v1.Pod, active []*v1.Pod) error { return d.m.Allocate(pod, active) }

func (d podDevices) SanitizeAllocatable(l v1.ResourceList) v1.ResourceList {
	return d.m.SanitizeAllocatable(l)
}

func (d podDevices) RunOptions(ctx context.Context, pod *v1.Pod, c *v1.Container) (containerspec.Devices, error) {
	o, err := d.m.RunOptions(ctx, pod, c)
	return containerspec.Devices(o), err
}
