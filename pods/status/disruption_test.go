package status

import (
	"testing"

	v1 "k8s.io/api/core/v1"
)

// A pod the agent stops for a node shutdown is Failed with kubelet's reason
// and message and carries DisruptionTarget (TerminationByKubelet), which a
// status write keeps even when the API has no such condition yet.
func TestDisruptionTarget(t *testing.T) {
	const msg = "Pod was terminated in response to imminent node shutdown."
	for _, tc := range []struct {
		desc     string
		old      []v1.PodCondition
		in       string
		want     bool
		wantTime int
	}{
		{desc: "no disruption", in: ""},
		{desc: "new condition", in: msg, want: true, wantTime: 5},
		{desc: "old True condition keeps its time", in: msg, want: true, wantTime: 2,
			old: []v1.PodCondition{{Type: v1.DisruptionTarget, Status: v1.ConditionTrue, Reason: "DeletionByTaintManager", LastTransitionTime: apiTime(at(2))}}},
		{desc: "old False condition is replaced", in: msg, want: true, wantTime: 5,
			old: []v1.PodCondition{{Type: v1.DisruptionTarget, Status: v1.ConditionFalse, LastTransitionTime: apiTime(at(2))}}},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			pod := statusPod(v1.RestartPolicyAlways, nil, []string{"a"})
			pod.Status.Conditions = tc.old
			in := Input{SandboxReady: true, Disruption: tc.in}
			if tc.in != "" {
				in.FailReason, in.FailMessage = "Terminated", msg
			}
			st := Compute(pod, rs(exited("a", 0, 143, "", at(0), at(4))), in, at(5))
			n := 0
			for _, c := range st.Conditions {
				if c.Type == v1.DisruptionTarget {
					n++
				}
			}
			c := condOf(st, v1.DisruptionTarget)
			if !tc.want {
				if n != len(tc.old) {
					t.Errorf("conditions %+v", st.Conditions)
				}
				return
			}
			if n != 1 || c.Status != v1.ConditionTrue || c.Reason != v1.PodReasonTerminationByKubelet || c.Message != msg || !c.LastTransitionTime.Equal(ptrTo(apiTime(at(tc.wantTime)))) {
				t.Errorf("DisruptionTarget %+v (of %d)", c, n)
			}
			if st.Phase != v1.PodFailed || st.Reason != "Terminated" || st.Message != msg {
				t.Errorf("phase %s reason %q message %q", st.Phase, st.Reason, st.Message)
			}
			// The write to the API keeps it, and replaces the API's.
			merged := WithForeignConditions(pod.Status, st)
			if got := condOf(merged, v1.DisruptionTarget); got.Reason != v1.PodReasonTerminationByKubelet {
				t.Errorf("after the merge: %+v", merged.Conditions)
			}
		})
	}
	// Someone else's DisruptionTarget in the API is not overwritten by a
	// status without ours.
	cur := v1.PodStatus{Conditions: []v1.PodCondition{{Type: v1.DisruptionTarget, Status: v1.ConditionTrue, Reason: "PreemptionByScheduler"}}}
	if got := condOf(WithForeignConditions(cur, v1.PodStatus{}), v1.DisruptionTarget); got.Reason != "PreemptionByScheduler" {
		t.Errorf("the API's condition was lost: %+v", got)
	}
}
