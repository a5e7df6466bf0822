package pods

import (
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/nodeagent/nodeagent/kubetypes"
)

// Issue 32: a container's exit reaches the pod's status before the
// exited task is released. Releasing it (containerd's task delete) waits
// for the shim and took 0.7–1.6 s on a loaded host, ahead of the
// Succeeded write; the status does not depend on it.
func TestWorkerReportsExitBeforeReleasingTheTask(t *testing.T) {
	e := newWorkerEnv(t)
	pod := testPod("job", v1.RestartPolicyNever, ctr("c"))
	w := e.worker(pod, kubetypes.SourceAPI)
	e.settle(w)
	id := e.rt.running()["c"].ID
	e.clk.Step(time.Second)
	e.rt.exit(id, 0)

	var atRelease []v1.PodPhase
	e.rt.onStop = func(stopped string) {
		if stopped == id {
			atRelease = append(atRelease, e.lastStatus(pod.UID).Phase)
		}
	}
	e.sync(w)
	if len(atRelease) == 0 {
		t.Fatal("the exited container's task was not released")
	}
	if atRelease[0] != v1.PodSucceeded {
		t.Errorf("the task was released while the status said %q: the exit waited behind it", atRelease[0])
	}
	if got := e.lastStatus(pod.UID).Phase; got != v1.PodSucceeded {
		t.Errorf("phase %q, want Succeeded", got)
	}
}

// Issue 32: a pod's network is attached once by its worker; later syncs
// (every container event) do not ask the network again (the CNI cache
// read and the look into the namespace took 5–30 ms per sync on a loaded
// host, ahead of the status). Once the sandbox is released, a new
// attachment is a new question.
func TestWorkerAttachesTheNetworkOnce(t *testing.T) {
	e := newWorkerEnv(t)
	pn := &fakeNetwork{}
	e.deps.net = pn
	pod := testPod("web", v1.RestartPolicyAlways, ctr("c"))
	w := e.worker(pod, kubetypes.SourceAPI)
	e.settle(w)
	e.clk.Step(time.Second)
	e.rt.exit(e.rt.running()["c"].ID, 1)
	e.settle(w) // restarts it after the back-off
	e.clk.Step(time.Minute)
	e.settle(w)
	if pn.setups != 1 {
		t.Errorf("%d network setups for one sandbox, want 1", pn.setups)
	}
	if st := e.lastStatus(pod.UID); st.PodIP != "10.244.1.7" {
		t.Errorf("podIP %q after later syncs", st.PodIP)
	}
	w.remove()
	if _, done := e.settle(w); !done || len(pn.torn) != 1 {
		t.Fatalf("done %v, torn down %v", done, pn.torn)
	}
	if w.ns.attached {
		t.Error("still attached after the sandbox was released")
	}
}
