package status

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodeagent/nodeagent/kubetypes"
	"github.com/nodeagent/nodeagent/pleg"
	"github.com/nodeagent/nodeagent/runtime"
)

// t0 has a sub-second part, so that tests see the truncation to seconds.
var t0 = time.Date(2026, 11, 22, 10, 0, 0, 400_000_000, time.UTC)

func at(sec int) time.Time { return t0.Add(time.Duration(sec) * time.Second) }

// statusPod is a pod with the given restart policy, init containers and app
// containers; container "x" runs image "img-x".
func statusPod(policy v1.RestartPolicy, initNames, appNames []string) *v1.Pod {
	p := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", UID: "uid-1"},
		Spec:       v1.PodSpec{RestartPolicy: policy, NodeName: "node-1"},
	}
	for _, n := range initNames {
		p.Spec.InitContainers = append(p.Spec.InitContainers, v1.Container{Name: n, Image: "img-" + n})
	}
	for _, n := range appNames {
		p.Spec.Containers = append(p.Spec.Containers, v1.Container{Name: n, Image: "img-" + n})
	}
	return p
}

func running(name string, attempt uint32, started time.Time) runtime.Container {
	return runtime.Container{
		ID: fmt.Sprintf("%s-%d", name, attempt), Name: name, Attempt: attempt, Image: "img-" + name,
		State: runtime.StateRunning, CreatedAt: started, StartedAt: started,
	}
}

func exited(name string, attempt uint32, code int32, reason string, started, finished time.Time) runtime.Container {
	c := running(name, attempt, started)
	c.State, c.ExitCode, c.Reason, c.FinishedAt = runtime.StateExited, code, reason, finished
	return c
}

func created(name string, attempt uint32) runtime.Container {
	c := running(name, attempt, time.Time{})
	c.State, c.CreatedAt = runtime.StateCreated, at(1)
	return c
}

func rs(cs ...runtime.Container) pleg.PodStatus {
	return pleg.PodStatus{Pod: runtime.PodRef{UID: "uid-1", Name: "web", Namespace: "default"}, Containers: cs, Timestamp: at(100)}
}

// describeState is a compact, comparable rendering of a container state.
func describeState(st v1.ContainerState) string {
	switch {
	case st.Waiting != nil && st.Waiting.Message != "":
		return fmt.Sprintf("waiting(%s: %s)", st.Waiting.Reason, st.Waiting.Message)
	case st.Waiting != nil:
		return fmt.Sprintf("waiting(%s)", st.Waiting.Reason)
	case st.Running != nil:
		return "running"
	case st.Terminated != nil:
		return fmt.Sprintf("terminated(%d %s)", st.Terminated.ExitCode, st.Terminated.Reason)
	}
	return "none"
}

// describeContainer renders the fields of a container status the table
// tests check.
func describeContainer(cs v1.ContainerStatus) string {
	s := cs.Name + " " + describeState(cs.State)
	if last := describeState(cs.LastTerminationState); last != "none" {
		s += " last=" + last
	}
	started := "nil"
	if cs.Started != nil {
		started = fmt.Sprint(*cs.Started)
	}
	return fmt.Sprintf("%s restarts=%d ready=%t started=%s", s, cs.RestartCount, cs.Ready, started)
}

func describeContainers(list []v1.ContainerStatus) []string {
	var out []string
	for _, cs := range list {
		out = append(out, describeContainer(cs))
	}
	return out
}

// describeConditions renders conditions as "Type=Status/Reason/Message".
func describeConditions(list []v1.PodCondition) []string {
	var out []string
	for _, c := range list {
		s := fmt.Sprintf("%s=%s", c.Type, c.Status)
		if c.Reason != "" || c.Message != "" {
			s += "/" + c.Reason
		}
		if c.Message != "" {
			s += "/" + c.Message
		}
		out = append(out, s)
	}
	return out
}

func conds(sandbox, initialized, ready string) []string {
	return []string{
		"PodReadyToStartContainers=" + sandbox,
		"Initialized=" + initialized,
		"Ready=" + ready,
		"ContainersReady=" + ready,
		"PodScheduled=True",
	}
}

