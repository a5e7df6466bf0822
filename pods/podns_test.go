package pods

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	utilptr "k8s.io/utils/ptr"

	"github.com/nodeagent/nodeagent/internal/netns"
	"github.com/nodeagent/nodeagent/kubetypes"
	"github.com/nodeagent/nodeagent/runtime"
)

func TestPodNamespacesFor(t *testing.T) {
	share := utilptr.To(true)
	for _, tc := range []struct {
		desc string
		spec v1.PodSpec
		want podNSPlan
	}{
		{"default: pod IPC and UTS, own PID", v1.PodSpec{}, podNSPlan{ns: netns.PodNamespaces{IPC: true, UTS: true, Hostname: "h"}}},
		{"hostNetwork: the host's UTS", v1.PodSpec{HostNetwork: true}, podNSPlan{ns: netns.PodNamespaces{IPC: true}}},
		{"hostIPC: the host's IPC", v1.PodSpec{HostIPC: true}, podNSPlan{ns: netns.PodNamespaces{UTS: true, Hostname: "h"}}},
		{"shareProcessNamespace: a pause", v1.PodSpec{ShareProcessNamespace: share}, podNSPlan{ns: netns.PodNamespaces{IPC: true, UTS: true, Hostname: "h"}, pause: true}},
		{"shareProcessNamespace false", v1.PodSpec{ShareProcessNamespace: utilptr.To(false)}, podNSPlan{ns: netns.PodNamespaces{IPC: true, UTS: true, Hostname: "h"}}},
		{"hostPID wins", v1.PodSpec{ShareProcessNamespace: share, HostPID: true, HostIPC: true, HostNetwork: true}, podNSPlan{}},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			if got := podNamespacesFor(&v1.Pod{Spec: tc.spec}, "h"); got != tc.want {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestPauseDecision(t *testing.T) {
	run := func(id string, pid uint32) runtime.Pause {
		return runtime.Pause{ID: id, State: runtime.StateRunning, Pid: pid}
	}
	dead := func(id string) runtime.Pause { return runtime.Pause{ID: id, State: runtime.StateExited} }
	for _, tc := range []struct {
		desc   string
		ps     []runtime.Pause
		use    string
		remove []string
	}{
		{"none: start one", nil, "", nil},
		{"running: keep it", []runtime.Pause{run("a", 10)}, "a", nil},
		{"exited: remove, start one", []runtime.Pause{dead("a")}, "", []string{"a"}},
		{"duplicates: keep the first running", []runtime.Pause{run("a", 10), dead("b"), run("c", 11)}, "a", []string{"b", "c"}},
		{"running without a pid is not usable", []runtime.Pause{{ID: "a", State: runtime.StateRunning}}, "", []string{"a"}},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			use, remove := pauseDecision(tc.ps)
			got := ""
			if use != nil {
				got = use.ID
			}
			if got != tc.use || fmt.Sprint(remove) != fmt.Sprint(tc.remove) {
				t.Errorf("use %q remove %v, want %q %v", got, remove, tc.use, tc.remove)
			}
		})
	}
}

type fakePodNS struct {
	created map[string]netns.PodNamespaces
	removed []string
}

func (f *fakePodNS) Create(dir string, o netns.PodNamespaces) error {
	f.created[dir] = o
	return nil
}
func (f *fakePodNS) Remove(dir string) error { f.removed = append(f.removed, dir); return nil }

type fakePauses struct {
	mu      sync.Mutex
	ps      []runtime.Pause
	specs   []runtime.PauseSpec
	stopped []string
	next    uint32
}

func (f *fakePauses) CreatePause(_ context.Context, s runtime.PauseSpec) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.next++
	id := fmt.Sprintf("pause-%d", f.next)
	f.ps = append(f.ps, runtime.Pause{ID: id, Pod: s.Pod, State: runtime.StateRunning, Pid: 1000 + f.next})
	f.specs = append(f.specs, s)
	return id, nil
}
func (f *fakePauses) ListPauses(_ context.Context, uid types.UID) ([]runtime.Pause, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []runtime.Pause
	for _, p := range f.ps {
		if uid == "" || p.Pod.UID == uid {
			out = append(out, p)
		}
	}
	return out, nil
}
func (f *fakePauses) StopContainer(_ context.Context, id string, _ time.Duration) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.stopped = append(f.stopped, id)
	for i := range f.ps {
		if f.ps[i].ID == id {
			f.ps[i].State, f.ps[i].Pid = runtime.StateExited, 0
		}
	}
	return nil
}
func (f *fakePauses) RemoveContainer(_ context.Context, id string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	for i := range f.ps {
		if f.ps[i].ID == id {
			f.ps = append(f.ps[:i], f.ps[i+1:]...)
			break
		}
	}
	return nil
}

