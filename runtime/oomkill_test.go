package runtime

import (
	"bytes"
	"context"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	tasktypes "github.com/containerd/containerd/api/types/task"
	"github.com/containerd/containerd/containers"
	"github.com/containerd/containerd/namespaces"
	"github.com/containerd/containerd/oci"
)

// fakeCgroup writes dir/memory.events under root with the given oom_kill
// (the other keys as the kernel writes them).
func fakeCgroup(t *testing.T, root, dir string, oomKill int) {
	t.Helper()
	d := filepath.Join(root, dir)
	if err := os.MkdirAll(d, 0o755); err != nil {
		t.Fatal(err)
	}
	content := "low 0\nhigh 0\nmax 12\noom 3\noom_kill " + strconv.Itoa(oomKill) + "\noom_group_kill 0\n"
	if err := os.WriteFile(filepath.Join(d, "memory.events"), []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestOOMKills(t *testing.T) {
	root := t.TempDir()
	fakeCgroup(t, root, "a", 7)
	if n, ok := oomKills(root, "/a"); !ok || n != 7 {
		t.Errorf("oomKills = %d, %v; want 7, true", n, ok)
	}
	if _, ok := oomKills(root, "/missing"); ok {
		t.Error("a missing cgroup read as ok")
	}
	// A memory.events without the counter (a kernel before 4.13).
	if err := os.MkdirAll(filepath.Join(root, "old"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "old", "memory.events"), []byte("low 0\nhigh 0\nmax 1\noom 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, ok := oomKills(root, "/old"); ok {
		t.Error("memory.events without oom_kill read as ok")
	}
}

// The pod's cgroup is the container cgroup's parent when that is the pod's
// own, in kubelet's layout with either driver or the runtime's default
// parent; not when containers share a parent (cgroupsPerQOS false).
func TestPodCgroupDir(t *testing.T) {
	const uid = "0a1b-2c3d"
	for _, tc := range []struct{ cgroupsPath, want string }{
		{"kubepods-burstable-pod0a1b_2c3d.slice:cri-containerd:abc",
			"/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod0a1b_2c3d.slice"},
		{"kubepods-pod0a1b_2c3d.slice:cri-containerd:abc", "/kubepods.slice/kubepods-pod0a1b_2c3d.slice"},
		{"/kubepods/burstable/pod0a1b-2c3d/abc", "/kubepods/burstable/pod0a1b-2c3d"},
		{"/nodeagent/0a1b-2c3d/abc", "/nodeagent/0a1b-2c3d"},
		{"/kube/abc", ""},
		{"", ""},
	} {
		if got := podCgroupDir(tc.cgroupsPath, uid); got != tc.want {
			t.Errorf("podCgroupDir(%q) = %q, want %q", tc.cgroupsPath, got, tc.want)
		}
	}
}

// The decision from the cgroup files, for a container whose init process
// exited by SIGKILL. It reads only the files and the containers' labels,
// so an agent restarted between the start and the exit decides the same.
func TestOOMKilledFromCgroups(t *testing.T) {
	const (
		uid   = "0a1b-2c3d"
		pod   = "kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod0a1b_2c3d.slice"
		scope = pod + "/cri-containerd-abc.scope"
		cgfs  = "kubepods/burstable/pod0a1b-2c3d"
	)
	systemd := map[string]string{LabelPodUID: uid, labelCgroupsPath: "kubepods-burstable-pod0a1b_2c3d.slice:cri-containerd:abc"}
	cgroupfs := map[string]string{LabelPodUID: uid, labelCgroupsPath: "/" + cgfs + "/abc"}
	with := func(l map[string]string, kv ...string) map[string]string {
		out := maps.Clone(l)
		for i := 0; i < len(kv); i += 2 {
			out[kv[i]] = kv[i+1]
		}
		return out
	}
	for _, tc := range []struct {
		desc   string
		files  map[string]int // cgroup dir -> oom_kill
		labels map[string]string
		seen   []uint64
		oom    bool
		mark   string // labelPodOOMKillsSeen recorded, "" none
	}{
		{"scope gone (systemd removed it), the pod's count rose since the start",
			map[string]int{pod: 3}, with(systemd, labelPodOOMKillsAtStart, "2"), nil, true, "3"},
		{"scope gone, the pod's count did not rise: a SIGKILL from elsewhere",
			map[string]int{pod: 2}, with(systemd, labelPodOOMKillsAtStart, "2"), nil, false, ""},
		{"scope gone, the rise was already put down to another container",
			map[string]int{pod: 3}, with(systemd, labelPodOOMKillsAtStart, "2"), []uint64{3}, false, ""},
		{"scope gone, a second kill after another container's",
			map[string]int{pod: 4}, with(systemd, labelPodOOMKillsAtStart, "0"), []uint64{3, 1}, true, "4"},
		{"scope gone, kills before the container started do not count",
			map[string]int{pod: 5}, with(systemd, labelPodOOMKillsAtStart, "5"), nil, false, ""},
		{"the scope is still there: its own count decides (killed)",
			map[string]int{pod: 1, scope: 1}, with(systemd, labelPodOOMKillsAtStart, "0"), []uint64{1}, true, "1"},
		{"cgroupfs: the container's cgroup stays until its task is deleted; another container's kill is not this one's",
			map[string]int{cgfs: 1, cgfs + "/abc": 0}, with(cgroupfs, labelPodOOMKillsAtStart, "0"), nil, false, ""},
		{"cgroupfs: its own count says killed",
			map[string]int{cgfs: 2, cgfs + "/abc": 2}, with(cgroupfs, labelPodOOMKillsAtStart, "0"), nil, true, "2"},
		{"no count at the start (an older agent started it): undecided",
			map[string]int{pod: 3}, systemd, nil, false, ""},
		{"no pod cgroup to read and no scope: undecided",
			map[string]int{}, with(systemd, labelPodOOMKillsAtStart, "0"), nil, false, ""},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			root := t.TempDir()
			for dir, n := range tc.files {
				fakeCgroup(t, root, dir, n)
			}
			oom, set := oomKilledFromCgroups(root, tc.labels, tc.seen)
			if oom != tc.oom {
				t.Fatalf("OOM-killed = %v, want %v", oom, tc.oom)
			}
			if !oom {
				if set != nil {
					t.Errorf("labels %v for a container not OOM-killed", set)
				}
				return
			}
			if set[labelOOMKilled] != "true" || set[labelPodOOMKillsSeen] != tc.mark {
				t.Errorf("labels %v, want %s=true and %s=%q", set, labelOOMKilled, labelPodOOMKillsSeen, tc.mark)
			}
		})
	}
}

// A second container's exit after the first was attributed: the labels
// the first decision recorded keep the same kill from being counted twice,
// while a second kill in the pod is the second container's.
func TestOOMKillAttributionAcrossContainers(t *testing.T) {
	const uid = "u-1"
	root := t.TempDir()
	pod := "kubepods.slice/kubepods-podu_1.slice"
	a := map[string]string{LabelPodUID: uid, labelCgroupsPath: "kubepods-podu_1.slice:cri-containerd:a", labelPodOOMKillsAtStart: "0"}
	b := map[string]string{LabelPodUID: uid, labelCgroupsPath: "kubepods-podu_1.slice:cri-containerd:b", labelPodOOMKillsAtStart: "0"}
	fakeCgroup(t, root, pod, 1) // a's group kill (one process)
	oom, set := oomKilledFromCgroups(root, a, nil)
	if !oom {
		t.Fatal("a: not OOM-killed")
	}
	var seen []uint64
	if set[labelPodOOMKillsSeen] != "1" {
		t.Fatalf("a: mark %q, want 1", set[labelPodOOMKillsSeen])
	}
	seen = append(seen, 1)
	if oom, _ := oomKilledFromCgroups(root, b, seen); oom {
		t.Error("b (SIGKILLed by someone else, no new kill): OOM-killed")
	}
	fakeCgroup(t, root, pod, 2) // now b is OOM-killed too
	if oom, _ := oomKilledFromCgroups(root, b, seen); !oom {
		t.Error("b after a kill of its own: not OOM-killed")
	}
}

// inferOOM decides only for a SIGKILL exit on cgroup v2 that the agent
// did not cause and that is not decided yet; the gates come before any
// call to containerd (the Runtime here has no client).
func TestInferOOMGates(t *testing.T) {
	labels := map[string]string{LabelPodUID: "u", labelCgroupsPath: "kubepods-podu.slice:cri-containerd:c", labelPodOOMKillsAtStart: "0"}
	with := func(k, v string) map[string]string { l := maps.Clone(labels); l[k] = v; return l }
	stopped := &Runtime{unified: true}
	stopped.stopping.Store("c", struct{}{})
	for _, tc := range []struct {
		desc   string
		r      *Runtime
		labels map[string]string
		code   int32
	}{
		{"cgroup v1", &Runtime{unified: false}, labels, 137},
		{"exit code 1", &Runtime{unified: true}, labels, 1},
		{"exit code 0", &Runtime{unified: true}, labels, 0},
		{"already OOMKilled (TaskOOM came first)", &Runtime{unified: true}, with(labelOOMKilled, "true"), 137},
		{"exit already recorded", &Runtime{unified: true}, with(labelExitCode, "137"), 137},
		{"no count at the start", &Runtime{unified: true}, map[string]string{LabelPodUID: "u"}, 137},
		{"stopped by the agent", stopped, labels, 137},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			if set, _ := tc.r.inferOOM(context.Background(), "c", tc.labels, tc.code); set != nil {
				t.Errorf("inferOOM = %v, want nothing", set)
			}
		})
	}
}

