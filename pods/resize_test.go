package pods

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodeagent/nodeagent/cm"
	"github.com/nodeagent/nodeagent/pleg"
	"github.com/nodeagent/nodeagent/pods/resize"
	"github.com/nodeagent/nodeagent/runtime"
)

// fakeResizeCgroups is a pod cgroup in a fake cgroup v1 tree.
type fakeResizeCgroups struct {
	root, dir string
	sets      []cm.ResourceConfig
}

func (f *fakeResizeCgroups) PodDir(*v1.Pod) (string, bool) { return f.dir, f.dir != "" }
func (f *fakeResizeCgroups) SetPod(_ *v1.Pod, rc cm.ResourceConfig) error {
	f.sets = append(f.sets, rc)
	return nil
}

type fakeUpdater struct{ got map[string]runtime.Resources }

func (f *fakeUpdater) UpdateContainerResources(_ context.Context, id string, res runtime.Resources) error {
	f.got[id] = res
	return nil
}

func writeFiles(t *testing.T, files map[string]string) {
	t.Helper()
	for p, s := range files {
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func guaranteedPod(cpu, mem string) *v1.Pod {
	l := v1.ResourceList{v1.ResourceCPU: resource.MustParse(cpu), v1.ResourceMemory: resource.MustParse(mem)}
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", UID: "uid-r"},
		Spec:       v1.PodSpec{Containers: []v1.Container{{Name: "c", Resources: v1.ResourceRequirements{Requests: l, Limits: l}}}},
	}
}

// The worker's resize glue: a resize is allocated when it fits, applied
// to the pod and container cgroups, completed with kubelet's event; without
// pod cgroups it is Infeasible and the old allocation runs.
func TestPodResizer(t *testing.T) {
	root := t.TempDir()
	podDir := "/kubepods/poduid-r"
	writeFiles(t, map[string]string{
		filepath.Join(root, "cpu", podDir, "cpu.shares"):                     "512",
		filepath.Join(root, "cpu", podDir, "cpu.cfs_quota_us"):               "50000",
		filepath.Join(root, "cpu", podDir, "cpu.cfs_period_us"):              "100000",
		filepath.Join(root, "memory", podDir, "memory.limit_in_bytes"):       "134217728",
		filepath.Join(root, "memory", podDir, "memory.usage_in_bytes"):       "1024",
		filepath.Join(root, "memory", podDir, "id", "memory.usage_in_bytes"): "1024",
	})
	store, err := resize.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	cg := &fakeResizeCgroups{root: root, dir: podDir}
	up := &fakeUpdater{got: map[string]runtime.Resources{}}
	var events []string
	r := &podResizer{
		store: store, cgroups: cg, rt: up, fs: resize.CgroupFS{Root: root},
		others: func(types.UID) []*v1.Pod { return nil },
		allocatable: func(context.Context) v1.ResourceList {
			return v1.ResourceList{v1.ResourceCPU: resource.MustParse("4"), v1.ResourceMemory: resource.MustParse("8Gi")}
		},
		event: func(_ *v1.Pod, _, reason, _ string) { events = append(events, reason) },
		// A swap limit that follows the memory limit, to see it passed on.
		swap: func(_ *v1.Pod, c *v1.Container) *int64 {
			n := c.Resources.Limits.Memory().Value() / 2
			return &n
		},
		log: slog.New(slog.DiscardHandler),
	}
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	old := guaranteedPod("500m", "128Mi")
	r.admitted(old)
	rs := pleg.PodStatus{Containers: []runtime.Container{{ID: "id", Name: "c", State: runtime.StateRunning, CgroupsPath: podDir + "/id"}}}
	r.started(old, &old.Spec.Containers[0])

	want := guaranteedPod("1", "256Mi")
	got := r.allocate(context.Background(), want, now)
	if got.Spec.Containers[0].Resources.Limits.Cpu().String() != "1" {
		t.Fatalf("allocate ran %v, want the new spec", got.Spec.Containers[0].Resources)
	}
	if _, conds := r.statusInputs(got, pleg.PodStatus{}); len(conds) != 1 || conds[0].Type != v1.PodResizeInProgress {
		t.Fatalf("conditions after allocating: %+v", conds)
	}
	restarts, err := r.actuate(context.Background(), got, rs, now)
	if err != nil || len(restarts) != 0 {
		t.Fatalf("actuate: %v, %v", restarts, err)
	}
	if res := up.got["id"]; res.CPUQuota != 100000 || res.MemoryLimitBytes != 256<<20 || res.CPUShares != 1024 {
		t.Errorf("container updated to %+v", res)
	}
	if res := up.got["id"]; res.SwapMax == nil || *res.SwapMax != 128<<20 {
		t.Errorf("container's swap limit %v, want the one for its new memory (128Mi)", res.SwapMax)
	}
	if len(cg.sets) != 3 || cg.sets[0].Memory == nil || *cg.sets[0].Memory != 256<<20 {
		t.Errorf("pod cgroup writes %+v", cg.sets)
	}
	if _, conds := r.statusInputs(got, pleg.PodStatus{}); len(conds) != 0 || len(events) != 1 || events[0] != "ResizeCompleted" {
		t.Errorf("after the update: conditions %+v events %v", conds, events)
	}
	if a := store.Actuated("uid-r")["c"]; a.Limits.Cpu().String() != "1" || a.Limits.Memory().String() != "256Mi" {
		t.Errorf("actuated %v", a)
	}

	// Without pod cgroups: Infeasible, the allocation (1 cpu) runs.
	cg.dir = ""
	got = r.allocate(context.Background(), guaranteedPod("2", "256Mi"), now)
	if got.Spec.Containers[0].Resources.Limits.Cpu().String() != "1" {
		t.Errorf("an infeasible resize runs %v", got.Spec.Containers[0].Resources)
	}
	_, conds := r.statusInputs(got, pleg.PodStatus{})
	if len(conds) != 1 || conds[0].Type != v1.PodResizePending || conds[0].Reason != "Infeasible" || conds[0].Message != msgNoPodCgroups {
		t.Errorf("conditions %+v", conds)
	}
}

// cpuCFSQuota false: a container's resize update carries its new shares
// and memory limit but no CFS quota.
func TestResizeContainerUpdateWithoutQuota(t *testing.T) {
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", UID: "u"}, Spec: v1.PodSpec{Containers: []v1.Container{{Name: "a"}}}}
	v := resize.Values{CPURequest: 250, CPULimit: 1000, MemoryLimit: 64 << 20}
	for _, noQuota := range []bool{false, true} {
		up := &fakeUpdater{got: map[string]runtime.Resources{}}
		c := containerCgroupsOf{&podResizer{rt: up, noCPUQuota: noQuota}}
		if err := c.UpdateContainer(context.Background(), pod, "a", "id", v); err != nil {
			t.Fatal(err)
		}
		got := up.got["id"]
		wantQuota := map[bool]int64{false: 100000, true: 0}[noQuota]
		if got.CPUQuota != wantQuota || got.CPUShares != 256 || got.MemoryLimitBytes != 64<<20 {
			t.Errorf("noCPUQuota %v: update %+v, want quota %d, shares 256, memory 64Mi", noQuota, got, wantQuota)
		}
	}
}