// A pod's containers join its IPC and UTS namespaces; a
// shareProcessNamespace pod gets one pause whose PID namespace its
// containers join, found again by a new worker (an agent restart),
// replaced when it died, and removed with the pod's namespaces.
func TestWorkerSharesPodNamespaces(t *testing.T) {
	e := newWorkerEnv(t)
	fns, fp := &fakePodNS{created: map[string]netns.PodNamespaces{}}, &fakePauses{}
	e.deps.podNS, e.deps.pauses, e.deps.podNSDir = fns, fp, t.TempDir()

	plain := testPod("plain", v1.RestartPolicyAlways, ctr("a"))
	e.settle(e.worker(plain, kubetypes.SourceAPI))
	dir := filepath.Join(e.deps.podNSDir, string(plain.UID))
	if o := fns.created[dir]; !o.IPC || !o.UTS || o.Hostname != "plain" {
		t.Errorf("namespaces of a plain pod: %+v", o)
	}
	for _, s := range e.rt.specs {
		if s.PodNamespaces.IPCPath != filepath.Join(dir, "ipc") || s.PodNamespaces.UTSPath != filepath.Join(dir, "uts") || s.PodNamespaces.ShmPath != filepath.Join(dir, "shm") || s.Security.PIDNSPath != "" {
			t.Errorf("container of a plain pod: %+v %+v", s.PodNamespaces, s.Security)
		}
	}
	if len(fp.specs) != 0 {
		t.Fatalf("a pause for a pod without shareProcessNamespace: %+v", fp.specs)
	}

	pod := testPod("shared", v1.RestartPolicyAlways, ctr("a"), ctr("b"))
	pod.Spec.ShareProcessNamespace = utilptr.To(true)
	w := e.worker(pod, kubetypes.SourceAPI)
	e.settle(w)
	if len(fp.ps) != 1 || fp.specs[0].NetNSPath != w.netnsPath() || fp.specs[0].PodNamespaces.IPCPath == "" {
		t.Fatalf("pauses %+v specs %+v", fp.ps, fp.specs)
	}
	pidNS := fmt.Sprintf("/proc/%d/ns/pid", fp.ps[0].Pid)
	n := 0
	for _, s := range e.rt.specs {
		if s.Pod.UID == pod.UID {
			n++
			if s.Security.PIDNSPath != pidNS {
				t.Errorf("container %s joins PID namespace %q, want %q", s.Name, s.Security.PIDNSPath, pidNS)
			}
		}
	}
	if n != 2 {
		t.Fatalf("%d containers of the shared pod", n)
	}
	// An agent restart: a new worker finds the pause.
	e.settle(e.worker(pod, kubetypes.SourceAPI))
	if len(fp.specs) != 1 {
		t.Errorf("a second pause after a restart: %+v", fp.ps)
	}
	// The pause died, and the kernel killed the namespace's processes:
	// a new pause for the restarted containers.
	fp.ps[0].State, fp.ps[0].Pid = runtime.StateExited, 0
	// (running() is keyed by container name, and the plain pod has an "a"
	// too: walk the pod's own containers.)
	for _, c := range podRunning(e.rt, pod.UID) {
		e.rt.exit(c.ID, 137)
	}
	e.settle(w)
	if len(fp.ps) != 1 || fp.ps[0].ID != "pause-2" || fp.ps[0].State != runtime.StateRunning {
		t.Errorf("after the pause died: %+v", fp.ps)
	}
	pidNS = fmt.Sprintf("/proc/%d/ns/pid", fp.ps[0].Pid)
	restarted := podRunning(e.rt, pod.UID)
	if len(restarted) != 2 {
		t.Errorf("%d containers of the shared pod running after the pause died, want 2", len(restarted))
	}
	for _, c := range restarted {
		if s := e.rt.specs[c.ID]; s.Security.PIDNSPath != pidNS {
			t.Errorf("restarted %s joins %q, want the new pause's %q", c.Name, s.Security.PIDNSPath, pidNS)
		}
	}
	// A finished pod's pause is stopped (kubelet stops its sandbox); a
	// finished pod starts none.
	w.terminal.Store(true)
	e.settle(w)
	if len(fp.ps) != 0 || len(fp.stopped) != 1 {
		t.Errorf("a terminal pod's pauses %+v, stopped %v", fp.ps, fp.stopped)
	}
	if err := w.ns.ensurePause(context.Background(), pod, w.names.utsHostname, w.netnsPath(), false); err != nil || len(fp.ps) != 0 {
		t.Errorf("ensurePause without a container to start: %v, pauses %+v", err, fp.ps)
	}
	w.terminal.Store(false)
	w.ended.released = false
	fp.stopped, fns.removed = nil, nil
	if _, err := fp.CreatePause(context.Background(), runtime.PauseSpec{Pod: runtime.PodRef{UID: pod.UID}}); err != nil {
		t.Fatal(err)
	}
	// Removed with the pod.
	w.remove()
	if _, done := e.settle(w); !done {
		t.Fatal("the worker did not end")
	}
	if len(fp.ps) != 0 || len(fp.stopped) != 1 {
		t.Errorf("pauses left %+v, stopped %v", fp.ps, fp.stopped)
	}
	if got := fns.removed; len(got) != 1 || got[0] != filepath.Join(e.deps.podNSDir, string(pod.UID)) {
		t.Errorf("namespace directories removed: %v", got)
	}
}