func TestComputeTable(t *testing.T) {
	always, onFailure, never := v1.RestartPolicyAlways, v1.RestartPolicyOnFailure, v1.RestartPolicyNever
	ready := Input{SandboxReady: true, HostIP: "10.0.0.5"}
	with := func(in Input, f func(*Input)) Input { f(&in); return in }
	waiting := func(in Input, name, reason, msg string) Input {
		return with(in, func(in *Input) { in.Waiting = map[string]Waiting{name: {Reason: reason, Message: msg}} })
	}
	backoff := "back-off 10s restarting failed container=app pod=web_default(uid-1)"
	static := func(p *v1.Pod) *v1.Pod {
		p.Annotations = map[string]string{kubetypes.AnnotationConfigSource: kubetypes.SourceFile}
		return p
	}
	withOld := func(p *v1.Pod, st v1.PodStatus) *v1.Pod { p.Status = st; return p }

	tests := []struct {
		desc    string
		pod     *v1.Pod
		rs      pleg.PodStatus
		in      Input
		phase   v1.PodPhase
		reason  string
		message string
		init    []string
		app     []string
		conds   []string
	}{
		{
			desc:  "creating: nothing in the runtime yet",
			pod:   statusPod(always, nil, []string{"app"}),
			rs:    rs(),
			in:    Input{HostIP: "10.0.0.5"},
			phase: v1.PodPending,
			app:   []string{"app waiting(ContainerCreating) restarts=0 ready=false started=false"},
			conds: conds("False", "True", "False/ContainersNotReady/containers with unready status: [app]"),
		},
		{
			desc:  "created, not started yet",
			pod:   statusPod(always, nil, []string{"app"}),
			rs:    rs(created("app", 0)),
			in:    ready,
			phase: v1.PodPending,
			app:   []string{"app waiting(ContainerCreating) restarts=0 ready=false started=false"},
			conds: conds("True", "True", "False/ContainersNotReady/containers with unready status: [app]"),
		},
		{
			desc:  "created, start failed",
			pod:   statusPod(always, nil, []string{"app"}),
			rs:    rs(created("app", 0)),
			in:    waiting(ready, "app", ReasonRunContainer, "exec: not found"),
			phase: v1.PodPending,
			app:   []string{"app waiting(RunContainerError: exec: not found) restarts=0 ready=false started=false"},
			conds: conds("True", "True", "False/ContainersNotReady/containers with unready status: [app]"),
		},
		{
			desc:  "image pull error",
			pod:   statusPod(always, nil, []string{"app"}),
			rs:    rs(),
			in:    waiting(ready, "app", ReasonErrImagePull, "not found"),
			phase: v1.PodPending,
			app:   []string{"app waiting(ErrImagePull: not found) restarts=0 ready=false started=false"},
			conds: conds("True", "True", "False/ContainersNotReady/containers with unready status: [app]"),
		},
		{
			desc:  "running",
			pod:   statusPod(always, nil, []string{"app", "side"}),
			rs:    rs(running("app", 0, at(1)), running("side", 0, at(1))),
			in:    ready,
			phase: v1.PodRunning,
			app: []string{
				"app running restarts=0 ready=true started=true",
				"side running restarts=0 ready=true started=true",
			},
			conds: conds("True", "True", "True"),
		},
		{
			desc:  "one of two running",
			pod:   statusPod(always, nil, []string{"app", "side"}),
			rs:    rs(running("side", 0, at(1))),
			in:    ready,
			phase: v1.PodPending,
			app: []string{
				"app waiting(ContainerCreating) restarts=0 ready=false started=false",
				"side running restarts=0 ready=true started=true",
			},
			conds: conds("True", "True", "False/ContainersNotReady/containers with unready status: [app]"),
		},
		{
			desc:  "crash loop: waiting with the last exit as lastState",
			pod:   statusPod(always, nil, []string{"app"}),
			rs:    rs(exited("app", 0, 1, "Error", at(1), at(2)), exited("app", 1, 2, "Error", at(3), at(4))),
			in:    waiting(ready, "app", ReasonCrashLoopBackOff, backoff),
			phase: v1.PodRunning,
			app:   []string{"app waiting(CrashLoopBackOff: " + backoff + ") last=terminated(2 Error) restarts=1 ready=false started=false"},
			conds: conds("True", "True", "False/ContainersNotReady/containers with unready status: [app]"),
		},
		{
			desc:  "restarted after a crash: the previous attempt is lastState",
			pod:   statusPod(always, nil, []string{"app"}),
			rs:    rs(running("app", 2, at(9)), exited("app", 1, 2, "Error", at(3), at(4)), exited("app", 0, 1, "Error", at(1), at(2))),
			in:    ready,
			phase: v1.PodRunning,
			app:   []string{"app running last=terminated(2 Error) restarts=2 ready=true started=true"},
			conds: conds("True", "True", "True"),
		},
		{
			desc:  "exited, Always, worker has no reason yet: terminated",
			pod:   statusPod(always, nil, []string{"app"}),
			rs:    rs(exited("app", 0, 1, "Error", at(1), at(2))),
			in:    ready,
			phase: v1.PodRunning,
			app:   []string{"app terminated(1 Error) restarts=0 ready=false started=false"},
			conds: conds("True", "True", "False/ContainersNotReady/containers with unready status: [app]"),
		},
		{
			desc:  "completed, Never",
			pod:   statusPod(never, nil, []string{"app"}),
			rs:    rs(exited("app", 0, 0, "Completed", at(1), at(2))),
			in:    ready,
			phase: v1.PodSucceeded,
			app:   []string{"app terminated(0 Completed) restarts=0 ready=false started=false"},
			conds: conds("True", "True/PodCompleted", "False/PodCompleted"),
		},
		{
			desc:  "completed, OnFailure, a stale waiting reason does not apply",
			pod:   statusPod(onFailure, nil, []string{"app"}),
			rs:    rs(exited("app", 0, 0, "", at(1), at(2))),
			in:    waiting(ready, "app", ReasonCrashLoopBackOff, backoff),
			phase: v1.PodSucceeded,
			app:   []string{"app terminated(0 Completed) restarts=0 ready=false started=false"},
			conds: conds("True", "True/PodCompleted", "False/PodCompleted"),
		},
		{
			desc:  "failed, Never",
			pod:   statusPod(never, nil, []string{"app", "side"}),
			rs:    rs(exited("app", 0, 1, "Error", at(1), at(2)), exited("side", 0, 0, "Completed", at(1), at(3))),
			in:    waiting(ready, "app", ReasonCrashLoopBackOff, backoff),
			phase: v1.PodFailed,
			app: []string{
				"app terminated(1 Error) restarts=0 ready=false started=false",
				"side terminated(0 Completed) restarts=0 ready=false started=false",
			},
			conds: conds("True", "True", "False/PodFailed"),
		},
		{
			desc:  "failed, Never, exit code without a reason",
			pod:   statusPod(never, nil, []string{"app"}),
			rs:    rs(exited("app", 0, 3, "", at(1), at(2))),
			in:    ready,
			phase: v1.PodFailed,
			app:   []string{"app terminated(3 Error) restarts=0 ready=false started=false"},
			conds: conds("True", "True", "False/PodFailed"),
		},
		{
			desc:  "OOMKilled, Never",
			pod:   statusPod(never, nil, []string{"app"}),
			rs:    rs(exited("app", 0, 137, "OOMKilled", at(1), at(2))),
			in:    ready,
			phase: v1.PodFailed,
			app:   []string{"app terminated(137 OOMKilled) restarts=0 ready=false started=false"},
			conds: conds("True", "True", "False/PodFailed"),
		},
		{
			desc:  "failed, OnFailure: restarting",
			pod:   statusPod(onFailure, nil, []string{"app"}),
			rs:    rs(exited("app", 0, 137, "OOMKilled", at(1), at(2))),
			in:    waiting(ready, "app", ReasonCrashLoopBackOff, backoff),
			phase: v1.PodRunning,
			app:   []string{"app waiting(CrashLoopBackOff: " + backoff + ") last=terminated(137 OOMKilled) restarts=0 ready=false started=false"},
			conds: conds("True", "True", "False/ContainersNotReady/containers with unready status: [app]"),
		},
		{
			desc:  "init containers in progress",
			pod:   statusPod(always, []string{"i1", "i2", "i3"}, []string{"app"}),
			rs:    rs(exited("i1", 0, 0, "Completed", at(1), at(2)), running("i2", 0, at(3))),
			in:    ready,
			phase: v1.PodPending,
			init: []string{
				"i1 terminated(0 Completed) restarts=0 ready=true started=false",
				"i2 running restarts=0 ready=false started=true",
				"i3 waiting(PodInitializing) restarts=0 ready=false started=false",
			},
			app:   []string{"app waiting(PodInitializing) restarts=0 ready=false started=false"},
			conds: conds("True", "False/ContainersNotInitialized/containers with incomplete status: [i2 i3]", "False/ContainersNotReady/containers with unready status: [app]"),
		},
		{
			desc:  "init container failed, Never",
			pod:   statusPod(never, []string{"i1", "i2"}, []string{"app"}),
			rs:    rs(exited("i1", 0, 2, "Error", at(1), at(2))),
			in:    ready,
			phase: v1.PodFailed,
			init: []string{
				"i1 terminated(2 Error) restarts=0 ready=false started=false",
				"i2 waiting(PodInitializing) restarts=0 ready=false started=false",
			},
			app:   []string{"app waiting(PodInitializing) restarts=0 ready=false started=false"},
			conds: conds("True", "False/ContainersNotInitialized/containers with incomplete status: [i1 i2]", "False/PodFailed"),
		},
		{
			desc:  "init container failed, Always: crash loop, Pending",
			pod:   statusPod(always, []string{"i1"}, []string{"app"}),
			rs:    rs(exited("i1", 0, 2, "Error", at(1), at(2)), exited("i1", 1, 2, "Error", at(3), at(4))),
			in:    waiting(ready, "i1", ReasonCrashLoopBackOff, backoff),
			phase: v1.PodPending,
			init:  []string{"i1 waiting(CrashLoopBackOff: " + backoff + ") last=terminated(2 Error) restarts=1 ready=false started=false"},
			app:   []string{"app waiting(PodInitializing) restarts=0 ready=false started=false"},
			conds: conds("True", "False/ContainersNotInitialized/containers with incomplete status: [i1]", "False/ContainersNotReady/containers with unready status: [app]"),
		},
		{
			desc:  "init containers done, app being created",
			pod:   statusPod(always, []string{"i1"}, []string{"app"}),
			rs:    rs(exited("i1", 0, 0, "Completed", at(1), at(2))),
			in:    ready,
			phase: v1.PodPending,
			init:  []string{"i1 terminated(0 Completed) restarts=0 ready=true started=false"},
			app:   []string{"app waiting(PodInitializing) restarts=0 ready=false started=false"},
			conds: conds("True", "True", "False/ContainersNotReady/containers with unready status: [app]"),
		},
		{
			desc:  "init containers done, app running",
			pod:   statusPod(always, []string{"i1"}, []string{"app"}),
			rs:    rs(exited("i1", 0, 0, "Completed", at(1), at(2)), running("app", 0, at(3))),
			in:    waiting(ready, "i1", ReasonCrashLoopBackOff, "stale"),
			phase: v1.PodRunning,
			init:  []string{"i1 terminated(0 Completed) restarts=0 ready=true started=false"},
			app:   []string{"app running restarts=0 ready=true started=true"},
			conds: conds("True", "True", "True"),
		},
		{
			desc: "rejected",
			pod: withOld(statusPod(always, nil, []string{"app"}), v1.PodStatus{Conditions: []v1.PodCondition{
				{Type: v1.PodScheduled, Status: v1.ConditionTrue},
				{Type: "example.com/gate", Status: v1.ConditionTrue},
			}}),
			rs: rs(),
			in: Input{
				Rejected: true, RejectReason: "OutOfcpu", HostIP: "10.0.0.5", PodIPs: []string{"10.0.0.5"},
				RejectMessage: "Node didn't have enough resource: cpu, requested: 4000, used: 0, capacity: 2000",
			},
			phase:   v1.PodFailed,
			reason:  "OutOfcpu",
			message: "Pod was rejected: Node didn't have enough resource: cpu, requested: 4000, used: 0, capacity: 2000",
			conds:   []string{"example.com/gate=True"},
		},
		{
			desc:  "terminating, a container still runs",
			pod:   statusPod(always, nil, []string{"app", "side"}),
			rs:    rs(running("app", 0, at(1)), exited("side", 0, 143, "Error", at(1), at(5))),
			in:    with(ready, func(in *Input) { in.Terminating = true }),
			phase: v1.PodRunning,
			app: []string{
				"app running restarts=0 ready=true started=true",
				"side terminated(143 Error) restarts=0 ready=false started=false",
			},
			conds: conds("True", "True", "False/ContainersNotReady/containers with unready status: [side]"),
		},
		{
			desc:  "terminating, all stopped, one killed: Failed whatever the restart policy",
			pod:   statusPod(always, nil, []string{"app", "side"}),
			rs:    rs(exited("app", 0, 0, "Completed", at(1), at(5)), exited("side", 0, 137, "Error", at(1), at(6))),
			in:    with(waiting(ready, "side", ReasonCrashLoopBackOff, backoff), func(in *Input) { in.Terminating = true }),
			phase: v1.PodFailed,
			app: []string{
				"app terminated(0 Completed) restarts=0 ready=false started=false",
				"side terminated(137 Error) restarts=0 ready=false started=false",
			},
			conds: conds("True", "True", "False/PodFailed"),
		},
		{
			desc:  "terminating, all stopped cleanly: Succeeded",
			pod:   statusPod(always, nil, []string{"app"}),
			rs:    rs(exited("app", 0, 0, "Completed", at(1), at(5))),
			in:    with(ready, func(in *Input) { in.Terminating = true }),
			phase: v1.PodSucceeded,
			app:   []string{"app terminated(0 Completed) restarts=0 ready=false started=false"},
			conds: conds("True", "True/PodCompleted", "False/PodCompleted"),
		},
		{
			desc:  "terminating static pod, all stopped: phase by restart policy",
			pod:   static(statusPod(always, nil, []string{"app"})),
			rs:    rs(exited("app", 0, 0, "Completed", at(1), at(5))),
			in:    with(ready, func(in *Input) { in.Terminating = true }),
			phase: v1.PodRunning,
			app:   []string{"app terminated(0 Completed) restarts=0 ready=false started=false"},
			conds: conds("True", "True", "False/ContainersNotReady/containers with unready status: [app]"),
		},
		{
			desc:  "terminating before a container ever started",
			pod:   statusPod(always, nil, []string{"app"}),
			rs:    rs(),
			in:    with(waiting(ready, "app", ReasonErrImagePull, "not found"), func(in *Input) { in.Terminating = true }),
			phase: v1.PodFailed,
			app:   []string{"app terminated(137 ContainerStatusUnknown) restarts=0 ready=false started=false"},
			conds: conds("True", "True", "False/PodFailed"),
		},
		{
			desc:  "terminating during init: the app containers stay waiting",
			pod:   statusPod(always, []string{"i1", "i2"}, []string{"app"}),
			rs:    rs(exited("i1", 0, 137, "Error", at(1), at(5))),
			in:    with(ready, func(in *Input) { in.Terminating = true }),
			phase: v1.PodFailed,
			init: []string{
				"i1 terminated(137 Error) restarts=0 ready=false started=false",
				"i2 waiting(PodInitializing) restarts=0 ready=false started=false",
			},
			app:   []string{"app waiting(PodInitializing) restarts=0 ready=false started=false"},
			conds: conds("True", "False/ContainersNotInitialized/containers with incomplete status: [i1 i2]", "False/PodFailed"),
		},
		{
			desc: "removed container keeps its last reported end",
			pod: withOld(statusPod(never, nil, []string{"app"}), v1.PodStatus{Phase: v1.PodRunning, ContainerStatuses: []v1.ContainerStatus{{
				Name: "app", Image: "img-app", ContainerID: "containerd://app-0",
				State: v1.ContainerState{Terminated: &v1.ContainerStateTerminated{ExitCode: 0, Reason: "Completed", ContainerID: "containerd://app-0"}},
			}}}),
			rs:    rs(),
			in:    ready,
			phase: v1.PodSucceeded,
			app:   []string{"app terminated(0 Completed) restarts=0 ready=false started=false"},
			conds: conds("True", "True/PodCompleted", "False/PodCompleted"),
		},
		{
			desc: "running container gone from the runtime: lastState unknown, restart counted",
			pod: withOld(statusPod(always, nil, []string{"app"}), v1.PodStatus{Phase: v1.PodRunning, ContainerStatuses: []v1.ContainerStatus{{
				Name: "app", Image: "img-app", ContainerID: "containerd://app-3", RestartCount: 3,
				State: v1.ContainerState{Running: &v1.ContainerStateRunning{}},
			}}}),
			rs:    rs(),
			in:    ready,
			phase: v1.PodRunning,
			app:   []string{"app waiting(ContainerCreating) last=terminated(137 ContainerStatusUnknown) restarts=4 ready=false started=false"},
			conds: conds("True", "True", "False/ContainersNotReady/containers with unready status: [app]"),
		},
		{
			desc:    "a terminal phase is never left; its reason is kept",
			pod:     withOld(statusPod(never, nil, []string{"app"}), v1.PodStatus{Phase: v1.PodFailed, Reason: "Evicted", Message: "low on memory"}),
			rs:      rs(),
			in:      ready,
			phase:   v1.PodFailed,
			reason:  "Evicted",
			message: "low on memory",
			app:     []string{"app waiting(ContainerCreating) restarts=0 ready=false started=false"},
			conds:   conds("True", "True", "False/PodFailed"),
		},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			before := tc.pod.DeepCopy()
			got := Compute(tc.pod, tc.rs, tc.in, at(50))
			if !reflect.DeepEqual(before, tc.pod) {
				t.Errorf("Compute modified its pod argument")
			}
			if got.Phase != tc.phase || got.Reason != tc.reason || got.Message != tc.message {
				t.Errorf("phase, reason, message = %q, %q, %q; want %q, %q, %q", got.Phase, got.Reason, got.Message, tc.phase, tc.reason, tc.message)
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
			if PodIsTerminal(got) != (tc.phase == v1.PodSucceeded || tc.phase == v1.PodFailed) {
				t.Errorf("PodIsTerminal = %t for phase %s", PodIsTerminal(got), got.Phase)
			}
			if tc.in.Rejected && (got.HostIP != "" || got.PodIP != "" || got.InitContainerStatuses != nil || got.ContainerStatuses != nil) {
				t.Errorf("rejected pod reports IPs or containers: %+v", got)
			}
		})
	}
}

