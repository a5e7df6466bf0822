package pods

import (
	"path/filepath"
	"slices"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/nodeagent/nodeagent/kubetypes"
	"github.com/nodeagent/nodeagent/pleg"
	"github.com/nodeagent/nodeagent/runtime"
)

func TestComputePlanEphemeral(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	now := t0.Add(time.Hour)
	withDebug := func(p *v1.Pod, target string) *v1.Pod {
		p.Spec.EphemeralContainers = append(p.Spec.EphemeralContainers, v1.EphemeralContainer{
			EphemeralContainerCommon: v1.EphemeralContainerCommon{Name: "debug", Image: "img", Stdin: true, TTY: true},
			TargetContainerName:      target,
		})
		return p
	}
	running := func(p *v1.Pod, name string, pid uint32) runtime.Container {
		c := rc(p, name, 0, runtime.StateRunning, 0, t0, time.Time{})
		c.Pid = pid
		return c
	}
	tests := []struct {
		name      string
		pod       *v1.Pod
		rs        func(*v1.Pod) []runtime.Container
		starts    []string
		kills     []string
		pidNSOf   uint32
		waitingOn bool
	}{{
		name:   "started once it appears",
		pod:    withDebug(planPod(v1.RestartPolicyAlways, nil, "app"), ""),
		rs:     func(p *v1.Pod) []runtime.Container { return []runtime.Container{running(p, "app", 42)} },
		starts: []string{"debug#0"},
	}, {
		name: "started while init containers run",
		pod:  withDebug(planPod(v1.RestartPolicyAlways, []string{"init"}, "app"), ""),
		rs: func(p *v1.Pod) []runtime.Container {
			return []runtime.Container{running(p, "init", 41)}
		},
		starts: []string{"debug#0"},
	}, {
		name: "never restarted, whatever the restart policy",
		pod:  withDebug(planPod(v1.RestartPolicyAlways, nil, "app"), ""),
		rs: func(p *v1.Pod) []runtime.Container {
			return []runtime.Container{running(p, "app", 42), rc(p, "debug", 0, runtime.StateExited, 1, t0, t0)}
		},
	}, {
		name: "running: not killed as not in the spec",
		pod:  withDebug(planPod(v1.RestartPolicyAlways, nil, "app"), ""),
		rs: func(p *v1.Pod) []runtime.Container {
			return []runtime.Container{running(p, "app", 42), running(p, "debug", 43)}
		},
	}, {
		name:    "joins its target's PID namespace",
		pod:     withDebug(planPod(v1.RestartPolicyAlways, nil, "app"), "app"),
		rs:      func(p *v1.Pod) []runtime.Container { return []runtime.Container{running(p, "app", 42)} },
		starts:  []string{"debug#0"},
		pidNSOf: 42,
	}, {
		name:      "waits for its target to run",
		pod:       withDebug(planPod(v1.RestartPolicyAlways, nil, "app"), "app"),
		rs:        func(p *v1.Pod) []runtime.Container { return nil },
		starts:    []string{"app#0"},
		waitingOn: true,
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rs := pleg.PodStatus{Containers: tt.rs(tt.pod)}
			p := computePlan(tt.pod, rs, nil, now)
			starts, kills, _ := summary(p)
			if !slices.Equal(starts, tt.starts) || !slices.Equal(kills, tt.kills) {
				t.Fatalf("starts %v kills %v, want %v %v", starts, kills, tt.starts, tt.kills)
			}
			for _, s := range p.start {
				if s.container.Name == "debug" && (!s.ephemeral || s.pidNSOf != tt.pidNSOf || !s.container.TTY) {
					t.Errorf("start %+v, want ephemeral with pidNSOf %d", s, tt.pidNSOf)
				}
			}
			if _, ok := p.waiting["debug"]; ok != tt.waitingOn {
				t.Errorf("waiting %v, want debug waiting %v", p.waiting, tt.waitingOn)
			}
		})
	}
}

// The worker gives containers their stdin, stdinOnce and tty, with a stdio
// directory under the pod's directory, and starts an ephemeral container
// in its target's PID namespace.
func TestWorkerStdioAndEphemeral(t *testing.T) {
	e := newWorkerEnv(t)
	c := ctr("a")
	c.Stdin, c.StdinOnce, c.TTY = true, true, true
	pod := testPod("stdio", v1.RestartPolicyAlways, c, ctr("b"))
	w := e.worker(pod, kubetypes.SourceAPI)
	e.settle(w)
	byName := map[string]runtime.ContainerSpec{}
	for _, s := range e.rt.specs {
		byName[s.Name] = s
	}
	a, b := byName["a"], byName["b"]
	if !a.Stdin || !a.StdinOnce || !a.TTY || a.StdioDir != filepath.Join(w.podDir(), "stdio") {
		t.Errorf("spec a: stdin %v once %v tty %v dir %q", a.Stdin, a.StdinOnce, a.TTY, a.StdioDir)
	}
	if b.Stdin || b.TTY || b.StdioDir != "" {
		t.Errorf("spec b: stdin %v tty %v dir %q", b.Stdin, b.TTY, b.StdioDir)
	}

	upd := pod.DeepCopy()
	upd.Spec.EphemeralContainers = []v1.EphemeralContainer{{
		EphemeralContainerCommon: v1.EphemeralContainerCommon{Name: "dbg", Image: "busybox:test", Stdin: true, TTY: true},
		TargetContainerName:      "a",
	}}
	w.update(upd)
	e.settle(w)
	var dbg []runtime.ContainerSpec
	for _, s := range e.rt.specs {
		if s.Name == "dbg" {
			dbg = append(dbg, s)
		}
	}
	if len(dbg) != 1 || dbg[0].Security.PIDNSPath != "/proc/42/ns/pid" || !dbg[0].TTY {
		t.Fatalf("ephemeral specs %+v", dbg)
	}
}
