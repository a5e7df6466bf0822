package status

import (
	"testing"

	v1 "k8s.io/api/core/v1"
)

// Ephemeral containers get statuses of their own, never ready, and do not
// change the pod's phase or readiness.
func TestEphemeralContainerStatuses(t *testing.T) {
	pod := statusPod(v1.RestartPolicyAlways, nil, []string{"app"})
	pod.Spec.EphemeralContainers = []v1.EphemeralContainer{
		{EphemeralContainerCommon: v1.EphemeralContainerCommon{Name: "dbg", Image: "img-dbg"}},
		{EphemeralContainerCommon: v1.EphemeralContainerCommon{Name: "done", Image: "img-done"}},
		{EphemeralContainerCommon: v1.EphemeralContainerCommon{Name: "new", Image: "img-new"}},
	}
	s := Compute(pod, rs(running("app", 0, at(1)), running("dbg", 0, at(2)), exited("done", 0, 3, "Error", at(2), at(3))),
		Input{SandboxReady: true}, at(10))
	if s.Phase != v1.PodRunning || len(s.ContainerStatuses) != 1 {
		t.Fatalf("phase %s, container statuses %+v", s.Phase, s.ContainerStatuses)
	}
	if len(s.EphemeralContainerStatuses) != 3 {
		t.Fatalf("ephemeral statuses %+v", s.EphemeralContainerStatuses)
	}
	dbg, done, fresh := s.EphemeralContainerStatuses[0], s.EphemeralContainerStatuses[1], s.EphemeralContainerStatuses[2]
	if dbg.Name != "dbg" || dbg.State.Running == nil || dbg.Ready || dbg.ContainerID != "containerd://dbg-0" {
		t.Errorf("running ephemeral: %+v", dbg)
	}
	// Exited: terminated, not waiting for a restart (restartPolicy
	// Always is for app containers).
	if done.State.Terminated == nil || done.State.Terminated.ExitCode != 3 || done.Ready {
		t.Errorf("exited ephemeral: %+v", done)
	}
	if fresh.State.Waiting == nil || fresh.State.Waiting.Reason != ReasonContainerCreating {
		t.Errorf("new ephemeral: %+v", fresh)
	}
	for _, c := range s.Conditions {
		if c.Type == v1.PodReady && c.Status != v1.ConditionTrue {
			t.Errorf("pod ready condition %+v", c)
		}
	}
}
