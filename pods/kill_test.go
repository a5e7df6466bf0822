package pods

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilptr "k8s.io/utils/ptr"

	"github.com/nodeagent/nodeagent/kubetypes"
	"github.com/nodeagent/nodeagent/pods/status"
	"github.com/nodeagent/nodeagent/runtime"
)

// Found by e2e/fault's TestAgentSIGKILLedDuringPodChurn: a start slower
// than the PLEG expectation's TTL left the worker with a status in which
// its own, now running, container was still "created"; the plan took it
// for one the agent never started and replaced it (attempt 1, a restart).
func TestWorkerWaitsForTheStartItMadeToBeSeen(t *testing.T) {
	e := newWorkerEnv(t)
	pod := testPod("web", v1.RestartPolicyAlways, ctr("a"))
	w := e.worker(pod, kubetypes.SourceAPI)
	e.sync(w)
	run := e.rt.running()
	if len(run) != 1 {
		t.Fatalf("running %v", run)
	}
	id := run["a"].ID
	// The cache lags: it still has the container as created.
	e.rt.mu.Lock()
	e.rt.cs[id].State = runtime.StateCreated
	e.rt.mu.Unlock()
	if next, done := e.sync(w); done || next != 0 {
		t.Errorf("sync with a stale status: next %v done %v, want to sync again at once", next, done)
	}
	if len(e.rt.removed) != 0 || len(e.rt.specs) != 1 {
		t.Fatalf("with a stale status the worker removed %v and created %d containers, want none and 1", e.rt.removed, len(e.rt.specs))
	}
	// The PLEG sees the start.
	e.rt.mu.Lock()
	e.rt.cs[id].State = runtime.StateRunning
	e.rt.mu.Unlock()
	e.settle(w)
	if len(e.rt.removed) != 0 || len(e.rt.specs) != 1 {
		t.Errorf("removed %v, %d containers created", e.rt.removed, len(e.rt.specs))
	}
	if st := e.lastStatus(pod.UID); len(st.ContainerStatuses) != 1 || st.ContainerStatuses[0].RestartCount != 0 || st.ContainerStatuses[0].State.Running == nil {
		t.Errorf("status %+v", st.ContainerStatuses)
	}
}

// A finished pod's sandbox (network namespace, volumes, pod cgroup) is
// released at once, as kubelet's StopPodSandbox and SyncTerminatedPod do;
// its containers stay for its status and logs, and later syncs make
// nothing again. Before, an evicted or completed pod kept its network
// namespace (and IP) until its API object was deleted.
func TestWorkerReleasesAFinishedPodsSandbox(t *testing.T) {
	e := newWorkerEnv(t)
	pod := testPod("job", v1.RestartPolicyNever, ctr("a"))
	w := e.worker(pod, kubetypes.SourceAPI)
	e.settle(w)
	run := e.rt.running()
	if len(run) != 1 {
		t.Fatalf("running %v", run)
	}
	e.rt.exit(run["a"].ID, 0)
	e.settle(w)
	if st := e.lastStatus(pod.UID); st.Phase != v1.PodSucceeded {
		t.Fatalf("phase %s, want Succeeded", st.Phase)
	}
	if len(e.netns.removed) != 1 || len(e.vols.torn) != 1 || len(e.rt.cgroups) != 1 {
		t.Errorf("released: netns %v, volumes %v, cgroups %v; want each once", e.netns.removed, e.vols.torn, e.rt.cgroups)
	}
	if len(e.rt.removed) != 0 {
		t.Errorf("containers removed %v; they stay until the pod is deleted", e.rt.removed)
	}
	created, setups := len(e.netns.created), e.vols.setups
	e.clk.Step(time.Minute)
	e.settle(w)
	if len(e.netns.created) != created || e.vols.setups != setups || len(e.netns.removed) != 1 {
		t.Errorf("a later sync of the finished pod made its sandbox again: netns created %d→%d, volume setups %d→%d, removed %v",
			created, len(e.netns.created), setups, e.vols.setups, e.netns.removed)
	}
	// An agent restarted after the pod finished: a new worker for the pod
	// whose API status is terminal makes nothing and releases what is left.
	pod2 := pod.DeepCopy()
	pod2.Status.Phase = v1.PodSucceeded
	w2 := e.worker(pod2, kubetypes.SourceAPI)
	created = len(e.netns.created)
	e.settle(w2)
	if len(e.netns.created) != created || len(e.netns.removed) != 2 {
		t.Errorf("a restarted agent's worker: netns created %d→%d, removed %v", created, len(e.netns.created), e.netns.removed)
	}
}

