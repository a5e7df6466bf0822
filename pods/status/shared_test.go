package status

import (
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/nodeagent/nodeagent/pleg"
)

// An evicted pod's DisruptionTarget condition reaches the API with the
// terminal phase, and a controller's stays as the API has it otherwise.
func TestDisruptionTargetSharedWithControllers(t *testing.T) {
	ours := v1.PodCondition{Type: v1.DisruptionTarget, Status: v1.ConditionTrue, Reason: v1.PodReasonTerminationByKubelet, Message: "low"}
	theirs := v1.PodCondition{Type: v1.DisruptionTarget, Status: v1.ConditionTrue, Reason: "PreemptionByScheduler"}
	running := v1.PodStatus{Phase: v1.PodRunning}
	failed := v1.PodStatus{Phase: v1.PodFailed, Conditions: []v1.PodCondition{ours}}
	find := func(s v1.PodStatus) *v1.PodCondition {
		for i := range s.Conditions {
			if s.Conditions[i].Type == v1.DisruptionTarget {
				return &s.Conditions[i]
			}
		}
		return nil
	}
	if c := find(WithForeignConditions(running, failed)); c == nil || c.Reason != ours.Reason {
		t.Errorf("to Failed: DisruptionTarget %+v, want ours", c)
	}
	withTheirs := running
	withTheirs.Conditions = []v1.PodCondition{theirs}
	if c := find(WithForeignConditions(withTheirs, failed)); c == nil || c.Reason != ours.Reason {
		t.Errorf("to Failed over a controller's: DisruptionTarget %+v, want ours (kubelet replaces it)", c)
	}
	if c := find(WithForeignConditions(withTheirs, running)); c == nil || c.Reason != theirs.Reason {
		t.Errorf("still running: DisruptionTarget %+v, want the controller's", c)
	}
	terminal := v1.PodStatus{Phase: v1.PodFailed}
	if c := find(WithForeignConditions(terminal, failed)); c != nil {
		t.Errorf("already terminal in the API: DisruptionTarget %+v added, want the API's (none)", c)
	}
}

func TestComputeEvictionDisruption(t *testing.T) {
	pod := &v1.Pod{Spec: v1.PodSpec{Containers: []v1.Container{{Name: "c"}}}}
	pod.Status.Phase = v1.PodRunning
	c := v1.PodCondition{Type: v1.DisruptionTarget, Status: v1.ConditionTrue, Reason: v1.PodReasonTerminationByKubelet, Message: "m"}
	in := Input{FailReason: "Evicted", FailMessage: "m", Disruption: "m"}
	s := Compute(pod, pleg.PodStatus{}, in, t0)
	count := func(s v1.PodStatus) int {
		n := 0
		for _, x := range s.Conditions {
			if x.Type == v1.DisruptionTarget && x.Reason == c.Reason && x.Message == "m" {
				n++
			}
		}
		return n
	}
	if s.Phase != v1.PodFailed || s.Reason != "Evicted" || count(s) != 1 {
		t.Fatalf("status %+v, want Failed/Evicted with one DisruptionTarget", s)
	}
	pod.Status = s
	if s2 := Compute(pod, pleg.PodStatus{}, in, t0.Add(time.Minute)); count(s2) != 1 {
		t.Errorf("recomputed: %d DisruptionTarget conditions, want 1", count(s2))
	}
}
