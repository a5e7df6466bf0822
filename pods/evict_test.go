package pods

import (
	"context"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	utilptr "k8s.io/utils/ptr"

	"github.com/nodeagent/nodeagent/kubetypes"
)

// An eviction stops the pod's containers with the eviction's grace (not
// the pod's), makes it Failed with the reason, message and condition, and
// nothing restarts afterwards; ActivePods no longer lists it.
func TestWorkerEviction(t *testing.T) {
	e := newWorkerEnv(t)
	pod := testPod("evict", v1.RestartPolicyAlways, ctr("c"))
	pod.Spec.TerminationGracePeriodSeconds = utilptr.To[int64](30)
	w := e.worker(pod, kubetypes.SourceAPI)
	e.settle(w)
	id := e.rt.running()["c"].ID
	cond := v1.PodCondition{Type: v1.DisruptionTarget, Status: v1.ConditionTrue, Reason: v1.PodReasonTerminationByKubelet, Message: "low"}
	req := w.terminate(newTermination(termEviction, time.Second, termStatus{reason: "Evicted", message: "low", disruption: true}))
	e.settle(w)
	select {
	case <-req.done:
	default:
		t.Fatal("eviction not reported done")
	}
	if len(e.rt.running()) != 0 || len(e.rt.stops) != 1 || e.rt.stops[0].id != id || e.rt.stops[0].grace != time.Second {
		t.Fatalf("running %v stops %+v, want %s stopped with 1s", e.rt.running(), e.rt.stops, id)
	}
	st := e.lastStatus(pod.UID)
	if st.Phase != v1.PodFailed || st.Reason != "Evicted" || st.Message != "low" {
		t.Errorf("phase %s reason %q message %q", st.Phase, st.Reason, st.Message)
	}
	found := false
	for _, c := range st.Conditions {
		found = found || (c.Type == v1.DisruptionTarget && c.Reason == cond.Reason && c.Message == "low")
	}
	if !found {
		t.Errorf("conditions %+v lack the DisruptionTarget", st.Conditions)
	}
	e.clk.Step(time.Minute)
	e.settle(w)
	if len(e.rt.running()) != 0 {
		t.Errorf("restarted after the eviction: %v", e.rt.running())
	}
	m := e.manager(Options{})
	adopt(m, w)
	if got := m.ActivePods(); len(got) != 0 {
		t.Errorf("ActivePods lists the evicted pod: %v", got)
	}
}

// Under disk pressure the exited containers of terminal pods go; their
// statuses stay as last reported; running pods keep theirs.
func TestRemoveDeadContainers(t *testing.T) {
	e := newWorkerEnv(t)
	done := testPod("done", v1.RestartPolicyNever, ctr("c"))
	w := e.worker(done, kubetypes.SourceAPI)
	e.settle(w)
	id := e.rt.running()["c"].ID
	e.rt.exit(id, 0)
	e.settle(w)
	if st := e.lastStatus(done.UID); st.Phase != v1.PodSucceeded {
		t.Fatalf("phase %s, want Succeeded", st.Phase)
	}
	m := e.manager(Options{})
	adopt(m, w)
	n, err := m.RemoveDeadContainers(context.Background())
	if err != nil || n != 1 {
		t.Fatalf("RemoveDeadContainers = %d, %v; want 1 removed", n, err)
	}
	e.settle(w)
	st := e.lastStatus(done.UID)
	if st.Phase != v1.PodSucceeded || st.ContainerStatuses[0].State.Terminated == nil || st.ContainerStatuses[0].State.Terminated.ExitCode != 0 {
		t.Errorf("status after the removal: %+v", st)
	}
}

// A pod being evicted that is also asked to stop for a node shutdown ends
// both requests once its containers stopped: the eviction path runs first
// in every sync, and StopPods must not wait until its context ends.
func TestEvictedPodSettlesAStopRequest(t *testing.T) {
	e := newWorkerEnv(t)
	pod := testPod("both", v1.RestartPolicyAlways, ctr("c"))
	w := e.worker(pod, kubetypes.SourceAPI)
	e.settle(w)
	// The stop first: the eviction replaces it, and ends it with itself.
	stop := w.terminate(newTermination(termStop, 5*time.Second, termStatus{reason: "Terminated", message: "shutdown", disruption: true}))
	ev := w.terminate(newTermination(termEviction, time.Second, termStatus{reason: "Evicted", message: "low", disruption: true}))
	if ev == stop {
		t.Fatal("the eviction did not replace the stop request")
	}
	e.settle(w)
	for name, done := range map[string]chan struct{}{"eviction": ev.done, "stop": stop.done} {
		select {
		case <-done:
		default:
			t.Errorf("the %s request was not ended after the pod stopped", name)
		}
	}
	if len(e.rt.running()) != 0 {
		t.Errorf("still running: %v", e.rt.running())
	}
}

// A local storage eviction (kubelet's localStorageEviction) makes the pod
// Failed/Evicted with the message but, as kubelet, no DisruptionTarget.
func TestWorkerEvictionWithoutCondition(t *testing.T) {
	e := newWorkerEnv(t)
	pod := testPod("evict-local", v1.RestartPolicyAlways, ctr("c"))
	w := e.worker(pod, kubetypes.SourceAPI)
	e.settle(w)
	msg := `Usage of EmptyDir volume "data" exceeds the limit "10Mi". `
	w.terminate(newTermination(termEviction, time.Second, termStatus{reason: "Evicted", message: msg}))
	e.settle(w)
	st := e.lastStatus(pod.UID)
	if st.Phase != v1.PodFailed || st.Reason != "Evicted" || st.Message != msg {
		t.Errorf("phase %s reason %q message %q", st.Phase, st.Reason, st.Message)
	}
	for _, c := range st.Conditions {
		if c.Type == v1.DisruptionTarget {
			t.Errorf("DisruptionTarget %+v on a local storage eviction", c)
		}
	}
}