func TestStartOOMLabels(t *testing.T) {
	root := t.TempDir()
	fakeCgroup(t, root, "kubepods.slice/kubepods-podu.slice", 4)
	labels := map[string]string{LabelPodUID: "u", labelCgroupsPath: "kubepods-podu.slice:cri-containerd:c"}
	r := &Runtime{unified: true, cgroupRoot: root}
	if got := r.startOOMLabels(labels); got[labelPodOOMKillsAtStart] != "4" {
		t.Errorf("v2: %v, want %s=4", got, labelPodOOMKillsAtStart)
	}
	r.unified = false
	if got := r.startOOMLabels(labels); got != nil {
		t.Errorf("v1: %v, want none", got)
	}
	r.unified = true
	if got := r.startOOMLabels(map[string]string{LabelPodUID: "x", labelCgroupsPath: "/kube/c"}); got != nil {
		t.Errorf("no pod cgroup of its own: %v, want none", got)
	}
}

// kubelet's singleProcessOOMKill: on cgroup v2, false puts
// memory.oom.group=1 in the container's unified resources (beside
// memory.swap.max); true, and cgroup v1, leave it out.
func TestOOMGroupOpts(t *testing.T) {
	zero := int64(0)
	for _, tc := range []struct {
		desc                   string
		unified, singleProcess bool
		want                   string
	}{
		{"v2, singleProcessOOMKill false (kubelet's default on v2)", true, false, "1"},
		{"v2, singleProcessOOMKill true", true, true, ""},
		{"v1", false, false, ""},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			ctx := namespaces.WithNamespace(context.Background(), "test")
			opts := append(resourceSpecOpts(Resources{MemoryLimitBytes: 64 << 20, SwapMax: &zero}, tc.unified), oomGroupOpts(tc.unified, tc.singleProcess)...)
			sp, err := oci.GenerateSpec(ctx, nil, &containers.Container{ID: "c"}, opts...)
			if err != nil {
				t.Fatal(err)
			}
			got := sp.Linux.Resources.Unified["memory.oom.group"]
			if got != tc.want {
				t.Errorf("memory.oom.group = %q, want %q", got, tc.want)
			}
			if tc.unified && sp.Linux.Resources.Unified["memory.swap.max"] != "0" {
				t.Errorf("memory.swap.max lost: unified %v", sp.Linux.Resources.Unified)
			}
		})
	}
}

