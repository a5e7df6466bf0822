package pods

import (
	"encoding/json"
	"fmt"
	"hash/fnv"
	"sort"
	"strconv"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/nodeagent/nodeagent/pleg"
	"github.com/nodeagent/nodeagent/pods/status"
	"github.com/nodeagent/nodeagent/runtime"
)

// LabelContainerHash is the label holding the hash of the container spec a
// container was created from. A running container whose hash matches its
// spec is adopted after an agent restart; one that does not is replaced.
const LabelContainerHash = "io.nodeagent.container-hash.v2"

// labelLegacyContainerHash is the label of containers made by agents before
// v2, which hashed the whole container spec. Such a container is adopted:
// its hash cannot tell a real change from a new defaulted field, and
// replacing every container on an agent upgrade is what v2 exists to avoid.
const labelLegacyContainerHash = "io.nodeagent.container-hash"

// containerHash hashes what of a container spec a running container cannot
// change without a restart, as kubelet (HashContainer): its name and image.
// Every other field of a pod's containers is immutable in the API, and a
// new field that a newer API server or client defaults must never restart
// a container.
func containerHash(c *v1.Container) string {
	b, _ := json.Marshal(map[string]string{"name": c.Name, "image": c.Image})
	h := fnv.New64a()
	_, _ = h.Write(b)
	return strconv.FormatUint(h.Sum64(), 16)
}

// specChanged reports whether a running container was made from another
// version of its spec.
func specChanged(cur *runtime.Container, c *v1.Container) bool {
	h, ok := cur.Labels[LabelContainerHash]
	if !ok {
		_, legacy := cur.Labels[labelLegacyContainerHash]
		return !legacy
	}
	return h != containerHash(c)
}

// attempts are the runtime containers of one container name: the current
// (highest attempt) and the previous one.
type attempts struct {
	cur, prev *runtime.Container
	older     []runtime.Container // every attempt before prev
}

// byName groups a pod's runtime containers by container name, newest
// attempt first.
func byName(rs pleg.PodStatus) map[string]*attempts {
	cs := append([]runtime.Container(nil), rs.Containers...)
	sort.SliceStable(cs, func(i, j int) bool {
		if cs[i].Attempt != cs[j].Attempt {
			return cs[i].Attempt > cs[j].Attempt
		}
		return cs[i].CreatedAt.After(cs[j].CreatedAt)
	})
	out := map[string]*attempts{}
	for i := range cs {
		c := &cs[i]
		a := out[c.Name]
		if a == nil {
			a = &attempts{}
			out[c.Name] = a
		}
		switch {
		case a.cur == nil:
			a.cur = c
		case a.prev == nil:
			a.prev = c
		default:
			a.older = append(a.older, *c)
		}
	}
	return out
}

// startAction starts a new attempt of a container.
type startAction struct {
	container *v1.Container
	init      bool
	attempt   uint32
	// ephemeral: an ephemeral container, started once (ephemeral.go);
	// pidNSOf, when set, is a process whose PID namespace it joins.
	ephemeral bool
	pidNSOf   uint32
}

// killAction stops a running container.
type killAction struct {
	c      runtime.Container
	reason string
}

// plan is what one sync does, computed purely from the desired pod, the
// runtime's view of it, the restart back-off and now.
type plan struct {
	kill   []killAction
	remove []runtime.Container // exited attempts no status needs any more
	start  []startAction
	// waiting are containers held back (crash-loop back-off).
	waiting map[string]status.Waiting
	// backoff is the back-off to keep for containers this plan restarts.
	backoff map[string]crashLoop
	// wakeAt is when a held-back container may be restarted (zero: none).
	wakeAt time.Time
}

func (p *plan) empty() bool { return len(p.kill)+len(p.remove)+len(p.start) == 0 }

func (p *plan) wait(name string, w status.Waiting, at time.Time) {
	if p.waiting == nil {
		p.waiting = map[string]status.Waiting{}
	}
	p.waiting[name] = w
	if p.wakeAt.IsZero() || at.Before(p.wakeAt) {
		p.wakeAt = at
	}
}

// shouldRestart applies the pod's restart policy to an exited container.
func shouldRestart(policy v1.RestartPolicy, exitCode int32) bool {
	switch policy {
	case v1.RestartPolicyNever:
		return false
	case v1.RestartPolicyOnFailure:
		return exitCode != 0
	}
	return true
}