// Found by TestAgentSIGKILLedDuringPodChurn on a loaded host: a pause
// whose shim did not answer in time was taken for dead and removed (with
// the pod's PID namespace), again and again. A pause of unknown state is
// neither used, removed nor replaced; the sync asks again.
func TestPauseOfUnknownStateIsKept(t *testing.T) {
	unknown := runtime.Pause{ID: "u", State: runtime.StateUnknown}
	running := runtime.Pause{ID: "r", State: runtime.StateRunning, Pid: 7}
	if use, remove := pauseDecision([]runtime.Pause{unknown}); use != nil || len(remove) != 0 {
		t.Errorf("unknown alone: use %v remove %v, want neither", use, remove)
	}
	if use, remove := pauseDecision([]runtime.Pause{running, unknown}); use == nil || use.ID != "r" || len(remove) != 0 {
		t.Errorf("running and unknown: use %v remove %v, want r and nothing removed", use, remove)
	}
	if err := pauseUnknown([]runtime.Pause{running, unknown}); err == nil {
		t.Error("pauseUnknown: nil, want an error naming the pause")
	}
	if err := pauseUnknown([]runtime.Pause{running}); err != nil {
		t.Errorf("pauseUnknown without an unknown pause: %v", err)
	}
}

// kubelet's pod worker is done with a finished pod once its sandbox is
// released: a later deletion (which bumps metadata.generation) writes no
// status, the API delete follows. The agent's worker computed the status
// again at the deletion: status.observedGeneration and every condition's
// went to the new generation and PodReadyToStartContainers flipped back to
// True with a new lastTransitionTime (the sandbox it says is ready was
// released), one PATCH (after a GET) per finished pod that kubelet does not
// send, found counting the writes of a burst (docs/benchmarks.md).
func TestWorkerDeletionOfAFinishedPodKeepsItsStatus(t *testing.T) {
	e := newWorkerEnv(t)
	pod := testPod("job", v1.RestartPolicyNever, ctr("a"))
	pod.Generation = 1
	w := e.worker(pod, kubetypes.SourceAPI)
	e.settle(w)
	e.rt.exit(e.rt.running()["a"].ID, 0)
	e.settle(w)
	final := e.lastStatus(pod.UID)
	if final.Phase != v1.PodSucceeded || len(e.netns.removed) != 1 {
		t.Fatalf("phase %s, netns removed %v: want Succeeded and released", final.Phase, e.netns.removed)
	}
	if c := findCond(final, v1.PodReadyToStartContainers); c == nil || c.Status != v1.ConditionFalse {
		t.Fatalf("released sandbox: PodReadyToStartContainers %+v, want False", c)
	}

	e.clk.Step(3 * time.Second)
	del := pod.DeepCopy()
	del.Status = final // as the API has it
	del.Generation = 2 // the API server bumps it on a graceful delete
	del.DeletionTimestamp = &metav1.Time{Time: e.clk.Now()}
	del.DeletionGracePeriodSeconds = utilptr.To[int64](30)
	w.update(del)
	e.settle(w)
	if len(e.status.deleted) != 1 {
		t.Fatalf("deleted from the API %v, want once", e.status.deleted)
	}
	if got := e.lastStatus(pod.UID); !status.Equal(got, final) || got.ObservedGeneration != final.ObservedGeneration {
		t.Errorf("the deletion of a finished pod changed its status:\n%s", cmp.Diff(final, got))
	}
}
