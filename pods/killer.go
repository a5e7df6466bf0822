package pods

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"

	"github.com/nodeagent/nodeagent/kubetypes"
	"github.com/nodeagent/nodeagent/pleg"
	"github.com/nodeagent/nodeagent/runtime"
)

// minPreStopGrace is what a container has left to stop after its preStop
// hook, however long the hook took (kubelet's minimumGracePeriodInSeconds).
const minPreStopGrace = 2 * time.Second

// containerKiller stops a pod's containers as kubelet's killContainer
// does (the Killing event, the preStop hook within the grace period, then
// SIGTERM with what is left of it and SIGKILL; a pod's sidecars in
// kubelet's order) and runs their postStart hooks, killing a container
// whose hook failed. It keeps no state: its methods may run concurrently
// for one pod's containers, and the worker records what they stopped.
// podIP is the pod's IP the hooks see.
type containerKiller struct {
	uid   types.UID
	rt    Runtime    // StopContainer
	pleg  PLEG       // the deaths to expect
	hooks HookRunner // nil: no lifecycle hooks
	clock clock.Clock
	event eventFunc
	log   *slog.Logger
}

func newContainerKiller(d *workerDeps, uid types.UID, log *slog.Logger) containerKiller {
	return containerKiller{uid: uid, rt: d.rt, pleg: d.pleg, hooks: d.hooks, clock: d.clock, event: d.event, log: log}
}

// kill stops one container at once: the Killing event with msg, the
// container's preStop hook within the grace period, then SIGTERM with
// what is left of it (at least 2s after a hook) and SIGKILL.
func (k *containerKiller) kill(ctx context.Context, pod *v1.Pod, c runtime.Container, grace time.Duration, msg, podIP string) error {
	return k.killInOrder(ctx, pod, c, grace, msg, podIP, nil)
}

// killInOrder is kill, for a container that stops in order (nil: at
// once): after its preStop hook it waits for its turn within what is left
// of its grace period, and stops with the rest of it (at least 2s).
func (k *containerKiller) killInOrder(ctx context.Context, pod *v1.Pod, c runtime.Container, grace time.Duration, msg, podIP string, order *stopOrder) error {
	if order != nil {
		defer order.stopped(c.Name)
	}
	if expectsDeath(c) {
		k.pleg.ExpectWithin(k.uid, c.ID, pleg.ContainerDied, grace+expectTTL)
	}
	k.event(pod, v1.EventTypeNormal, "Killing", msg)
	grace = k.preStop(ctx, pod, c, grace, podIP)
	if order != nil {
		waited := order.wait(ctx, k.clock, c.Name, grace)
		grace = max(grace-waited.Truncate(time.Second), minPreStopGrace)
	}
	if err := k.rt.StopContainer(ctx, c.ID, grace); err != nil {
		return fmt.Errorf("stop container %s: %w", c.Name, err)
	}
	return nil
}

// stopAll starts stopping the running containers of a pod, all at once but
// in kubelet's order when the pod has sidecars, each with the grace period,
// and returns; wg is done once every one returned, errs[i] being the error
// of running[i].
func (k *containerKiller) stopAll(ctx context.Context, pod *v1.Pod, running []runtime.Container, grace time.Duration, podIP string, wg *sync.WaitGroup, errs []error) {
	var order *stopOrder
	if kubetypes.HasSidecar(pod) {
		order = newStopOrder(pod, running)
	}
	for i, c := range running {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = k.killInOrder(ctx, pod, c, grace, "Stopping container "+c.Name, podIP, order)
		}()
	}
}

// preStop runs the container's preStop hook, if any, for at most grace,
// and returns the grace period left for the container.
func (k *containerKiller) preStop(ctx context.Context, pod *v1.Pod, c runtime.Container, grace time.Duration, podIP string) time.Duration {
	spec := containerSpecOf(pod, c.Name)
	if k.hooks == nil || spec == nil || spec.Lifecycle == nil || spec.Lifecycle.PreStop == nil || grace <= 0 || c.State != runtime.StateRunning {
		return grace
	}
	start := k.clock.Now()
	hctx, cancel := context.WithTimeout(ctx, grace)
	defer cancel()
	k.log.Info("running preStop hook", "container", c.Name, "containerID", c.ID, "gracePeriod", grace)
	if _, err := k.hooks.Run(hctx, pod, spec, c.ID, podIP, spec.Lifecycle.PreStop); err != nil {
		k.log.Warn("preStop hook failed", "container", c.Name, "containerID", c.ID, "err", err)
		// As kubelet, the event does not carry the message (it may hold
		// secrets).
		k.event(pod, v1.EventTypeWarning, "FailedPreStopHook", "PreStopHook failed")
	}
	// kubelet counts whole seconds.
	left := grace - k.clock.Since(start).Truncate(time.Second)
	return max(left, minPreStopGrace)
}

// postStart runs the container's postStart hook after it started. When
// the hook fails the container is killed (kubelet's FailedPostStartHook)
// and the error says so; killed reports that the kill succeeded.
func (k *containerKiller) postStart(ctx context.Context, pod *v1.Pod, c *v1.Container, id, podIP string) (killed bool, err error) {
	if k.hooks == nil || c.Lifecycle == nil || c.Lifecycle.PostStart == nil {
		return false, nil
	}
	msg, err := k.hooks.Run(ctx, pod, c, id, podIP, c.Lifecycle.PostStart)
	if err == nil {
		return false, nil
	}
	k.log.Warn("postStart hook failed", "container", c.Name, "containerID", id, "err", err)
	k.event(pod, v1.EventTypeWarning, "FailedPostStartHook", msg)
	rc := runtime.Container{ID: id, Name: c.Name, State: runtime.StateRunning}
	if kerr := k.kill(ctx, pod, rc, gracePeriod(pod), "FailedPostStartHook", podIP); kerr != nil {
		return false, fmt.Errorf("PostStartHookError: %s (and %w)", msg, kerr)
	}
	return true, fmt.Errorf("PostStartHookError: %s", msg)
}

func containerSpecOf(pod *v1.Pod, name string) *v1.Container {
	for i := range pod.Spec.Containers {
		if pod.Spec.Containers[i].Name == name {
			return &pod.Spec.Containers[i]
		}
	}
	for i := range pod.Spec.InitContainers {
		if pod.Spec.InitContainers[i].Name == name {
			return &pod.Spec.InitContainers[i]
		}
	}
	return nil
}
