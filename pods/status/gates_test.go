package status

import (
	"testing"

	v1 "k8s.io/api/core/v1"
)

func condOf(s v1.PodStatus, t v1.PodConditionType) v1.PodCondition {
	for _, c := range s.Conditions {
		if c.Type == t {
			return c
		}
	}
	return v1.PodCondition{}
}

// Ready follows ContainersReady, then the readiness gates (kubelet's
// GeneratePodReadyCondition), with conditions of others kept.
func TestReadinessGates(t *testing.T) {
	gate := v1.PodConditionType("example.com/gate")
	for _, tc := range []struct {
		desc    string
		cond    *v1.ConditionStatus
		want    v1.ConditionStatus
		message string
	}{
		{"missing", nil, v1.ConditionFalse, `corresponding condition of pod readiness gate "example.com/gate" does not exist.`},
		{"false", ptrTo(v1.ConditionFalse), v1.ConditionFalse, `the status of pod readiness gate "example.com/gate" is not "True", but False`},
		{"true", ptrTo(v1.ConditionTrue), v1.ConditionTrue, ""},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			pod := statusPod(v1.RestartPolicyAlways, nil, []string{"a"})
			pod.Spec.ReadinessGates = []v1.PodReadinessGate{{ConditionType: gate}}
			if tc.cond != nil {
				pod.Status.Conditions = []v1.PodCondition{{Type: gate, Status: *tc.cond}}
			}
			st := Compute(pod, rs(running("a", 0, at(0))), Input{SandboxReady: true}, at(1))
			r := condOf(st, v1.PodReady)
			if r.Status != tc.want || r.Message != tc.message || (tc.want == v1.ConditionFalse && r.Reason != ReasonReadinessGatesNotReady) {
				t.Errorf("Ready %+v", r)
			}
			if c := condOf(st, v1.ContainersReady); c.Status != v1.ConditionTrue {
				t.Errorf("ContainersReady %+v", c)
			}
			if tc.cond != nil && condOf(st, gate).Status != *tc.cond {
				t.Errorf("the gate's condition was not kept: %+v", st.Conditions)
			}
		})
	}
}

// Probes decide started and ready of running containers; termination
// messages and the deadline's failure reach the status.
func TestProbedMessagesAndFailure(t *testing.T) {
	pod := statusPod(v1.RestartPolicyAlways, nil, []string{"a", "b"})
	run := running("a", 0, at(0))
	done := exited("b", 0, 1, "", at(0), at(2))
	in := Input{SandboxReady: true, Probed: map[string]Probed{run.ID: {Started: true, Ready: false}}, Messages: map[string]string{done.ID: "bye"}}
	st := Compute(pod, rs(run, done), in, at(3))
	a, b := st.ContainerStatuses[0], st.ContainerStatuses[1]
	if a.Ready || a.Started == nil || !*a.Started {
		t.Errorf("a: ready %v started %v", a.Ready, a.Started)
	}
	if b.State.Terminated == nil || b.State.Terminated.Message != "bye" {
		t.Errorf("b: %+v", b.State)
	}
	in.Probed[run.ID] = Probed{}
	if st := Compute(pod, rs(run, done), in, at(3)); *st.ContainerStatuses[0].Started {
		t.Error("started before the startup probe passed")
	}
	// The agent's failure is held back while a container still runs (as
	// kubelet's mergePodStatus), and is the phase once none does.
	in.FailReason, in.FailMessage = "DeadlineExceeded", "too long"
	st = Compute(pod, rs(run, done), in, at(3))
	if st.Phase == v1.PodFailed {
		t.Errorf("Failed (%q) while container a still runs", st.Reason)
	}
	stopped := exited("a", 0, 137, "", at(0), at(3))
	st = Compute(pod, rs(stopped, done), in, at(4))
	if st.Phase != v1.PodFailed || st.Reason != "DeadlineExceeded" || st.Message != "too long" {
		t.Errorf("phase %s reason %q message %q", st.Phase, st.Reason, st.Message)
	}
}

// A status write keeps the API's conditions of others.
func TestWithForeignConditions(t *testing.T) {
	cur := v1.PodStatus{Conditions: []v1.PodCondition{{Type: "x", Status: v1.ConditionTrue}, {Type: v1.PodReady, Status: v1.ConditionTrue}}}
	want := v1.PodStatus{Conditions: []v1.PodCondition{{Type: "x", Status: v1.ConditionFalse}, {Type: v1.PodReady, Status: v1.ConditionFalse}}}
	got := WithForeignConditions(cur, want)
	if condOf(got, "x").Status != v1.ConditionTrue || condOf(got, v1.PodReady).Status != v1.ConditionFalse || len(got.Conditions) != 2 {
		t.Errorf("conditions %+v", got.Conditions)
	}
}

func ptrTo[T any](v T) *T { return &v }
