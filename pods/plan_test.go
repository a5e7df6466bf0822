package pods

import (
	"slices"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/nodeagent/nodeagent/pleg"
	"github.com/nodeagent/nodeagent/pods/status"
	"github.com/nodeagent/nodeagent/runtime"
)

func planPod(policy v1.RestartPolicy, init []string, app ...string) *v1.Pod {
	p := &v1.Pod{}
	p.Name, p.Namespace, p.UID = "p", "ns", "uid-p"
	p.Spec.RestartPolicy = policy
	for _, n := range init {
		p.Spec.InitContainers = append(p.Spec.InitContainers, v1.Container{Name: n, Image: "img"})
	}
	for _, n := range app {
		p.Spec.Containers = append(p.Spec.Containers, v1.Container{Name: n, Image: "img"})
	}
	return p
}

// rc is a runtime container of pod p for spec container name.
func rc(pod *v1.Pod, name string, attempt uint32, st runtime.State, exit int32, started, finished time.Time) runtime.Container {
	var spec *v1.Container
	for _, cs := range [][]v1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for i := range cs {
			if cs[i].Name == name {
				spec = &cs[i]
			}
		}
	}
	c := runtime.Container{ID: name + "-" + string(rune('0'+attempt)), Name: name, Attempt: attempt, State: st, ExitCode: exit, StartedAt: started, FinishedAt: finished, Labels: map[string]string{}}
	if spec != nil {
		c.Labels[LabelContainerHash] = containerHash(spec)
	}
	return c
}

func summary(p plan) (starts, kills, removes []string) {
	for _, s := range p.start {
		starts = append(starts, s.container.Name+"#"+string(rune('0'+s.attempt)))
	}
	for _, k := range p.kill {
		kills = append(kills, k.c.ID)
	}
	for _, r := range p.remove {
		removes = append(removes, r.ID)
	}
	return
}

