package pods

import (
	"context"
	"errors"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/nodeagent/nodeagent/runtime"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	testingclock "k8s.io/utils/clock/testing"
	utilptr "k8s.io/utils/ptr"

	"github.com/nodeagent/nodeagent/kubetypes"
	"github.com/nodeagent/nodeagent/pods/prober"
	"github.com/nodeagent/nodeagent/pods/status"
)

// fakeProber answers with fixed results per container name.
type fakeProber struct {
	mu      sync.Mutex
	pods    map[types.UID][]prober.Container
	probed  map[string]prober.Probed // by container name
	unwell  map[string]prober.Kind   // by container name
	grace   *int64
	removed []types.UID
}

func (p *fakeProber) SetPod(pod *v1.Pod, _ string, cs []prober.Container) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.pods == nil {
		p.pods = map[types.UID][]prober.Container{}
	}
	p.pods[pod.UID] = cs
}

func (p *fakeProber) RemovePod(uid types.UID) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.removed = append(p.removed, uid)
}

func (p *fakeProber) Status(_ types.UID, name, _ string) (prober.Probed, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	s, ok := p.probed[name]
	return s, ok
}

func (p *fakeProber) Unhealthy(uid types.UID) []prober.Kill {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []prober.Kill
	for _, c := range p.pods[uid] {
		if k, ok := p.unwell[c.Name]; ok && c.Running {
			out = append(out, prober.Kill{Name: c.Name, ID: c.ID, Kind: k, Grace: p.grace})
		}
	}
	return out
}

// fakeHooks records hooks; a hook "takes" took on the fake clock.
type fakeHooks struct {
	clk   *testingclock.FakeClock
	took  time.Duration
	fail  bool
	ran   []string
	block chan struct{} // preStop waits for it to close
}

func (h *fakeHooks) Run(_ context.Context, _ *v1.Pod, c *v1.Container, id, _ string, hook *v1.LifecycleHandler) (string, error) {
	kind := "preStop"
	if c.Lifecycle.PostStart == hook {
		kind = "postStart"
	}
	h.ran = append(h.ran, kind+":"+c.Name)
	if kind == "preStop" && h.block != nil {
		<-h.block
	}
	h.clk.Step(h.took)
	if h.fail {
		return "hook failed", errors.New("exit 1")
	}
	return "", nil
}

func (e *workerEnv) withProber() *fakeProber {
	p := &fakeProber{probed: map[string]prober.Probed{}, unwell: map[string]prober.Kind{}}
	e.deps.probes = p
	return p
}

func (e *workerEnv) withHooks(took time.Duration) *fakeHooks {
	h := &fakeHooks{clk: e.clk, took: took}
	e.deps.hooks = h
	return h
}

// A container whose liveness probe failed is stopped with the probe's
// grace period (Killing, kubelet's message) and restarted.
func TestWorkerRestartsUnhealthyContainer(t *testing.T) {
	e := newWorkerEnv(t)
	pr := e.withProber()
	pod := testPod("sick", v1.RestartPolicyAlways, ctr("c"))
	w := e.worker(pod, kubetypes.SourceAPI)
	e.settle(w)
	first := e.rt.running()["c"].ID

	pr.mu.Lock()
	pr.unwell["c"], pr.grace = prober.Liveness, utilptr.To[int64](3)
	pr.mu.Unlock()
	e.sync(w)
	if len(e.rt.stops) != 1 || e.rt.stops[0].id != first || e.rt.stops[0].grace != 3*time.Second {
		t.Fatalf("stops %+v, want %s with the probe's 3s", e.rt.stops, first)
	}
	if !e.rec.has("Killing") {
		t.Error("no Killing event")
	}
	pr.mu.Lock()
	delete(pr.unwell, "c")
	pr.mu.Unlock()
	e.settle(w)
	if c := e.rt.running()["c"]; c.Attempt != 1 {
		t.Fatalf("running attempt %d, want the restart (1)", c.Attempt)
	}
	if rc := e.lastStatus(pod.UID).ContainerStatuses[0].RestartCount; rc != 1 {
		t.Errorf("restartCount %d", rc)
	}
	if got := (prober.Kill{Name: "c", Kind: prober.Liveness}).Message(true); got != "Container c failed liveness probe, will be restarted" {
		t.Errorf("Killing message %q", got)
	}
}

