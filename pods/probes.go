package pods

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodeagent/nodeagent/kubetypes"
	"github.com/nodeagent/nodeagent/pleg"
	"github.com/nodeagent/nodeagent/pods/containerspec"
	"github.com/nodeagent/nodeagent/pods/prober"
	"github.com/nodeagent/nodeagent/pods/status"
	"github.com/nodeagent/nodeagent/runtime"
)

// minPreStopGrace is what a container has left to stop after its preStop
// hook, however long the hook took (kubelet's minimumGracePeriodInSeconds).
const minPreStopGrace = 2 * time.Second

// setupProbes gives the workers a prober and a hook runner that exec
// through the runtime.
func (m *Manager) setupProbes(rec Recorder) {
	ex, ok := m.opts.Runtime.(prober.Execer)
	if !ok {
		ex = noExec{}
	}
	var prec prober.Recorder
	if rec != nil {
		prec = rec
	}
	m.deps.probes = prober.NewManager(prober.Options{
		Exec: ex, Recorder: prec, OnChange: m.pokeUID, Clock: m.opts.Clock,
		Logger: m.log.With("component", "prober"),
	})
	m.deps.hooks = prober.NewHookRunner(ex, m.opts.Clock)
}

// noExec is the Execer of a runtime that cannot exec.
type noExec struct{}

func (noExec) Exec(context.Context, string, runtime.ExecOptions) (int, error) {
	return 0, errors.New("the runtime cannot exec in containers")
}

// pokeUID wakes the worker of a pod (its probe results changed).
func (m *Manager) pokeUID(uid types.UID) {
	m.mu.Lock()
	w := m.workers[uid]
	m.mu.Unlock()
	if w != nil {
		w.poke()
	}
}

// probed tells the prober the pod's current containers and returns what
// the probes say of the running ones, for the status.
func (w *worker) probed(pod *v1.Pod, rs pleg.PodStatus) map[string]status.Probed {
	if w.d.probes == nil {
		return nil
	}
	cur := byName(rs)
	var cs []prober.Container
	for _, c := range kubetypes.ProbedContainers(pod) {
		pc := prober.Container{Name: c.Name}
		if a := cur[c.Name]; a != nil {
			pc.ID, pc.StartedAt = a.cur.ID, a.cur.StartedAt
			pc.Running = a.cur.State == runtime.StateRunning
			pc.Terminated = a.cur.State == runtime.StateExited
		}
		cs = append(cs, pc)
	}
	w.d.probes.SetPod(withProbeCommands(pod), w.podIP(pod), cs)
	out := map[string]status.Probed{}
	for _, c := range cs {
		if !c.Running {
			continue
		}
		if p, ok := w.d.probes.Status(w.uid, c.Name, c.ID); ok {
			out[c.ID] = status.Probed{Started: p.Started, Ready: p.Ready}
		}
	}
	return out
}

// killUnhealthy stops the running containers whose liveness or startup
// probe failed, with the probe's grace period if it has one; the plan then
// restarts them per the restart policy. It reports whether it stopped any.
func (w *worker) killUnhealthy(ctx context.Context, pod *v1.Pod, rs pleg.PodStatus) (bool, error) {
	if w.d.probes == nil {
		return false, nil
	}
	kills := w.d.probes.Unhealthy(w.uid)
	if len(kills) == 0 {
		return false, nil
	}
	running := map[string]runtime.Container{}
	for _, c := range rs.Containers {
		if c.State == runtime.StateRunning && !w.reaped[c.ID] {
			running[c.ID] = c
		}
	}
	acted := false
	var errs []error
	for _, k := range kills {
		c, ok := running[k.ID]
		if !ok {
			continue
		}
		grace := gracePeriod(pod)
		if k.Grace != nil {
			grace = time.Duration(*k.Grace) * time.Second
		}
		w.log.Info("restarting unhealthy container", "container", k.Name, "containerID", k.ID, "probe", k.Kind.String(), "gracePeriod", grace)
		acted = true
		if err := w.kill(ctx, pod, c, grace, k.Message(pod.Spec.RestartPolicy != v1.RestartPolicyNever || kubetypes.IsSidecar(containerSpecOf(pod, k.Name)))); err != nil {
			errs = append(errs, err)
			continue
		}
		w.reaped[c.ID] = true
	}
	return acted, errors.Join(errs...)
}

// kill stops one container as kubelet's killContainer: the Killing event
// with msg, the container's preStop hook within the grace period, then
// SIGTERM with what is left of it (at least 2s after a hook) and SIGKILL.
// Like stop, it touches no worker state.
func (w *worker) kill(ctx context.Context, pod *v1.Pod, c runtime.Container, grace time.Duration, msg string) error {
	return w.killInOrder(ctx, pod, c, grace, msg, nil)
}