func TestComputePlan(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	now := t0.Add(time.Hour)
	recent := now.Add(-time.Second)
	type tc struct {
		name       string
		pod        *v1.Pod
		cs         func(*v1.Pod) []runtime.Container
		bo         map[string]crashLoop
		phase      v1.PodPhase
		starts     []string
		kills      []string
		removes    []string
		waitReason string // reason held for container "a"
	}
	always := func(init []string, app ...string) *v1.Pod { return planPod(v1.RestartPolicyAlways, init, app...) }
	for _, c := range []tc{
		{name: "new pod starts every app container", pod: always(nil, "a", "b"), starts: []string{"a#0", "b#0"}},
		{name: "init containers first, one at a time", pod: always([]string{"i1", "i2"}, "a"), starts: []string{"i1#0"}},
		{name: "next init container after success", pod: always([]string{"i1", "i2"}, "a"),
			cs: func(p *v1.Pod) []runtime.Container {
				return []runtime.Container{rc(p, "i1", 0, runtime.StateExited, 0, t0, t0)}
			},
			starts: []string{"i2#0"}},
		{name: "running init container: wait", pod: always([]string{"i1"}, "a"),
			cs: func(p *v1.Pod) []runtime.Container {
				return []runtime.Container{rc(p, "i1", 0, runtime.StateRunning, 0, t0, time.Time{})}
			}},
		{name: "app containers after all init containers succeeded", pod: always([]string{"i1"}, "a"),
			cs: func(p *v1.Pod) []runtime.Container {
				return []runtime.Container{rc(p, "i1", 0, runtime.StateExited, 0, t0, t0)}
			},
			starts: []string{"a#0"}},
		{name: "failed init container with Never: nothing more", pod: planPod(v1.RestartPolicyNever, []string{"i1"}, "a"),
			cs: func(p *v1.Pod) []runtime.Container {
				return []runtime.Container{rc(p, "i1", 0, runtime.StateExited, 1, t0, t0)}
			}},
		{name: "failed init container with OnFailure: restarted", pod: planPod(v1.RestartPolicyOnFailure, []string{"i1"}, "a"),
			cs: func(p *v1.Pod) []runtime.Container {
				return []runtime.Container{rc(p, "i1", 0, runtime.StateExited, 1, t0, t0)}
			},
			starts: []string{"i1#1"}},
		{name: "init containers are not rerun once an app container ran", pod: always([]string{"i1"}, "a"),
			cs: func(p *v1.Pod) []runtime.Container {
				return []runtime.Container{rc(p, "a", 0, runtime.StateRunning, 0, t0, time.Time{})}
			}},
		{name: "running and matching: adopted, nothing to do", pod: always(nil, "a"),
			cs: func(p *v1.Pod) []runtime.Container {
				return []runtime.Container{rc(p, "a", 0, runtime.StateRunning, 0, t0, time.Time{})}
			}},
		{name: "running with another spec: replaced", pod: always(nil, "a"),
			cs: func(p *v1.Pod) []runtime.Container {
				c := rc(p, "a", 0, runtime.StateRunning, 0, t0, time.Time{})
				c.Labels[LabelContainerHash] = "old"
				return []runtime.Container{c}
			},
			kills: []string{"a-0"}, starts: []string{"a#1"}},
		{name: "exited with Always: first restart at once", pod: always(nil, "a"),
			cs: func(p *v1.Pod) []runtime.Container {
				return []runtime.Container{rc(p, "a", 0, runtime.StateExited, 0, t0, recent)}
			},
			starts: []string{"a#1"}},
		{name: "exited again within the back-off: held", pod: always(nil, "a"),
			cs: func(p *v1.Pod) []runtime.Container {
				return []runtime.Container{rc(p, "a", 0, runtime.StateExited, 1, t0, t0), rc(p, "a", 1, runtime.StateExited, 1, recent, recent)}
			},
			bo: map[string]crashLoop{"a": {started: true, next: crashLoopBackoff}}, waitReason: status.ReasonCrashLoopBackOff},
		{name: "back-off over: restarted, old attempts beyond the previous removed", pod: always(nil, "a"),
			cs: func(p *v1.Pod) []runtime.Container {
				return []runtime.Container{rc(p, "a", 0, runtime.StateExited, 1, t0, t0), rc(p, "a", 1, runtime.StateExited, 1, t0, t0), rc(p, "a", 2, runtime.StateExited, 1, t0, t0)}
			},
			bo: map[string]crashLoop{"a": {started: true, next: crashLoopBackoff}}, starts: []string{"a#3"}, removes: []string{"a-0"}},
		{name: "OnFailure does not restart success", pod: planPod(v1.RestartPolicyOnFailure, nil, "a"),
			cs: func(p *v1.Pod) []runtime.Container {
				return []runtime.Container{rc(p, "a", 0, runtime.StateExited, 0, t0, t0)}
			}},
		{name: "Never does not restart failure", pod: planPod(v1.RestartPolicyNever, nil, "a"),
			cs: func(p *v1.Pod) []runtime.Container {
				return []runtime.Container{rc(p, "a", 0, runtime.StateExited, 2, t0, t0)}
			}},
		{name: "created but never started: replaced by the same attempt (not a restart)", pod: always(nil, "a"),
			cs: func(p *v1.Pod) []runtime.Container {
				return []runtime.Container{rc(p, "a", 0, runtime.StateCreated, 0, time.Time{}, time.Time{})}
			},
			removes: []string{"a-0"}, starts: []string{"a#0"}},
		{name: "a restarted container created but never started: the same attempt", pod: always(nil, "a"),
			cs: func(p *v1.Pod) []runtime.Container {
				return []runtime.Container{rc(p, "a", 2, runtime.StateCreated, 0, time.Time{}, time.Time{})}
			},
			removes: []string{"a-2"}, starts: []string{"a#2"}},
		{name: "terminal pod starts nothing", pod: always(nil, "a"), phase: v1.PodSucceeded},
		{name: "containers of names not in the spec go", pod: always(nil, "a"),
			cs: func(p *v1.Pod) []runtime.Container {
				return []runtime.Container{rc(p, "a", 0, runtime.StateRunning, 0, t0, time.Time{}), rc(p, "gone", 0, runtime.StateRunning, 0, t0, time.Time{}), rc(p, "old", 0, runtime.StateExited, 0, t0, t0)}
			},
			kills: []string{"gone-0"}, removes: []string{"old-0"}},
		{name: "unknown state: wait", pod: always(nil, "a"),
			cs: func(p *v1.Pod) []runtime.Container {
				return []runtime.Container{rc(p, "a", 0, runtime.StateUnknown, 0, t0, time.Time{})}
			}},
	} {
		t.Run(c.name, func(t *testing.T) {
			pod := c.pod
			pod.Status.Phase = c.phase
			rs := pleg.PodStatus{Pod: runtime.PodRef{UID: pod.UID}}
			if c.cs != nil {
				rs.Containers = c.cs(pod)
			}
			bo := c.bo
			if bo == nil {
				bo = map[string]crashLoop{}
			}
			p := computePlan(pod, rs, bo, now)
			starts, kills, removes := summary(p)
			if !slices.Equal(starts, c.starts) || !slices.Equal(kills, c.kills) || !slices.Equal(removes, c.removes) {
				t.Errorf("starts %v kills %v removes %v; want %v %v %v", starts, kills, removes, c.starts, c.kills, c.removes)
			}
			if got := p.waiting["a"].Reason; got != c.waitReason {
				t.Errorf("waiting reason of a = %q, want %q", got, c.waitReason)
			}
			if c.waitReason != "" && !p.wakeAt.After(now) {
				t.Errorf("held container but wakeAt %v", p.wakeAt)
			}
		})
	}
}