// Readiness from the probes drives containerStatuses[].ready and the
// pod's ContainersReady and Ready conditions.
func TestWorkerReportsProbedReadiness(t *testing.T) {
	e := newWorkerEnv(t)
	pr := e.withProber()
	pod := testPod("probed", v1.RestartPolicyAlways, ctr("a"), ctr("b"))
	pr.probed["a"] = prober.Probed{Started: true, Ready: false}
	w := e.worker(pod, kubetypes.SourceAPI)
	e.settle(w)
	st := e.lastStatus(pod.UID)
	if st.ContainerStatuses[0].Ready || !st.ContainerStatuses[1].Ready {
		t.Errorf("ready a=%v b=%v, want false, true", st.ContainerStatuses[0].Ready, st.ContainerStatuses[1].Ready)
	}
	cond := func(st v1.PodStatus, ty v1.PodConditionType) v1.PodCondition {
		for _, c := range st.Conditions {
			if c.Type == ty {
				return c
			}
		}
		return v1.PodCondition{}
	}
	if c := cond(st, v1.PodReady); c.Status != v1.ConditionFalse || c.Message != "containers with unready status: [a]" {
		t.Errorf("Ready %+v", c)
	}
	pr.mu.Lock()
	pr.probed["a"] = prober.Probed{Started: true, Ready: true}
	pr.mu.Unlock()
	e.sync(w)
	if c := cond(e.lastStatus(pod.UID), v1.ContainersReady); c.Status != v1.ConditionTrue {
		t.Errorf("ContainersReady %+v after the probe passed", c)
	}
}

// preStop runs before the stop, inside the grace period; the container
// gets what is left, at least 2s.
func TestWorkerPreStopWithinGrace(t *testing.T) {
	for _, tc := range []struct {
		took, want time.Duration
	}{
		{3 * time.Second, 4 * time.Second}, // grace 7s
		{6 * time.Second, 2 * time.Second}, // 1s left: the minimum
	} {
		e := newWorkerEnv(t)
		h := e.withHooks(0)
		c := ctr("c")
		c.Lifecycle = &v1.Lifecycle{PreStop: &v1.LifecycleHandler{Exec: &v1.ExecAction{Command: []string{"true"}}}}
		pod := testPod("hooked", v1.RestartPolicyAlways, c)
		w := e.worker(pod, kubetypes.SourceAPI)
		e.settle(w)
		h.took = tc.took
		w.remove()
		e.settle(w)
		if len(h.ran) != 1 || h.ran[0] != "preStop:c" {
			t.Fatalf("hooks %v", h.ran)
		}
		if len(e.rt.stops) == 0 || e.rt.stops[0].grace != tc.want {
			t.Errorf("hook took %v: stops %+v, want grace %v", tc.took, e.rt.stops, tc.want)
		}
	}
}

// A failing postStart hook kills the container with FailedPostStartHook.
func TestWorkerPostStartFailure(t *testing.T) {
	e := newWorkerEnv(t)
	h := e.withHooks(0)
	h.fail = true
	c := ctr("c")
	c.Lifecycle = &v1.Lifecycle{PostStart: &v1.LifecycleHandler{Exec: &v1.ExecAction{Command: []string{"false"}}}}
	pod := testPod("poststart", v1.RestartPolicyNever, c)
	w := e.worker(pod, kubetypes.SourceAPI)
	e.sync(w)
	if len(h.ran) != 1 || h.ran[0] != "postStart:c" || len(e.rt.stops) != 1 {
		t.Fatalf("hooks %v stops %+v", h.ran, e.rt.stops)
	}
	if !e.rec.has("FailedPostStartHook") || !e.rec.has("Killing") {
		t.Errorf("events %v", e.rec.reasons)
	}
}

// activeDeadlineSeconds: the worker wakes at the deadline, stops the
// containers and reports Failed / DeadlineExceeded.
func TestWorkerActiveDeadline(t *testing.T) {
	e := newWorkerEnv(t)
	pod := testPod("deadline", v1.RestartPolicyAlways, ctr("c"))
	pod.Spec.ActiveDeadlineSeconds = utilptr.To[int64](30)
	w := e.worker(pod, kubetypes.SourceAPI)
	next, _ := e.settle(w)
	if next > 30*time.Second || next < 29*time.Second {
		t.Fatalf("next sync in %v, want at the 30s deadline", next)
	}
	e.clk.Step(next)
	e.settle(w)
	if len(e.rt.running()) != 0 || len(e.rt.stops) != 1 {
		t.Fatalf("running %v stops %v", e.rt.running(), e.rt.stops)
	}
	st := e.lastStatus(pod.UID)
	if st.Phase != v1.PodFailed || st.Reason != ReasonDeadlineExceeded || st.Message != messageDeadlineExceeded {
		t.Errorf("phase %s reason %q message %q", st.Phase, st.Reason, st.Message)
	}
	if !e.rec.has(ReasonDeadlineExceeded) {
		t.Error("no DeadlineExceeded event")
	}
	// Nothing restarts afterwards.
	e.clk.Step(time.Minute)
	e.settle(w)
	if len(e.rt.running()) != 0 {
		t.Errorf("restarted after the deadline: %v", e.rt.running())
	}
}