// A stopped task seen before the exit recorder labelled it (a relist or
// the PLEG's cgroup event beat containerd's TaskExit to the agent; the
// guest's "oomlost" check once got Error 137 this way) is reported as
// markExit will record it: OOMKilled when the pod's memory.events counted
// a kill since the start; an exit already recorded keeps its reason, and
// a SIGKILL without a new kill stays Error.
func TestContainerFromDecidesAnUnrecordedOOMKill(t *testing.T) {
	const uid = "u-2"
	root := t.TempDir()
	pod := "kubepods.slice/kubepods-podu_2.slice"
	fakeCgroup(t, root, pod, 1) // the container's scope is gone; the pod slice counted the kill
	r := &Runtime{unified: true, cgroupRoot: root}
	var listed int
	r.listPod = func(_ context.Context, u string) ([]containers.Container, error) {
		listed++
		if u != uid {
			t.Errorf("listed pod %q, want %q", u, uid)
		}
		return nil, nil
	}
	labels := func(extra map[string]string) map[string]string {
		l := map[string]string{LabelPodUID: uid, labelCgroupsPath: "kubepods-podu_2.slice:cri-containerd:c",
			labelPodOOMKillsAtStart: "0", labelStartedAt: formatTime(time.Now())}
		maps.Copy(l, extra)
		return l
	}
	for _, tc := range []struct {
		desc   string
		labels map[string]string
		code   uint32
		want   string
	}{
		{"SIGKILL, a kill counted since the start, exit not recorded yet", labels(nil), 137, ReasonOOMKilled},
		{"SIGKILL, no kill since the start", labels(map[string]string{labelPodOOMKillsAtStart: "1"}), 137, ReasonError},
		{"exit 1", labels(nil), 1, ReasonError},
		{"exit recorded (by markExit, without an OOM kill)", labels(map[string]string{labelExitCode: "137", labelReason: ReasonError}), 137, ReasonError},
		{"TaskOOM seen", labels(map[string]string{labelOOMKilled: "true", labelPodOOMKillsAtStart: "1"}), 137, ReasonOOMKilled},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			task := &tasktypes.Process{ID: "c", Status: tasktypes.Status_STOPPED, ExitStatus: tc.code}
			got := r.containerFrom(context.Background(), &containers.Container{ID: "c", Labels: tc.labels}, task)
			if got.State != StateExited || got.Reason != tc.want {
				t.Errorf("state %v reason %q, want exited %q", got.State, got.Reason, tc.want)
			}
		})
	}
	if listed == 0 {
		t.Error("the pod's containers were never listed for their marks")
	}
}

