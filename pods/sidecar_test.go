package pods

import (
	"slices"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilptr "k8s.io/utils/ptr"

	"github.com/nodeagent/nodeagent/kubetypes"
	"github.com/nodeagent/nodeagent/pleg"
	"github.com/nodeagent/nodeagent/pods/status"
	"github.com/nodeagent/nodeagent/runtime"
)

// sidecarPod is planPod whose init containers named in sidecars are
// sidecars (restartPolicy Always).
func sidecarPod(policy v1.RestartPolicy, init []string, sidecars []string, app ...string) *v1.Pod {
	p := planPod(policy, init, app...)
	for i := range p.Spec.InitContainers {
		if slices.Contains(sidecars, p.Spec.InitContainers[i].Name) {
			p.Spec.InitContainers[i].RestartPolicy = utilptr.To(v1.ContainerRestartPolicyAlways)
		}
	}
	return p
}

// The planning decisions for pods with sidecars, as kubelet's
// computeInitContainerActions and computePodActions make them.
func TestComputePlanSidecars(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	now := t0.Add(time.Hour)
	recent := now.Add(-time.Second)
	running := func(p *v1.Pod, name string, attempt uint32) runtime.Container {
		return rc(p, name, attempt, runtime.StateRunning, 0, t0, time.Time{})
	}
	exited := func(p *v1.Pod, name string, attempt uint32, code int32) runtime.Container {
		return rc(p, name, attempt, runtime.StateExited, code, t0, recent)
	}
	// i1 (regular), s (sidecar), i2 (regular), then app container a.
	seq := func(policy v1.RestartPolicy) *v1.Pod {
		return sidecarPod(policy, []string{"i1", "s", "i2"}, []string{"s"}, "a")
	}
	type tc struct {
		name     string
		pod      *v1.Pod
		cs       func(*v1.Pod) []runtime.Container
		bo       map[string]crashLoop
		unstaged []string // running sidecars whose startup probe has not succeeded
		starts   []string
		kills    []string
		waiting  map[string]string // container → waiting reason
	}
	for _, c := range []tc{
		{name: "first init container first", pod: seq(v1.RestartPolicyAlways), starts: []string{"i1#0"}},
		{name: "sidecar after the regular init container before it succeeded", pod: seq(v1.RestartPolicyAlways),
			cs: func(p *v1.Pod) []runtime.Container {
				return []runtime.Container{exited(p, "i1", 0, 0)}
			},
			starts: []string{"s#0"}},
		{name: "next init container once the sidecar started", pod: seq(v1.RestartPolicyAlways),
			cs: func(p *v1.Pod) []runtime.Container {
				return []runtime.Container{exited(p, "i1", 0, 0), running(p, "s", 0)}
			},
			starts: []string{"i2#0"}},
		{name: "sidecar whose startup probe has not succeeded: wait", pod: seq(v1.RestartPolicyAlways),
			cs: func(p *v1.Pod) []runtime.Container {
				return []runtime.Container{exited(p, "i1", 0, 0), running(p, "s", 0)}
			},
			unstaged: []string{"s"}},
		{name: "app containers once every init container is done, the sidecar running", pod: seq(v1.RestartPolicyAlways),
			cs: func(p *v1.Pod) []runtime.Container {
				return []runtime.Container{exited(p, "i1", 0, 0), running(p, "s", 0), exited(p, "i2", 0, 0)}
			},
			starts: []string{"a#0"}},
		{name: "a sidecar last in the sequence initializes the pod once started", pod: sidecarPod(v1.RestartPolicyAlways, []string{"i1", "s"}, []string{"s"}, "a"),
			cs: func(p *v1.Pod) []runtime.Container {
				return []runtime.Container{exited(p, "i1", 0, 0), running(p, "s", 0)}
			},
			starts: []string{"a#0"}},
		{name: "sidecar that exited during init restarts, the regular one runs on", pod: seq(v1.RestartPolicyNever),
			cs: func(p *v1.Pod) []runtime.Container {
				return []runtime.Container{exited(p, "i1", 0, 0), exited(p, "s", 0, 1), running(p, "i2", 0)}
			},
			starts: []string{"s#1"}},
		{name: "exited sidecar restarts next to the app container, whatever restartPolicy", pod: seq(v1.RestartPolicyNever),
			cs: func(p *v1.Pod) []runtime.Container {
				return []runtime.Container{exited(p, "i1", 0, 0), exited(p, "s", 0, 0), exited(p, "i2", 0, 0), running(p, "a", 0)}
			},
			starts: []string{"s#1"}},
		{name: "exited sidecar within its back-off: CrashLoopBackOff", pod: seq(v1.RestartPolicyOnFailure),
			cs: func(p *v1.Pod) []runtime.Container {
				return []runtime.Container{exited(p, "i1", 0, 0), rc(p, "s", 3, runtime.StateExited, 1, recent, recent), exited(p, "i2", 0, 0), running(p, "a", 0)}
			},
			bo:      map[string]crashLoop{"s": {started: true, next: crashLoopBackoff}},
			waiting: map[string]string{"s": status.ReasonCrashLoopBackOff}},
		{name: "removed sidecar of an initialized pod starts again, regular init containers do not", pod: seq(v1.RestartPolicyAlways),
			cs: func(p *v1.Pod) []runtime.Container {
				return []runtime.Container{running(p, "a", 0)}
			},
			starts: []string{"s#0"}},
		{name: "sidecar with another spec is replaced", pod: seq(v1.RestartPolicyAlways),
			cs: func(p *v1.Pod) []runtime.Container {
				s := running(p, "s", 0)
				s.Labels[LabelContainerHash] = "old"
				return []runtime.Container{exited(p, "i1", 0, 0), s, exited(p, "i2", 0, 0), running(p, "a", 0)}
			},
			kills: []string{"s-0"}, starts: []string{"s#1"}},
		{name: "Job-like pod: regular container done, the sidecar is stopped", pod: seq(v1.RestartPolicyNever),
			cs: func(p *v1.Pod) []runtime.Container {
				return []runtime.Container{exited(p, "i1", 0, 0), running(p, "s", 0), exited(p, "i2", 0, 0), exited(p, "a", 0, 0)}
			},
			kills: []string{"s-0"}},
		{name: "Job-like pod done: an exited sidecar is not restarted", pod: seq(v1.RestartPolicyOnFailure),
			cs: func(p *v1.Pod) []runtime.Container {
				return []runtime.Container{exited(p, "i1", 0, 0), exited(p, "s", 0, 137), exited(p, "i2", 0, 0), exited(p, "a", 0, 0)}
			}},
		{name: "OnFailure pod whose app container failed: it restarts, the sidecar runs on", pod: seq(v1.RestartPolicyOnFailure),
			cs: func(p *v1.Pod) []runtime.Container {
				return []runtime.Container{exited(p, "i1", 0, 0), running(p, "s", 0), exited(p, "i2", 0, 0), exited(p, "a", 0, 1)}
			},
			starts: []string{"a#1"}},
		{name: "Always pod: a finished app container restarts, the sidecar runs on", pod: seq(v1.RestartPolicyAlways),
			cs: func(p *v1.Pod) []runtime.Container {
				return []runtime.Container{exited(p, "i1", 0, 0), running(p, "s", 0), exited(p, "i2", 0, 0), exited(p, "a", 0, 0)}
			},
			starts: []string{"a#1"}},
		{name: "done pod stops its sidecars last declared first", pod: sidecarPod(v1.RestartPolicyNever, []string{"s1", "s2"}, []string{"s1", "s2"}, "a"),
			cs: func(p *v1.Pod) []runtime.Container {
				return []runtime.Container{running(p, "s1", 0), running(p, "s2", 0), exited(p, "a", 0, 1)}
			},
			kills: []string{"s2-0", "s1-0"}},
		{name: "failed initialization with Never stops the sidecars", pod: seq(v1.RestartPolicyNever),
			cs: func(p *v1.Pod) []runtime.Container {
				return []runtime.Container{exited(p, "i1", 0, 0), running(p, "s", 0), exited(p, "i2", 0, 1)}
			},
			kills: []string{"s-0"}},
		{name: "two sidecars start in order", pod: sidecarPod(v1.RestartPolicyAlways, []string{"s1", "s2"}, []string{"s1", "s2"}, "a"),
			cs: func(p *v1.Pod) []runtime.Container {
				return []runtime.Container{running(p, "s1", 0)}
			},
			starts: []string{"s2#0"}},
		{name: "several sidecars to restart: in declaration order", pod: sidecarPod(v1.RestartPolicyAlways, []string{"s1", "s2"}, []string{"s1", "s2"}, "a"),
			cs: func(p *v1.Pod) []runtime.Container {
				return []runtime.Container{exited(p, "s1", 0, 1), exited(p, "s2", 0, 1), running(p, "a", 0)}
			},
			starts: []string{"s1#1", "s2#1"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			pod := c.pod
			rs := pleg.PodStatus{Pod: runtime.PodRef{UID: pod.UID}}
			if c.cs != nil {
				rs.Containers = c.cs(pod)
			}
			bo := c.bo
			if bo == nil {
				bo = map[string]crashLoop{}
			}
			started := func(name, _ string) bool { return !slices.Contains(c.unstaged, name) }
			p := computePlanProbed(pod, rs, bo, started, now)
			starts, kills, _ := summary(p)
			if !slices.Equal(starts, c.starts) || !slices.Equal(kills, c.kills) {
				t.Errorf("starts %v kills %v; want %v %v", starts, kills, c.starts, c.kills)
			}
			got := map[string]string{}
			for name, w := range p.waiting {
				got[name] = w.Reason
			}
			if len(got) != len(c.waiting) {
				t.Errorf("waiting %v, want %v", got, c.waiting)
			}
			for name, r := range c.waiting {
				if got[name] != r {
					t.Errorf("waiting %v, want %v", got, c.waiting)
				}
			}
		})
	}
}

