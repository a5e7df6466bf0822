package pods

import (
	"context"
	"errors"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	utilptr "k8s.io/utils/ptr"

	"github.com/nodeagent/nodeagent/kubetypes"
)

func TestStopGrace(t *testing.T) {
	for _, tc := range []struct {
		desc string
		pod  *int64
		max  time.Duration
		want time.Duration
	}{
		{"pod's grace smaller", utilptr.To[int64](7), 20 * time.Second, 7 * time.Second},
		{"request's bound smaller", utilptr.To[int64](30), 15 * time.Second, 15 * time.Second},
		{"no pod grace: 30s default, bounded", nil, 10 * time.Second, 10 * time.Second},
		{"zero", utilptr.To[int64](0), 10 * time.Second, 0},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			pod := testPod("p", v1.RestartPolicyAlways, ctr("c"))
			pod.Spec.TerminationGracePeriodSeconds = tc.pod
			if got := stopGrace(pod, tc.max); got != tc.want {
				t.Errorf("stopGrace = %v, want %v", got, tc.want)
			}
		})
	}
}

// StopPods stops a running pod with the smaller grace, marks it as kubelet
// marks a pod stopped for a node shutdown, writes its status before it
// says done, and the pod is not started again.
func TestStopPodsForNodeShutdown(t *testing.T) {
	e := newWorkerEnv(t)
	pod := testPod("web", v1.RestartPolicyAlways, ctr("a"), ctr("b")) // grace 7s
	w := e.worker(pod, kubetypes.SourceAPI)
	e.settle(w)
	done := e.worker(testPod("done", v1.RestartPolicyNever, ctr("c")), kubetypes.SourceAPI)
	done.terminal.Store(true)
	m := e.manager(Options{})
	adopt(m, w, done)

	if got := m.ActivePods(); len(got) != 1 || got[0].UID != pod.UID {
		t.Fatalf("ActivePods = %v, want only web", got)
	}

	errc := make(chan error, 1)
	go func() {
		errc <- m.StopPods(context.Background(), []types.UID{pod.UID, "unknown"}, 5*time.Second, StopForNodeShutdown)
	}()
	// Wait for the request, then run the worker's syncs by hand.
	for i := 0; ; i++ {
		if _, req := w.pw.current(); req != nil {
			break
		}
		if i > 1000 {
			t.Fatal("no stop request reached the worker")
		}
		time.Sleep(time.Millisecond)
	}
	select {
	case err := <-errc:
		t.Fatalf("StopPods returned before the pod stopped: %v", err)
	default:
	}
	e.settle(w)
	select {
	case err := <-errc:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("StopPods did not return after the pod stopped")
	}
	if len(e.rt.stops) != 2 {
		t.Fatalf("stops %+v", e.rt.stops)
	}
	for _, s := range e.rt.stops {
		if s.grace != 5*time.Second {
			t.Errorf("stopped %s with grace %v, want min(7s, 5s)", s.id, s.grace)
		}
	}
	st := e.lastStatus(pod.UID)
	if st.Phase != v1.PodFailed || st.Reason != "Terminated" || st.Message != "Pod was terminated in response to imminent node shutdown." {
		t.Errorf("status phase %s reason %q message %q", st.Phase, st.Reason, st.Message)
	}
	var dt *v1.PodCondition
	for i := range st.Conditions {
		if st.Conditions[i].Type == v1.DisruptionTarget {
			dt = &st.Conditions[i]
		}
	}
	if dt == nil || dt.Status != v1.ConditionTrue || dt.Reason != v1.PodReasonTerminationByKubelet {
		t.Errorf("DisruptionTarget %+v", dt)
	}
	if len(e.status.flushed) == 0 {
		t.Error("the status was not written before StopPods returned")
	}
	// Nothing starts again.
	e.clk.Step(time.Hour)
	e.settle(w)
	if r := e.rt.running(); len(r) != 0 {
		t.Errorf("running again after the stop: %v", r)
	}
	if m.ActivePods() != nil && len(m.ActivePods()) != 0 {
		t.Errorf("ActivePods after the stop: %v", m.ActivePods())
	}
}

// StopPods gives up when its context ends; a deleted pod is not active.
func TestStopPodsTimesOut(t *testing.T) {
	e := newWorkerEnv(t)
	pod := testPod("web", v1.RestartPolicyAlways, ctr("a"))
	w := e.worker(pod, kubetypes.SourceAPI)
	e.settle(w)
	m := e.manager(Options{})
	adopt(m, w)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if err := m.StopPods(ctx, []types.UID{pod.UID}, time.Second, StopForNodeShutdown); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("StopPods = %v, want the deadline", err)
	}
	del := pod.DeepCopy()
	del.DeletionTimestamp = &metav1.Time{Time: e.clk.Now()}
	w.update(del)
	if got := m.ActivePods(); len(got) != 0 {
		t.Errorf("ActivePods = %v, want none (deleted)", got)
	}
}

// While the node shuts down, new pods are rejected as kubelet rejects them.
func TestAdmissionWhileShuttingDown(t *testing.T) {
	var shutting error
	m := newWorkerEnv(t).manager(Options{ShuttingDown: func() error { return shutting }})
	if r := m.shutdownRejection(); r != nil {
		t.Fatalf("rejected before the shutdown: %+v", r)
	}
	shutting = errors.New("node is shutting down")
	r := m.shutdownRejection()
	if r == nil || r.Reason != "NodeShutdown" || r.Message != "Pod was rejected as the node is shutting down." {
		t.Fatalf("rejection %+v", r)
	}
	pod := testPod("new", v1.RestartPolicyAlways, ctr("c"))
	if got := m.admitLocked(pod, &v1.Node{}, nil); got == nil || got.Reason != "NodeShutdown" {
		t.Errorf("admitLocked = %+v, want NodeShutdown", got)
	}
}