// The exit recorder and StopContainer can both decide one exit (each
// decides the same way): the journal says "OOM-killed" once for it, and
// again for another container.
func TestDecideOOMLogsOnce(t *testing.T) {
	root := t.TempDir()
	fakeCgroup(t, root, "kubepods.slice/kubepods-podu_3.slice", 1)
	var buf bytes.Buffer
	r := &Runtime{unified: true, cgroupRoot: root, opts: Options{Logger: slog.New(slog.NewTextHandler(&buf, nil))}}
	r.listPod = func(context.Context, string) ([]containers.Container, error) { return nil, nil }
	labels := map[string]string{LabelPodUID: "u-3", labelCgroupsPath: "kubepods-podu_3.slice:cri-containerd:c", labelPodOOMKillsAtStart: "0"}
	for i := 0; i < 2; i++ {
		if set := r.decideOOM(context.Background(), "c", labels, 137); set[labelOOMKilled] != "true" {
			t.Fatalf("decision %d: %v, want OOMKilled", i+1, set)
		}
	}
	if n := strings.Count(buf.String(), "container OOM-killed"); n != 1 {
		t.Errorf("%d OOM-killed lines for one exit, want 1:\n%s", n, buf.String())
	}
	r.decideOOM(context.Background(), "d", labels, 137)
	if n := strings.Count(buf.String(), "container OOM-killed"); n != 2 {
		t.Errorf("%d OOM-killed lines after a second container's, want 2:\n%s", n, buf.String())
	}
}