// The termination message file is mounted per attempt, found again by its
// label and read into state.terminated.message; FallbackToLogsOnError
// uses the end of the log when the file is empty and the container failed.
func TestWorkerTerminationMessages(t *testing.T) {
	e := newWorkerEnv(t)
	a, b := ctr("a"), ctr("b")
	a.TerminationMessagePath = "/dev/termination-log"
	b.TerminationMessagePath = "/dev/termination-log"
	b.TerminationMessagePolicy = v1.TerminationMessageFallbackToLogsOnError
	pod := testPod("msg", v1.RestartPolicyNever, a, b)
	w := e.worker(pod, kubetypes.SourceAPI)
	e.settle(w)
	run := e.rt.running()
	spec := e.rt.specs[run["a"].ID]
	host := spec.Labels[LabelTerminationMessagePath]
	var msgMounts []runtime.Mount
	for _, m := range spec.Mounts {
		if m.ContainerPath == "/dev/termination-log" {
			msgMounts = append(msgMounts, m)
		}
	}
	if len(msgMounts) != 1 || msgMounts[0].HostPath != host {
		t.Fatalf("mounts %+v label %q", spec.Mounts, host)
	}
	if fi, err := os.Stat(host); err != nil || fi.Mode().Perm() != 0o666 {
		t.Fatalf("message file: %v %v", fi, err)
	}
	if err := os.WriteFile(host, []byte("bye"), 0o666); err != nil {
		t.Fatal(err)
	}
	logB := e.rt.specs[run["b"].ID].LogPath
	_ = os.MkdirAll(logB[:len(logB)-len("/0.log")], 0o755)
	if err := os.WriteFile(logB, []byte("2026-11-22T10:00:00Z stdout F first\n2026-11-22T10:00:00Z stderr F last words\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	e.rt.exit(run["a"].ID, 0)
	e.rt.exit(run["b"].ID, 1)
	e.settle(w)
	st := e.lastStatus(pod.UID)
	got := map[string]string{}
	for _, cs := range st.ContainerStatuses {
		if cs.State.Terminated != nil {
			got[cs.Name] = cs.State.Terminated.Message
		}
	}
	if got["a"] != "bye" || got["b"] != "first\nlast words\n" {
		t.Errorf("messages %q", got)
	}
}

var _ Prober = (*prober.Manager)(nil)
var _ HookRunner = (*prober.HookRunner)(nil)
var _ = status.Probed{}

// Exec probe commands expand $(VAR) from the container's static env.
func TestWithProbeCommands(t *testing.T) {
	c := ctr("c")
	c.Env = []v1.EnvVar{{Name: "F", Value: "/tmp/ok"}, {Name: "D", ValueFrom: &v1.EnvVarSource{}}}
	c.LivenessProbe = &v1.Probe{ProbeHandler: v1.ProbeHandler{Exec: &v1.ExecAction{Command: []string{"cat", "$(F)", "$(D)", "$$(F)"}}}}
	pod := testPod("p", v1.RestartPolicyAlways, c)
	got := withProbeCommands(pod).Spec.Containers[0].LivenessProbe.Exec.Command
	if want := []string{"cat", "/tmp/ok", "$(D)", "$(F)"}; !equalStrings(got, want) {
		t.Errorf("command %q, want %q", got, want)
	}
	if pod.Spec.Containers[0].LivenessProbe.Exec.Command[1] != "$(F)" {
		t.Error("the pod itself was changed")
	}
	plain := testPod("q", v1.RestartPolicyAlways, ctr("c"))
	if withProbeCommands(plain) != plain {
		t.Error("a pod without references was copied")
	}
}

func equalStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// While a deleted pod's containers stop (here: a preStop hook that takes
// its time), a readiness change is still reported: the pod goes unready
// before its containers end.
func TestWorkerReportsReadinessWhileStopping(t *testing.T) {
	e := newWorkerEnv(t)
	pr := e.withProber()
	h := e.withHooks(0)
	h.block = make(chan struct{})
	c := ctr("c")
	c.Lifecycle = &v1.Lifecycle{PreStop: &v1.LifecycleHandler{Exec: &v1.ExecAction{Command: []string{"true"}}}}
	pod := testPod("stopping", v1.RestartPolicyAlways, c)
	pr.probed["c"] = prober.Probed{Started: true, Ready: true}
	w := e.worker(pod, kubetypes.SourceAPI)
	e.settle(w)
	deleted := pod.DeepCopy()
	now := metav1.NewTime(e.clk.Now())
	deleted.DeletionTimestamp = &now
	w.update(deleted)
	<-w.wake
	synced := make(chan struct{})
	go func() {
		defer close(synced)
		e.sync(w)
	}()
	pr.mu.Lock()
	pr.probed["c"] = prober.Probed{Started: true, Ready: false}
	pr.mu.Unlock()
	w.poke()
	deadline := time.Now().Add(5 * time.Second)
	for {
		st := e.lastStatus(pod.UID)
		if len(st.ContainerStatuses) == 1 && !st.ContainerStatuses[0].Ready && st.ContainerStatuses[0].State.Running != nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no unready status while stopping: %+v", st.ContainerStatuses)
		}
		time.Sleep(10 * time.Millisecond)
	}
	close(h.block)
	<-synced
}