// preStop runs the container's preStop hook, if any, for at most grace,
// and returns the grace period left for the container.
func (w *worker) preStop(ctx context.Context, pod *v1.Pod, c runtime.Container, grace time.Duration) time.Duration {
	spec := containerSpecOf(pod, c.Name)
	if w.d.hooks == nil || spec == nil || spec.Lifecycle == nil || spec.Lifecycle.PreStop == nil || grace <= 0 || c.State != runtime.StateRunning {
		return grace
	}
	start := w.d.clock.Now()
	hctx, cancel := context.WithTimeout(ctx, grace)
	defer cancel()
	w.log.Info("running preStop hook", "container", c.Name, "containerID", c.ID, "gracePeriod", grace)
	if _, err := w.d.hooks.Run(hctx, pod, spec, c.ID, w.podIP(pod), spec.Lifecycle.PreStop); err != nil {
		w.log.Warn("preStop hook failed", "container", c.Name, "containerID", c.ID, "err", err)
		// As kubelet, the event does not carry the message (it may hold
		// secrets).
		w.d.event(pod, v1.EventTypeWarning, "FailedPreStopHook", "PreStopHook failed")
	}
	// kubelet counts whole seconds.
	left := grace - w.d.clock.Since(start).Truncate(time.Second)
	return max(left, minPreStopGrace)
}

// postStart runs the container's postStart hook after it started. When
// the hook fails the container is killed (kubelet's FailedPostStartHook)
// and the error says so.
func (w *worker) postStart(ctx context.Context, pod *v1.Pod, c *v1.Container, id string) error {
	if w.d.hooks == nil || c.Lifecycle == nil || c.Lifecycle.PostStart == nil {
		return nil
	}
	msg, err := w.d.hooks.Run(ctx, pod, c, id, w.podIP(pod), c.Lifecycle.PostStart)
	if err == nil {
		return nil
	}
	w.log.Warn("postStart hook failed", "container", c.Name, "containerID", id, "err", err)
	w.d.event(pod, v1.EventTypeWarning, "FailedPostStartHook", msg)
	rc := runtime.Container{ID: id, Name: c.Name, State: runtime.StateRunning}
	if kerr := w.kill(ctx, pod, rc, gracePeriod(pod), "FailedPostStartHook"); kerr != nil {
		return fmt.Errorf("PostStartHookError: %s (and %w)", msg, kerr)
	}
	w.reaped[id] = true
	return fmt.Errorf("PostStartHookError: %s", msg)
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

// statusExtras adds to a status's input what the probes, the termination
// messages and the termination in force (terminate.go) say.
func (w *worker) statusExtras(ctx context.Context, pod *v1.Pod, rs pleg.PodStatus, in *status.Input) {
	if w.d.probes != nil {
		if w.ended.failure != nil || status.PodIsTerminal(w.withStatus(pod).Status) {
			w.d.probes.RemovePod(w.uid)
		} else {
			in.Probed = w.probed(pod, rs)
		}
	}
	in.Messages = w.terminationMessages(ctx, pod, rs)
	if f := w.ended.failure; f != nil && !f.rejected {
		in.FailReason, in.FailMessage = f.reason, f.message
		if f.disruption {
			in.Disruption = f.message
		}
	}
}

// withProbeCommands returns pod with the $(VAR) references of its exec
// probes expanded from each container's static env values (kubelet's
// ExpandContainerCommandOnlyStatic); pod itself when there are none.
func withProbeCommands(pod *v1.Pod) *v1.Pod {
	var out *v1.Pod
	for i, c := range kubetypes.ProbedContainers(pod) {
		for j, p := range []*v1.Probe{c.LivenessProbe, c.ReadinessProbe, c.StartupProbe} {
			if p == nil || p.Exec == nil || !hasRef(p.Exec.Command) {
				continue
			}
			if out == nil {
				out = pod.DeepCopy()
			}
			oc := kubetypes.ProbedContainers(out)[i]
			op := []*v1.Probe{oc.LivenessProbe, oc.ReadinessProbe, oc.StartupProbe}[j]
			op.Exec.Command = containerspec.ExpandAll(p.Exec.Command, staticEnv(c))
		}
	}
	if out == nil {
		return pod
	}
	return out
}

func hasRef(cmd []string) bool {
	for _, s := range cmd {
		if strings.Contains(s, "$(") || strings.Contains(s, "$$") {
			return true
		}
	}
	return false
}

// staticEnv looks up a container's env values that are written in the
// spec (not valueFrom).
func staticEnv(c *v1.Container) func(string) (string, bool) {
	m := map[string]string{}
	for _, e := range c.Env {
		if e.ValueFrom == nil {
			m[e.Name] = e.Value
		}
	}
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

// whileStopping waits for a terminating pod's containers to stop (wg),
// reporting its status again whenever the worker is woken meanwhile (a
// readiness probe failed: the pod goes unready while its containers run
// their preStop hooks and grace periods, as with kubelet). The stopping
// goroutines touch no worker state. The caller syncs again at once after,
// so a wake consumed here for another reason is not lost.
func (w *worker) whileStopping(ctx context.Context, pod *v1.Pod, wg *sync.WaitGroup) {
	done := make(chan struct{})
	go func() {
		wg.Wait()
		close(done)
	}()
	for {
		select {
		case <-done:
			return
		case <-w.wake:
			if rs, ok := w.d.cache.Get(w.uid); ok {
				w.setStatus(ctx, pod, rs, nil, true, w.d.clock.Now())
			}
			select {
			case <-done:
				return
			case <-ctx.Done():
				<-done
				return
			case <-w.d.clock.After(time.Second): // at most one status a second
			}
		case <-ctx.Done():
			<-done
			return
		}
	}
}

// podIP is the pod's first IP (status.podIP), "" without one.
func (w *worker) podIP(pod *v1.Pod) string {
	if ips := w.podIPsOf(pod); len(ips) > 0 {
		return ips[0]
	}
	return ""
}
