package pods

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/containerd/containerd/errdefs"
	v1 "k8s.io/api/core/v1"

	"github.com/nodeagent/nodeagent/kubetypes"
	"github.com/nodeagent/nodeagent/pleg"
	"github.com/nodeagent/nodeagent/runtime"
)

// containerdDiesInStart is the fake runtime whose first start is cut off by
// containerd's death: the call fails with "unavailable", so does the
// agent's removal right after, and containerd, back, reports the task as
// stopped with exit code 255 although its process never ran.
type containerdDiesInStart struct {
	*fakeRuntime
	died bool
	down bool
}

func (r *containerdDiesInStart) StartContainer(ctx context.Context, id string) error {
	if r.died {
		return r.fakeRuntime.StartContainer(ctx, id)
	}
	r.died, r.down = true, true
	r.mu.Lock()
	c := r.cs[id]
	c.State, c.ExitCode, c.Reason, c.FinishedAt = runtime.StateExited, 255, runtime.ReasonError, r.clk.Now()
	r.mu.Unlock()
	return fmt.Errorf("runtime: start %s: create task: error reading from server: EOF: %w", id, errdefs.ErrUnavailable)
}

func (r *containerdDiesInStart) RemoveContainer(ctx context.Context, id string) error {
	if r.down {
		r.down = false // back for the next call
		return fmt.Errorf("runtime: remove %s: connection refused: %w", id, errdefs.ErrUnavailable)
	}
	return r.fakeRuntime.RemoveContainer(ctx, id)
}

// A container whose start containerd's death cut off never ran: it is
// replaced under the same attempt (restartCount 0), and an init container
// of a restartPolicy: Never pod does not fail the pod. Without
// interruptedstart.go the first became attempt 1 (restartCount 1) and the
// second pod Failed.
func TestStartCutOffByContainerdIsNotARestart(t *testing.T) {
	for _, tc := range []struct {
		name string
		pod  func() *v1.Pod
	}{
		{"app container", func() *v1.Pod { return testPod("app", v1.RestartPolicyAlways, ctr("a")) }},
		{"init container, restartPolicy Never", func() *v1.Pod {
			p := testPod("init", v1.RestartPolicyNever, ctr("a"))
			p.Spec.InitContainers = []v1.Container{ctr("i")}
			return p
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newWorkerEnv(t)
			rt := &containerdDiesInStart{fakeRuntime: e.rt}
			e.deps.rt = rt
			pod := tc.pod()
			w := e.worker(pod, kubetypes.SourceAPI)
			for i := 0; i < 5; i++ {
				next, _ := e.settle(w)
				if len(pod.Spec.InitContainers) > 0 {
					for _, c := range e.rt.running() {
						if c.Name == "i" {
							e.rt.exit(c.ID, 0)
						}
					}
				}
				e.clk.Step(next)
			}
			st := e.lastStatus(pod.UID)
			if st.Phase != v1.PodRunning && !(len(pod.Spec.InitContainers) > 0 && st.Phase == v1.PodPending) {
				t.Fatalf("phase %s, want Running: %+v", st.Phase, st)
			}
			for _, cs := range append(st.InitContainerStatuses, st.ContainerStatuses...) {
				if cs.RestartCount != 0 {
					t.Errorf("container %s: restartCount %d, want 0 (lastState %+v)", cs.Name, cs.RestartCount, cs.LastTerminationState)
				}
			}
			a, ok := e.rt.running()["a"]
			if !ok || a.Attempt != 0 {
				t.Errorf("running %+v, want container a at attempt 0", e.rt.running())
			}
		})
	}
}

func TestAsUnstarted(t *testing.T) {
	t0 := time.Date(2026, 11, 23, 9, 0, 0, 0, time.UTC)
	rs := pleg.PodStatus{Containers: []runtime.Container{
		{ID: "cut-exited", State: runtime.StateExited, ExitCode: 255, Reason: runtime.ReasonError, StartedAt: t0, FinishedAt: t0},
		{ID: "cut-created", State: runtime.StateCreated},
		{ID: "cut-ran", State: runtime.StateRunning, Pid: 7},
		{ID: "other-exited", State: runtime.StateExited, ExitCode: 1},
	}}
	interrupted := map[string]bool{"cut-exited": true, "cut-created": true, "cut-ran": true, "gone": true}
	out, keep := asUnstarted(rs, interrupted)
	want := map[string]runtime.State{"cut-exited": runtime.StateCreated, "cut-created": runtime.StateCreated, "cut-ran": runtime.StateRunning, "other-exited": runtime.StateExited}
	for _, c := range out.Containers {
		if c.State != want[c.ID] {
			t.Errorf("%s: state %s, want %s", c.ID, c.State, want[c.ID])
		}
		if c.ID == "cut-exited" && (c.ExitCode != 0 || !c.FinishedAt.IsZero() || !c.StartedAt.IsZero()) {
			t.Errorf("cut-exited keeps exit facts: %+v", c)
		}
	}
	if rs.Containers[0].State != runtime.StateExited {
		t.Error("the PLEG's status was modified")
	}
	if len(keep) != 2 || !keep["cut-exited"] || !keep["cut-created"] {
		t.Errorf("kept %v, want cut-exited and cut-created (the running one ran, the gone one is gone)", keep)
	}
}