func sidecar(name string) v1.Container {
	c := ctr(name)
	c.RestartPolicy = utilptr.To(v1.ContainerRestartPolicyAlways)
	return c
}

// A Job-like pod: its sidecar starts before the app container and runs
// next to it; when the app container exits 0 the sidecar is stopped and the
// pod is Succeeded, the sidecar's end not counting.
func TestWorkerSidecarJobCompletes(t *testing.T) {
	e := newWorkerEnv(t)
	pod := testPod("job", v1.RestartPolicyNever, ctr("main"))
	pod.Spec.InitContainers = []v1.Container{sidecar("side")}
	w := e.worker(pod, kubetypes.SourceAPI)
	e.settle(w)
	run := e.rt.running()
	if len(run) != 2 {
		t.Fatalf("running %v, want the sidecar and the app container", run)
	}
	st := e.lastStatus(pod.UID)
	if st.Phase != v1.PodRunning || len(st.InitContainerStatuses) != 1 {
		t.Fatalf("status %+v", st)
	}
	if is := st.InitContainerStatuses[0]; is.State.Running == nil || !is.Ready || is.Started == nil || !*is.Started {
		t.Errorf("sidecar status %+v, want running, started, ready", is)
	}
	if c := findCond(st, v1.PodInitialized); c == nil || c.Status != v1.ConditionTrue {
		t.Errorf("Initialized %+v", c)
	}
	// The sidecar started first.
	sideID, mainID := run["side"].ID, run["main"].ID
	if !run["side"].CreatedAt.Before(run["main"].CreatedAt) && sideID > mainID {
		t.Errorf("sidecar %s created after the app container %s", sideID, mainID)
	}
	e.rt.exit(mainID, 0)
	e.settle(w)
	if len(e.rt.running()) != 0 || len(e.rt.stops) == 0 || e.rt.stops[0].id != sideID || e.rt.stops[0].grace != 7*time.Second {
		t.Fatalf("running %v, stops %+v; want the sidecar stopped", e.rt.running(), e.rt.stops)
	}
	e.settle(w)
	st = e.lastStatus(pod.UID)
	if st.Phase != v1.PodSucceeded {
		t.Errorf("phase %s, want Succeeded", st.Phase)
	}
	if n := len(e.rt.specs); n != 2 {
		t.Errorf("%d containers created, want 2 (no sidecar restart)", n)
	}
}

