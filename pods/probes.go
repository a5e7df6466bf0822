package pods

import (
	"context"
	"errors"
	"strings"
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
		Logger: m.log.With("component", "prober"), Metrics: prober.NewMetrics(m.opts.ProbeRegisterer),
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

// podProbes is the prober's view of one pod: it tells the prober the
// pod's containers, reads back what their probes say and restarts the
// containers they found unhealthy. With a nil prober nothing is probed.
type podProbes struct {
	uid    types.UID
	prober Prober // nil: no probes
}

// update tells the prober the pod's current containers and returns what
// the probes say of the running ones, for the status.
func (p podProbes) update(pod *v1.Pod, rs pleg.PodStatus, podIP string) map[string]status.Probed {
	if p.prober == nil {
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
	p.prober.SetPod(withProbeCommands(pod), podIP, cs)
	out := map[string]status.Probed{}
	for _, c := range cs {
		if !c.Running {
			continue
		}
		if pr, ok := p.prober.Status(p.uid, c.Name, c.ID); ok {
			out[c.ID] = status.Probed{Started: pr.Started, Ready: pr.Ready}
		}
	}
	return out
}

// remove ends the pod's probes.
func (p podProbes) remove() {
	if p.prober != nil {
		p.prober.RemovePod(p.uid)
	}
}

// started is the plan's startedFunc: what the probes say (a container
// without a startup probe has started once it runs).
func (p podProbes) started(name, id string) bool {
	if p.prober == nil {
		return true
	}
	pr, ok := p.prober.Status(p.uid, name, id)
	return !ok || pr.Started
}

// killUnhealthy stops the running containers (not in reaped, those the
// worker stopped) whose liveness or startup probe failed, with the
// probe's grace period if it has one; the plan then restarts them per the
// restart policy. It returns the containers it stopped, and whether it
// tried to stop any.
func (p podProbes) killUnhealthy(ctx context.Context, pod *v1.Pod, rs pleg.PodStatus, reaped map[string]bool, k *containerKiller, podIP string) ([]string, bool, error) {
	if p.prober == nil {
		return nil, false, nil
	}
	kills := p.prober.Unhealthy(p.uid)
	if len(kills) == 0 {
		return nil, false, nil
	}
	running := map[string]runtime.Container{}
	for _, c := range rs.Containers {
		if c.State == runtime.StateRunning && !reaped[c.ID] {
			running[c.ID] = c
		}
	}
	acted := false
	var stopped []string
	var errs []error
	for _, kl := range kills {
		c, ok := running[kl.ID]
		if !ok {
			continue
		}
		grace := gracePeriod(pod)
		if kl.Grace != nil {
			grace = time.Duration(*kl.Grace) * time.Second
		}
		k.log.Info("restarting unhealthy container", "container", kl.Name, "containerID", kl.ID, "probe", kl.Kind.String(), "gracePeriod", grace)
		acted = true
		if err := k.kill(ctx, pod, c, grace, kl.Message(pod.Spec.RestartPolicy != v1.RestartPolicyNever || kubetypes.IsSidecar(containerSpecOf(pod, kl.Name))), podIP); err != nil {
			errs = append(errs, err)
			continue
		}
		stopped = append(stopped, c.ID)
	}
	return stopped, acted, errors.Join(errs...)
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
