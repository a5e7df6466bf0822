package status

import (
	"reflect"
	"testing"

	v1 "k8s.io/api/core/v1"

	"github.com/nodeagent/nodeagent/pleg"
)

// Statuses of pods with a sidecar ("side", an init container with
// restartPolicy Always) as kubelet 1.34 reports them.
func TestComputeSidecars(t *testing.T) {
	always := v1.ContainerRestartPolicyAlways
	pod := func(policy v1.RestartPolicy) *v1.Pod {
		p := statusPod(policy, []string{"side"}, []string{"app"})
		p.Spec.InitContainers[0].RestartPolicy = &always
		return p
	}
	ready := Input{SandboxReady: true, HostIP: "10.0.0.5"}
	probed := func(in Input, id string, p Probed) Input {
		in.Probed = map[string]Probed{id: p}
		return in
	}
	tests := []struct {
		desc  string
		pod   *v1.Pod
		rs    pleg.PodStatus
		in    Input
		phase v1.PodPhase
		init  []string
		app   []string
		conds []string
	}{
		{
			desc:  "sidecar started, app container not yet",
			pod:   pod(v1.RestartPolicyAlways),
			rs:    rs(running("side", 0, at(1))),
			in:    ready,
			phase: v1.PodPending,
			init:  []string{"side running restarts=0 ready=true started=true"},
			app:   []string{"app waiting(PodInitializing) restarts=0 ready=false started=false"},
			conds: conds("True", "True", "False/ContainersNotReady/containers with unready status: [app]"),
		},
		{
			desc:  "sidecar whose startup probe has not succeeded: not initialized",
			pod:   pod(v1.RestartPolicyAlways),
			rs:    rs(running("side", 0, at(1))),
			in:    probed(ready, "side-0", Probed{}),
			phase: v1.PodPending,
			init:  []string{"side running restarts=0 ready=false started=false"},
			app:   []string{"app waiting(PodInitializing) restarts=0 ready=false started=false"},
			conds: []string{"PodReadyToStartContainers=True",
				"Initialized=False/ContainersNotInitialized/containers with incomplete status: [side]",
				"Ready=False/ContainersNotReady/containers with unready status: [side app]",
				"ContainersReady=False/ContainersNotReady/containers with unready status: [side app]",
				"PodScheduled=True"},
		},
		{
			desc:  "sidecar not ready: the pod is not ready",
			pod:   pod(v1.RestartPolicyAlways),
			rs:    rs(running("side", 0, at(1)), running("app", 0, at(2))),
			in:    probed(ready, "side-0", Probed{Started: true}),
			phase: v1.PodRunning,
			init:  []string{"side running restarts=0 ready=false started=true"},
			app:   []string{"app running restarts=0 ready=true started=true"},
			conds: conds("True", "True", "False/ContainersNotReady/containers with unready status: [side]"),
		},
		{
			desc:  "everything ready",
			pod:   pod(v1.RestartPolicyNever),
			rs:    rs(running("side", 0, at(1)), running("app", 0, at(2))),
			in:    ready,
			phase: v1.PodRunning,
			init:  []string{"side running restarts=0 ready=true started=true"},
			app:   []string{"app running restarts=0 ready=true started=true"},
			conds: conds("True", "True", "True"),
		},
		{
			desc:  "sidecar restarting in a Never pod: waiting, the pod runs on",
			pod:   pod(v1.RestartPolicyNever),
			rs:    rs(exited("side", 0, 1, "", at(1), at(5)), running("app", 0, at(2))),
			in:    waitingInput(ready, "side", ReasonCrashLoopBackOff, "back-off"),
			phase: v1.PodRunning,
			init:  []string{"side waiting(CrashLoopBackOff: back-off) last=terminated(1 Error) restarts=0 ready=false started=false"},
			app:   []string{"app running restarts=0 ready=true started=true"},
			conds: conds("True", "True", "False/ContainersNotReady/containers with unready status: [side]"),
		},
		{
			desc:  "app container done, the sidecar still running: Running",
			pod:   pod(v1.RestartPolicyNever),
			rs:    rs(running("side", 0, at(1)), exited("app", 0, 0, "", at(2), at(9))),
			in:    ready,
			phase: v1.PodRunning,
			init:  []string{"side running restarts=0 ready=true started=true"},
			app:   []string{"app terminated(0 Completed) restarts=0 ready=false started=false"},
			conds: conds("True", "True", "False/ContainersNotReady/containers with unready status: [app]"),
		},
		{
			desc:  "app container succeeded, the sidecar stopped: Succeeded",
			pod:   pod(v1.RestartPolicyNever),
			rs:    rs(exited("side", 0, 137, "", at(1), at(10)), exited("app", 0, 0, "", at(2), at(9))),
			in:    ready,
			phase: v1.PodSucceeded,
			init:  []string{"side terminated(137 Error) restarts=0 ready=false started=false"},
			app:   []string{"app terminated(0 Completed) restarts=0 ready=false started=false"},
			conds: []string{"PodReadyToStartContainers=True", "Initialized=True/PodCompleted",
				"Ready=False/PodCompleted", "ContainersReady=False/PodCompleted", "PodScheduled=True"},
		},
		{
			desc:  "app container failed, the sidecar stopped: Failed",
			pod:   pod(v1.RestartPolicyNever),
			rs:    rs(exited("side", 0, 0, "", at(1), at(10)), exited("app", 0, 2, "", at(2), at(9))),
			in:    ready,
			phase: v1.PodFailed,
			init:  []string{"side terminated(0 Completed) restarts=0 ready=false started=false"},
			app:   []string{"app terminated(2 Error) restarts=0 ready=false started=false"},
			conds: conds("True", "True", "False/PodFailed"),
		},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			got := Compute(tc.pod, tc.rs, tc.in, at(50))
			if got.Phase != tc.phase {
				t.Errorf("phase %s, want %s", got.Phase, tc.phase)
			}
			if d := describeContainers(got.InitContainerStatuses); !reflect.DeepEqual(d, tc.init) {
				t.Errorf("initContainerStatuses:\n got %q\nwant %q", d, tc.init)
			}
			if d := describeContainers(got.ContainerStatuses); !reflect.DeepEqual(d, tc.app) {
				t.Errorf("containerStatuses:\n got %q\nwant %q", d, tc.app)
			}
			if d := describeConditions(got.Conditions); !reflect.DeepEqual(d, tc.conds) {
				t.Errorf("conditions:\n got %q\nwant %q", d, tc.conds)
			}
		})
	}
}