func TestComputeFields(t *testing.T) {
	pod := statusPod(v1.RestartPolicyAlways, []string{"init"}, []string{"app"})
	pod.Spec.Containers[0].Image = "docker.io/library/busybox:1.36"
	in := Input{
		SandboxReady: true, HostIP: "10.0.0.5", PodIPs: []string{"10.0.0.5"}, StartTime: at(0),
		ImageIDs: map[string]string{"docker.io/library/busybox@sha256:abc": "sha256:1234"},
	}
	app := running("app", 1, at(10))
	app.Image = "docker.io/library/busybox@sha256:abc" // the runtime's reference may differ from the spec's
	prev := exited("app", 0, 1, "Error", at(5), at(6).Add(900*time.Millisecond))
	st := Compute(pod, rs(exited("init", 0, 0, "Completed", at(2), at(3)), prev, app), in, at(50))

	sec := func(s int) metav1.Time { return metav1.NewTime(time.Unix(at(s).Unix(), 0)) }
	want := v1.ContainerStatus{
		Name: "app", Image: "docker.io/library/busybox:1.36", ImageID: "sha256:1234",
		ContainerID: "containerd://app-1", RestartCount: 1, Ready: true, Started: ptr(true),
		Resources: &v1.ResourceRequirements{}, // none, as kubelet reports it
		State:     v1.ContainerState{Running: &v1.ContainerStateRunning{StartedAt: sec(10)}},
		LastTerminationState: v1.ContainerState{Terminated: &v1.ContainerStateTerminated{
			ExitCode: 1, Reason: "Error", StartedAt: sec(5), FinishedAt: sec(7), ContainerID: "containerd://app-0",
		}},
	}
	if len(st.ContainerStatuses) != 1 || !reflect.DeepEqual(st.ContainerStatuses[0], want) {
		t.Errorf("containerStatuses =\n%+v\nwant\n%+v", st.ContainerStatuses, want)
	}
	if len(st.InitContainerStatuses) != 1 || st.InitContainerStatuses[0].ImageID != "" || st.InitContainerStatuses[0].Image != "img-init" {
		t.Errorf("init container image, imageID = %+v; want img-init and no ID", st.InitContainerStatuses)
	}
	if st.HostIP != "10.0.0.5" || !reflect.DeepEqual(st.HostIPs, []v1.HostIP{{IP: "10.0.0.5"}}) ||
		st.PodIP != "10.0.0.5" || !reflect.DeepEqual(st.PodIPs, []v1.PodIP{{IP: "10.0.0.5"}}) {
		t.Errorf("IPs = %q %v %q %v", st.HostIP, st.HostIPs, st.PodIP, st.PodIPs)
	}
	if st.StartTime == nil || !st.StartTime.Equal(ptr(sec(0))) {
		t.Errorf("startTime = %v, want %v", st.StartTime, sec(0))
	}
	if st.QOSClass != v1.PodQOSBestEffort {
		t.Errorf("qosClass = %q, want BestEffort", st.QOSClass)
	}
	for _, c := range st.Conditions {
		if !c.LastTransitionTime.Equal(ptr(sec(50))) {
			t.Errorf("condition %s lastTransitionTime = %v, want %v", c.Type, c.LastTransitionTime, sec(50))
		}
	}

	// Without a pod IP (no hostNetwork, no CNI) there are no podIPs.
	in.PodIPs = nil
	st = Compute(pod, rs(), in, at(50))
	if st.PodIP != "" || st.PodIPs != nil {
		t.Errorf("podIP, podIPs = %q, %v; want none", st.PodIP, st.PodIPs)
	}
}