// restartOrWait starts the next attempt of an exited container when its
// back-off allows, or holds it with CrashLoopBackOff.
func (p *plan) restartOrWait(pod *v1.Pod, c *v1.Container, init bool, cur *runtime.Container, bo crashLoop, now time.Time) {
	at, delay, next := bo.restartAt(cur.StartedAt, cur.FinishedAt)
	if at.After(now) {
		p.wait(c.Name, status.Waiting{
			Reason:  status.ReasonCrashLoopBackOff,
			Message: fmt.Sprintf("back-off %s restarting failed container=%s pod=%s_%s(%s)", delay, c.Name, pod.Name, pod.Namespace, pod.UID),
		}, at)
		return
	}
	p.start = append(p.start, startAction{container: c, init: init, attempt: cur.Attempt + 1})
	if p.backoff == nil {
		p.backoff = map[string]crashLoop{}
	}
	p.backoff[c.Name] = next
}

// computePlan decides one sync's actions for a pod that should run, every
// running sidecar counting as started (see computePlanProbed).
func computePlan(pod *v1.Pod, rs pleg.PodStatus, bo map[string]crashLoop, now time.Time) plan {
	return computePlanProbed(pod, rs, bo, alwaysStarted, now)
}

// computePlanProbed decides one sync's actions for a pod that should run;
// started says which running sidecars have started (their startup probe
// succeeded). Terminal pods (phase Succeeded or Failed in the API) start
// nothing.
func computePlanProbed(pod *v1.Pod, rs pleg.PodStatus, bo map[string]crashLoop, started startedFunc, now time.Time) plan {
	var p plan
	named := byName(rs)
	inSpec := map[string]bool{}
	for _, c := range pod.Spec.InitContainers {
		inSpec[c.Name] = true
	}
	for _, c := range pod.Spec.Containers {
		inSpec[c.Name] = true
	}
	for _, c := range pod.Spec.EphemeralContainers {
		inSpec[c.Name] = true
	}
	// Containers of names the spec does not have, and old attempts.
	for name, a := range named {
		for _, c := range append([]*runtime.Container{a.cur, a.prev}, ptrs(a.older)...) {
			if c == nil {
				continue
			}
			switch {
			case !inSpec[name] && c.State == runtime.StateRunning:
				p.kill = append(p.kill, killAction{c: *c, reason: "not in the pod's spec"})
			case !inSpec[name] && c.State != runtime.StateRunning:
				p.remove = append(p.remove, *c)
			}
		}
		if inSpec[name] {
			for _, c := range a.older {
				if c.State != runtime.StateRunning {
					p.remove = append(p.remove, c)
				} else {
					p.kill = append(p.kill, killAction{c: c, reason: "superseded by a newer attempt"})
				}
			}
			if a.prev != nil && a.prev.State == runtime.StateRunning {
				p.kill = append(p.kill, killAction{c: *a.prev, reason: "superseded by a newer attempt"})
			}
		}
	}
	if pod.Status.Phase == v1.PodSucceeded || pod.Status.Phase == v1.PodFailed {
		return p
	}
	policy := pod.Spec.RestartPolicy
	p.startEphemeral(pod, named)

	// Init containers run in order (sidecar.go).
	initialized, failed := p.initActions(pod, named, bo, started, now)
	if failed {
		p.stopSidecars(pod, named, "the pod's initialization failed")
		return p
	}
	if !initialized {
		return p
	}

	for i := range pod.Spec.Containers {
		c := &pod.Spec.Containers[i]
		a := named[c.Name]
		if a == nil {
			p.start = append(p.start, startAction{container: c})
			continue
		}
		cur := a.cur
		switch cur.State {
		case runtime.StateRunning:
			if specChanged(cur, c) {
				p.kill = append(p.kill, killAction{c: *cur, reason: "its spec changed"})
				p.start = append(p.start, startAction{container: c, attempt: cur.Attempt + 1})
			}
		case runtime.StateCreated:
			// Created but never started (the agent stopped in between):
			// replaced by the same attempt, as it never ran (not a
			// restart; an agent SIGKILL must not count as one).
			p.remove = append(p.remove, *cur)
			p.start = append(p.start, startAction{container: c, attempt: cur.Attempt})
		case runtime.StateExited:
			if shouldRestart(policy, cur.ExitCode) {
				p.restartOrWait(pod, c, false, cur, bo[c.Name], now)
			}
		}
	}
	if regularDone(pod, named) {
		p.stopSidecars(pod, named, "the pod's regular containers have finished")
	}
	return p
}

func ptrs(cs []runtime.Container) []*runtime.Container {
	out := make([]*runtime.Container, len(cs))
	for i := range cs {
		out[i] = &cs[i]
	}
	return out
}

// killPlan stops everything that runs, for a pod that is terminating.
func killPlan(rs pleg.PodStatus) []runtime.Container {
	var out []runtime.Container
	for _, c := range rs.Containers {
		if c.State == runtime.StateRunning || c.State == runtime.StateCreated || c.State == runtime.StateUnknown {
			out = append(out, c)
		}
	}
	return out
}