// podRunning lists the running containers of one pod in the fake runtime.
func podRunning(r *fakeRuntime, uid types.UID) []runtime.Container {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []runtime.Container
	for _, c := range r.cs {
		if c.Pod.UID == uid && c.State == runtime.StateRunning {
			out = append(out, *c)
		}
	}
	return out
}

// A shareProcessNamespace pod the agent stops itself (here an eviction)
// is not synced again, yet its pause is stopped and removed once its
// containers have stopped, as kubelet stops a finished pod's sandbox.
func TestAgentStoppedPodLosesItsPause(t *testing.T) {
	e := newWorkerEnv(t)
	fns, fp := &fakePodNS{created: map[string]netns.PodNamespaces{}}, &fakePauses{}
	e.deps.podNS, e.deps.pauses, e.deps.podNSDir = fns, fp, t.TempDir()
	pod := testPod("evicted", v1.RestartPolicyAlways, ctr("a"))
	pod.Spec.ShareProcessNamespace = utilptr.To(true)
	w := e.worker(pod, kubetypes.SourceAPI)
	e.settle(w)
	if len(fp.ps) != 1 {
		t.Fatalf("pauses %+v", fp.ps)
	}
	w.terminate(newTermination(termEviction, time.Second, termStatus{reason: "Evicted", message: "low", disruption: true}))
	e.settle(w)
	if len(fp.ps) != 0 || len(fp.stopped) != 1 {
		t.Errorf("after the eviction: pauses %+v stopped %v, want the pause stopped and removed", fp.ps, fp.stopped)
	}
}