func ptr[T any](v T) *T { return &v }

func TestComputeStartTime(t *testing.T) {
	sec := func(s int) metav1.Time { return metav1.NewTime(time.Unix(at(s).Unix(), 0)) }
	tests := []struct {
		desc string
		old  *metav1.Time
		in   time.Time
		want metav1.Time
	}{
		{"the API's is kept", ptr(sec(1)), at(2), sec(1)},
		{"the worker's admission time", nil, at(2), sec(2)},
		{"now, when nobody knows", nil, time.Time{}, sec(50)},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			pod := statusPod(v1.RestartPolicyAlways, nil, []string{"app"})
			pod.Status.StartTime = tc.old
			for _, rejected := range []bool{false, true} {
				st := Compute(pod, rs(), Input{Rejected: rejected, StartTime: tc.in}, at(50))
				if st.StartTime == nil || !st.StartTime.Equal(&tc.want) {
					t.Errorf("rejected=%t: startTime = %v, want %v", rejected, st.StartTime, tc.want)
				}
			}
		})
	}
}

// apiRoundTrip returns st as a client reads it back from the API server.
func apiRoundTrip(t *testing.T, st v1.PodStatus) v1.PodStatus {
	t.Helper()
	b, err := json.Marshal(st)
	if err != nil {
		t.Fatal(err)
	}
	var out v1.PodStatus
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

func TestComputeTransitionTimes(t *testing.T) {
	pod := statusPod(v1.RestartPolicyAlways, nil, []string{"app"})
	scheduled := metav1.NewTime(time.Unix(at(-30).Unix(), 0))
	pod.Status.Conditions = []v1.PodCondition{{Type: v1.PodScheduled, Status: v1.ConditionTrue, LastTransitionTime: scheduled}}
	in := Input{SandboxReady: true, HostIP: "10.0.0.5", StartTime: at(0)}

	transitions := func(st v1.PodStatus) map[v1.PodConditionType]time.Time {
		m := map[v1.PodConditionType]time.Time{}
		for _, c := range st.Conditions {
			m[c.Type] = c.LastTransitionTime.Time
		}
		return m
	}
	check := func(st v1.PodStatus, want map[v1.PodConditionType]time.Time) {
		t.Helper()
		got := transitions(st)
		for typ, w := range want {
			if !got[typ].Equal(w) {
				t.Errorf("%s lastTransitionTime = %v, want %v", typ, got[typ], w)
			}
		}
	}
	sec := func(s int) time.Time { return time.Unix(at(s).Unix(), 0) }

	// Creating at 10s: the scheduler's PodScheduled is kept.
	st1 := Compute(pod, rs(), in, at(10))
	check(st1, map[v1.PodConditionType]time.Time{
		v1.PodScheduled: scheduled.Time, v1.PodReady: sec(10), v1.ContainersReady: sec(10),
		v1.PodInitialized: sec(10), v1.PodReadyToStartContainers: sec(10),
	})

	// The same inputs later, after the status went through the API: equal,
	// so no patch.
	pod.Status = apiRoundTrip(t, st1)
	st2 := Compute(pod, rs(), in, at(20))
	if !Equal(st2, pod.Status) || !Equal(st2, st1) {
		t.Errorf("recomputed status differs:\n%+v\n%+v", st2, pod.Status)
	}
	check(st2, transitions(st1))

	// The container runs at 30s: only the conditions that changed move.
	pod.Status = apiRoundTrip(t, st2)
	st3 := Compute(pod, rs(running("app", 0, at(25))), in, at(30))
	if Equal(st3, pod.Status) {
		t.Errorf("a running container did not change the status")
	}
	check(st3, map[v1.PodConditionType]time.Time{
		v1.PodScheduled: scheduled.Time, v1.PodReady: sec(30), v1.ContainersReady: sec(30),
		v1.PodInitialized: sec(10), v1.PodReadyToStartContainers: sec(10),
	})

	// A reason change alone (ContainerCreating → ErrImagePull at 40s) keeps
	// the condition times.
	pod.Status = apiRoundTrip(t, st1)
	st4 := Compute(pod, rs(), waitingInput(in, "app", ReasonErrImagePull, "boom"), at(40))
	check(st4, transitions(st1))
}

func waitingInput(in Input, name, reason, msg string) Input {
	in.Waiting = map[string]Waiting{name: {Reason: reason, Message: msg}}
	return in
}

func TestComputeInitializedOnceAppStarted(t *testing.T) {
	// The init containers' statuses are gone (not in the runtime, not in
	// the API) but an app container ran: the pod initialized once.
	pod := statusPod(v1.RestartPolicyAlways, []string{"i1"}, []string{"app"})
	st := Compute(pod, rs(running("app", 0, at(1))), Input{SandboxReady: true}, at(50))
	if c := findCondition(st.Conditions, v1.PodInitialized); c == nil || c.Status != v1.ConditionTrue || c.Reason != "" {
		t.Errorf("Initialized = %+v, want True", c)
	}
}

func TestComputeKeepsForeignConditions(t *testing.T) {
	pod := statusPod(v1.RestartPolicyAlways, nil, []string{"app"})
	gate := v1.PodCondition{Type: "example.com/gate", Status: v1.ConditionTrue, LastTransitionTime: metav1.NewTime(time.Unix(at(-5).Unix(), 0))}
	disruption := v1.PodCondition{Type: v1.DisruptionTarget, Status: v1.ConditionTrue, Reason: "DeletionByTaintManager"}
	pod.Status.Conditions = []v1.PodCondition{gate, {Type: v1.PodReady, Status: v1.ConditionFalse}, disruption}
	st := Compute(pod, rs(running("app", 0, at(1))), Input{SandboxReady: true}, at(50))
	if len(st.Conditions) != 7 || !reflect.DeepEqual(st.Conditions[:2], []v1.PodCondition{gate, disruption}) {
		t.Errorf("conditions = %q; want the gate and DisruptionTarget kept, then ours", describeConditions(st.Conditions))
	}
}

func TestEqual(t *testing.T) {
	base := func() v1.PodStatus {
		pod := statusPod(v1.RestartPolicyAlways, []string{"i1", "i2"}, []string{"a", "b"})
		return Compute(pod, rs(
			exited("i1", 0, 0, "Completed", at(1), at(2)), exited("i2", 0, 0, "Completed", at(2), at(3)),
			running("a", 0, at(4)), exited("b", 0, 1, "Error", at(4), at(5)),
		), Input{SandboxReady: true, HostIP: "10.0.0.5", StartTime: at(0)}, at(10))
	}
	tests := []struct {
		desc   string
		modify func(*v1.PodStatus)
		equal  bool
	}{
		{"identical", func(*v1.PodStatus) {}, true},
		{"sub-second times", func(s *v1.PodStatus) {
			s.StartTime = ptr(metav1.NewTime(s.StartTime.Add(999 * time.Millisecond)))
			s.Conditions[0].LastTransitionTime = metav1.NewTime(s.Conditions[0].LastTransitionTime.Add(500 * time.Millisecond))
			r := s.ContainerStatuses[0].State.Running
			r.StartedAt = metav1.NewTime(r.StartedAt.Add(time.Millisecond))
			term := s.ContainerStatuses[1].State.Terminated
			term.FinishedAt = metav1.NewTime(term.FinishedAt.Add(123 * time.Microsecond))
		}, true},
		{"another time zone", func(s *v1.PodStatus) {
			s.StartTime = ptr(metav1.NewTime(s.StartTime.In(time.FixedZone("X", 3600))))
		}, true},
		{"conditions and statuses reordered", func(s *v1.PodStatus) {
			c := s.Conditions
			c[0], c[len(c)-1] = c[len(c)-1], c[0]
			s.ContainerStatuses[0], s.ContainerStatuses[1] = s.ContainerStatuses[1], s.ContainerStatuses[0]
			s.InitContainerStatuses[0], s.InitContainerStatuses[1] = s.InitContainerStatuses[1], s.InitContainerStatuses[0]
		}, true},
		{"nil and empty lists", func(s *v1.PodStatus) { s.PodIPs = []v1.PodIP{}; s.EphemeralContainerStatuses = []v1.ContainerStatus{} }, true},
		{"a second later", func(s *v1.PodStatus) { s.StartTime = ptr(metav1.NewTime(s.StartTime.Add(time.Second))) }, false},
		{"condition time a second later", func(s *v1.PodStatus) {
			s.Conditions[2].LastTransitionTime = metav1.NewTime(s.Conditions[2].LastTransitionTime.Add(time.Second))
		}, false},
		{"phase", func(s *v1.PodStatus) { s.Phase = v1.PodPending }, false},
		{"restartCount", func(s *v1.PodStatus) { s.ContainerStatuses[1].RestartCount++ }, false},
		{"waiting reason", func(s *v1.PodStatus) {
			s.ContainerStatuses[1].LastTerminationState = s.ContainerStatuses[1].State
			s.ContainerStatuses[1].State = v1.ContainerState{Waiting: &v1.ContainerStateWaiting{Reason: ReasonCrashLoopBackOff}}
		}, false},
		{"condition status", func(s *v1.PodStatus) { s.Conditions[0].Status = v1.ConditionFalse }, false},
		{"condition missing", func(s *v1.PodStatus) { s.Conditions = s.Conditions[1:] }, false},
		{"started", func(s *v1.PodStatus) { s.ContainerStatuses[1].Started = nil }, false},
		{"hostIP", func(s *v1.PodStatus) { s.HostIP = "10.0.0.6" }, false},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			a, b := base(), base()
			tc.modify(&b)
			if got := Equal(a, b); got != tc.equal {
				t.Errorf("Equal = %t, want %t", got, tc.equal)
			}
			if got := Equal(b, a); got != tc.equal {
				t.Errorf("Equal (swapped) = %t, want %t", got, tc.equal)
			}
			if !reflect.DeepEqual(a, base()) {
				t.Errorf("Equal modified its argument")
			}
		})
	}
}