// A sidecar that exits is restarted even in a restartPolicy Never pod.
func TestWorkerSidecarRestarts(t *testing.T) {
	e := newWorkerEnv(t)
	pod := testPod("svc", v1.RestartPolicyNever, ctr("main"))
	pod.Spec.InitContainers = []v1.Container{sidecar("side")}
	w := e.worker(pod, kubetypes.SourceAPI)
	e.settle(w)
	e.rt.exit(e.rt.running()["side"].ID, 1)
	e.settle(w)
	if len(e.rt.running()) != 2 {
		t.Fatalf("running %v, want the sidecar restarted", e.rt.running())
	}
	st := e.lastStatus(pod.UID)
	if st.Phase != v1.PodRunning || st.InitContainerStatuses[0].RestartCount != 1 {
		t.Errorf("phase %s, sidecar %+v", st.Phase, st.InitContainerStatuses[0])
	}
}

// A deleted pod stops its regular containers first, then its sidecars,
// the last declared first.
func TestWorkerSidecarShutdownOrder(t *testing.T) {
	e := newWorkerEnv(t)
	pod := testPod("web", v1.RestartPolicyAlways, ctr("a"), ctr("b"))
	pod.Spec.InitContainers = []v1.Container{sidecar("s1"), ctr("init"), sidecar("s2")}
	pod.Spec.InitContainers[1].Command = []string{"true"}
	w := e.worker(pod, kubetypes.SourceAPI)
	e.settle(w)
	// The regular init container ran and exited (the fake does not run
	// it): let it succeed so that the pod initializes.
	for i := 0; i < 5 && len(e.rt.running()) < 4; i++ {
		if c, ok := e.rt.running()["init"]; ok {
			e.rt.exit(c.ID, 0)
		}
		e.settle(w)
	}
	names := map[string]string{}
	for name, c := range e.rt.running() {
		names[c.ID] = name
	}
	if len(names) != 4 {
		t.Fatalf("running %v, want s1, s2, a, b", names)
	}
	del := pod.DeepCopy()
	del.DeletionTimestamp = &metav1.Time{Time: e.clk.Now()}
	w.update(del)
	e.settle(w)
	var order []string
	for _, s := range e.rt.stops {
		if s.grace == 0 {
			continue // an exited container's task released
		}
		order = append(order, names[s.id])
		if s.grace != 7*time.Second {
			t.Errorf("%s stopped with grace %v, want 7s", names[s.id], s.grace)
		}
	}
	if len(order) != 4 || !slices.Contains(order[:2], "a") || !slices.Contains(order[:2], "b") || order[2] != "s2" || order[3] != "s1" {
		t.Errorf("stop order %v, want a and b, then s2, then s1", order)
	}
}

func findCond(st v1.PodStatus, t v1.PodConditionType) *v1.PodCondition {
	for i := range st.Conditions {
		if st.Conditions[i].Type == t {
			return &st.Conditions[i]
		}
	}
	return nil
}