func TestEqualProbeTime(t *testing.T) {
	a := v1.PodStatus{Conditions: []v1.PodCondition{{Type: "example.com/probed", LastProbeTime: metav1.NewTime(at(1))}}}
	b := *a.DeepCopy()
	b.Conditions[0].LastProbeTime = metav1.NewTime(at(1).Add(500 * time.Millisecond))
	if !Equal(a, b) {
		t.Errorf("Equal = false for lastProbeTimes in the same second")
	}
	b.Conditions[0].LastProbeTime = metav1.NewTime(at(2))
	if Equal(a, b) {
		t.Errorf("Equal = true for lastProbeTimes a second apart")
	}
}

func TestPodIsTerminal(t *testing.T) {
	for phase, want := range map[v1.PodPhase]bool{
		v1.PodPending: false, v1.PodRunning: false, v1.PodUnknown: false, "": false,
		v1.PodSucceeded: true, v1.PodFailed: true,
	} {
		if got := PodIsTerminal(v1.PodStatus{Phase: phase}); got != want {
			t.Errorf("PodIsTerminal(%q) = %t, want %t", phase, got, want)
		}
	}
}

func TestPodQOSClass(t *testing.T) {
	res := func(spec string) v1.ResourceRequirements {
		// "req:cpu=100m,memory=1Gi lim:cpu=100m"
		r := v1.ResourceRequirements{}
		for _, part := range strings.Fields(spec) {
			kind, list, _ := strings.Cut(part, ":")
			l := v1.ResourceList{}
			for _, kv := range strings.Split(list, ",") {
				k, v, _ := strings.Cut(kv, "=")
				l[v1.ResourceName(k)] = resource.MustParse(v)
			}
			if kind == "req" {
				r.Requests = l
			} else {
				r.Limits = l
			}
		}
		return r
	}
	tests := []struct {
		desc string
		init []string
		app  []string
		want v1.PodQOSClass
	}{
		{"nothing set", nil, []string{"", ""}, v1.PodQOSBestEffort},
		{"only other resources", nil, []string{"req:ephemeral-storage=1Gi"}, v1.PodQOSBestEffort},
		{"limits equal requests", nil, []string{"req:cpu=1,memory=1Gi lim:cpu=1000m,memory=1024Mi"}, v1.PodQOSGuaranteed},
		{"limits only (requests default to them)", nil, []string{"lim:cpu=1,memory=1Gi"}, v1.PodQOSGuaranteed},
		{"init container too", []string{"lim:cpu=1,memory=1Gi"}, []string{"lim:cpu=2,memory=1Gi"}, v1.PodQOSGuaranteed},
		{"init container without limits", []string{""}, []string{"lim:cpu=2,memory=1Gi"}, v1.PodQOSBurstable},
		{"requests below limits", nil, []string{"req:cpu=500m,memory=1Gi lim:cpu=1,memory=1Gi"}, v1.PodQOSBurstable},
		{"no memory limit", nil, []string{"lim:cpu=1"}, v1.PodQOSBurstable},
		{"a request only", nil, []string{"req:memory=1Gi"}, v1.PodQOSBurstable},
		{"one container without anything", nil, []string{"lim:cpu=1,memory=1Gi", ""}, v1.PodQOSBurstable},
		{"zero limits do not count", nil, []string{"lim:cpu=0,memory=0"}, v1.PodQOSBestEffort},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			pod := &v1.Pod{}
			for i, r := range tc.init {
				pod.Spec.InitContainers = append(pod.Spec.InitContainers, v1.Container{Name: fmt.Sprint("i", i), Resources: res(r)})
			}
			for i, r := range tc.app {
				pod.Spec.Containers = append(pod.Spec.Containers, v1.Container{Name: fmt.Sprint("c", i), Resources: res(r)})
			}
			if got := kubetypes.PodQOSClass(pod); got != tc.want {
				t.Errorf("PodQOSClass = %q, want %q", got, tc.want)
			}
			if got := Compute(pod, rs(), Input{}, at(0)).QOSClass; got != tc.want {
				t.Errorf("Compute qosClass = %q, want %q", got, tc.want)
			}
			pod.Status.QOSClass = "Kept"
			if got := Compute(pod, rs(), Input{}, at(0)).QOSClass; got != "Kept" {
				t.Errorf("Compute changed an existing qosClass to %q", got)
			}
		})
	}
}

// As kubelet 1.34 (PodObservedGenerationTracking, beta and on): the status
// and every condition the agent sets carry the pod's generation; a
// condition another component set keeps its own.
func TestComputeObservedGeneration(t *testing.T) {
	pod := statusPod(v1.RestartPolicyAlways, nil, []string{"app"})
	pod.Generation = 3
	gate := v1.PodCondition{Type: "example.com/gate", Status: v1.ConditionTrue, ObservedGeneration: 1}
	pod.Status.Conditions = []v1.PodCondition{gate}
	st := Compute(pod, rs(running("app", 0, at(1))), Input{SandboxReady: true, Disruption: "node shutdown"}, at(50))
	if st.ObservedGeneration != 3 {
		t.Errorf("status observedGeneration %d, want 3", st.ObservedGeneration)
	}
	for _, c := range st.Conditions {
		want := int64(3)
		if c.Type == gate.Type {
			want = 1
		}
		if c.ObservedGeneration != want {
			t.Errorf("condition %s observedGeneration %d, want %d", c.Type, c.ObservedGeneration, want)
		}
	}
	if findCondition(st.Conditions, v1.DisruptionTarget) == nil {
		t.Error("no DisruptionTarget condition")
	}
	rej := Compute(pod, rs(), Input{Rejected: true, RejectReason: "OutOfcpu", RejectMessage: "m"}, at(50))
	if rej.ObservedGeneration != 3 {
		t.Errorf("rejected pod's observedGeneration %d, want 3", rej.ObservedGeneration)
	}
}
