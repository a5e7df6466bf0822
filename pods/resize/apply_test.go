package resize

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	testclock "k8s.io/utils/clock/testing"

	"github.com/nodeagent/nodeagent/cm"
)

// fakeCgroups records the order of pod and container cgroup writes.
type fakeCgroups struct {
	pod   Cgroup
	calls []string
	fail  string // a call that fails
}

func (f *fakeCgroups) ReadPod(*v1.Pod) (Cgroup, error) { return f.pod, nil }

func (f *fakeCgroups) SetPod(_ *v1.Pod, rc cm.ResourceConfig) error {
	var c string
	switch {
	case rc.Memory != nil:
		c = fmt.Sprintf("pod memory=%d", *rc.Memory)
	case rc.CPUShares != nil:
		c = fmt.Sprintf("pod shares=%d", *rc.CPUShares)
	default:
		c = fmt.Sprintf("pod quota=%d", *rc.CPUQuota)
	}
	f.calls = append(f.calls, c)
	if c == f.fail {
		return fmt.Errorf("%s failed", c)
	}
	return nil
}

func (f *fakeCgroups) UpdateContainer(_ context.Context, _ *v1.Pod, _, id string, v Values) error {
	f.calls = append(f.calls, fmt.Sprintf("%s cpu=%d/%d mem=%d", id, v.CPURequest, v.CPULimit, v.MemoryLimit))
	return nil
}

func TestApplyOrder(t *testing.T) {
	old := rr("500m", "500m", "128Mi", "128Mi")
	oldCg := Cgroup{CPUShares: 512, CPUQuota: 50000, CPUPeriod: 100000, MemoryLimit: 128 << 20, MemoryUsage: 10 << 20}
	for _, tc := range []struct {
		desc  string
		want  v1.ResourceRequirements
		usage int64
		calls []string
		err   string
	}{
		{"up: pod before the container", rr("1", "1", "256Mi", "256Mi"), 1 << 20, []string{
			"pod memory=268435456", "a cpu=500/500 mem=268435456",
			"pod quota=100000", "pod shares=1024", "a cpu=1000/1000 mem=268435456",
		}, ""},
		{"down: the container before the pod", rr("250m", "250m", "64Mi", "64Mi"), 1 << 20, []string{
			"a cpu=500/500 mem=67108864", "pod memory=67108864",
			"a cpu=250/250 mem=67108864", "pod shares=256", "pod quota=25000",
		}, ""},
		{"memory below usage", rr("500m", "500m", "64Mi", "64Mi"), 100 << 20, nil,
			"cannot decrease memory limits: attempting to set container \"a\" memory limit (67108864) below current usage (104857600)"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			f := &fakeCgroups{pod: oldCg}
			pod := podWith("p", tc.want)
			acts := ComputeActions(pod, map[string]string{"a": "a"}, Allocation{"a": old})
			var got []Values
			err := Apply(context.Background(), pod, false, acts, f, f, map[string]int64{"a": tc.usage}, func(_ string, v Values) error {
				got = append(got, v)
				return nil
			})
			if tc.err != "" {
				if err == nil || err.Error() != tc.err {
					t.Fatalf("err = %v, want %q", err, tc.err)
				}
				if len(f.calls) != 0 {
					t.Errorf("wrote %v after a refused decrease", f.calls)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if strings.Join(f.calls, "\n") != strings.Join(tc.calls, "\n") {
				t.Errorf("calls\n%s\nwant\n%s", strings.Join(f.calls, "\n"), strings.Join(tc.calls, "\n"))
			}
			if last := got[len(got)-1]; last != ValuesOf(tc.want) {
				t.Errorf("last actuated %+v, want %+v", last, ValuesOf(tc.want))
			}
		})
	}
}

func TestApplyStopsAtFirstError(t *testing.T) {
	f := &fakeCgroups{pod: Cgroup{CPUShares: 512, CPUQuota: 50000, CPUPeriod: 100000, MemoryLimit: 128 << 20}, fail: "pod memory=268435456"}
	pod := podWith("p", rr("1", "1", "256Mi", "256Mi"))
	acts := ComputeActions(pod, map[string]string{"a": "a"}, Allocation{"a": rr("500m", "500m", "128Mi", "128Mi")})
	err := Apply(context.Background(), pod, false, acts, f, f, nil, func(string, Values) error { t.Error("actuated after a failure"); return nil })
	if err == nil || len(f.calls) != 1 {
		t.Errorf("err=%v calls=%v, want one failed call", err, f.calls)
	}
}

// writeTree makes a fake cgroup tree: files relative to root.
func writeTree(t *testing.T, root string, files map[string]string) {
	t.Helper()
	for p, s := range files {
		full := filepath.Join(root, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(s+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func TestReadCgroupV2(t *testing.T) {
	root := t.TempDir()
	dir, err := Dir("kubepods-podu.slice:cri-containerd:abc")
	if err != nil {
		t.Fatal(err)
	}
	if want := "/kubepods.slice/kubepods-podu.slice/cri-containerd-abc.scope"; dir != want {
		t.Fatalf("Dir = %q, want %q", dir, want)
	}
	shares := cm.MilliCPUToShares(500)
	writeTree(t, root, map[string]string{
		dir + "/cpu.weight":     fmt.Sprint(cm.SharesToWeight(shares)),
		dir + "/cpu.max":        "50000 100000",
		dir + "/memory.max":     "134217728",
		dir + "/memory.current": "4096",
	})
	cg, err := CgroupFS{Root: root, V2: true}.Read(dir)
	if err != nil {
		t.Fatal(err)
	}
	if cg.CPUQuota != 50000 || cg.CPUPeriod != 100000 || cg.MemoryLimit != 128<<20 || cg.MemoryUsage != 4096 || cg.CPUWeight != cm.SharesToWeight(shares) {
		t.Errorf("read %+v", cg)
	}
	alloc := rr("500m", "500m", "128Mi", "128Mi")
	got := Applied(alloc, alloc, cg, true)
	if !resourcesEqual(got, alloc) {
		t.Errorf("Applied = %v, want the allocation %v (the cgroup has exactly it)", got, alloc)
	}
	// The cgroup still has the old limits: that is what is reported.
	bigger := rr("1", "1", "256Mi", "256Mi")
	got = Applied(bigger, bigger, cg, true)
	if got.Limits.Cpu().MilliValue() != 500 || got.Limits.Memory().Value() != 128<<20 || got.Requests.Cpu().MilliValue() == 1000 {
		t.Errorf("Applied = %v, want the cgroup's 500m/128Mi", got)
	}
	writeTree(t, root, map[string]string{dir + "/cpu.max": "max 100000", dir + "/memory.max": "max"})
	cg, err = CgroupFS{Root: root, V2: true}.Read(dir)
	if err != nil || cg.CPUQuota != 0 || cg.MemoryLimit != 0 {
		t.Errorf("unlimited read as %+v, %v", cg, err)
	}
}

func TestReadCgroupV1(t *testing.T) {
	root := t.TempDir()
	dir := "/kubepods/podu/abc"
	writeTree(t, root, map[string]string{
		"cpu" + dir + "/cpu.shares":               "1024",
		"cpu" + dir + "/cpu.cfs_quota_us":         "-1",
		"cpu" + dir + "/cpu.cfs_period_us":        "100000",
		"memory" + dir + "/memory.limit_in_bytes": "9223372036854771712",
		"memory" + dir + "/memory.usage_in_bytes": "8192",
	})
	cg, err := CgroupFS{Root: root}.Read(dir)
	if err != nil {
		t.Fatal(err)
	}
	if cg.CPUShares != 1024 || cg.CPUQuota != 0 || cg.MemoryLimit != 0 || cg.MemoryUsage != 8192 {
		t.Errorf("read %+v", cg)
	}
	alloc := rr("1", "", "64Mi", "")
	if got := Applied(alloc, alloc, cg, false); !resourcesEqual(got, alloc) {
		t.Errorf("Applied = %v, want %v", got, alloc)
	}
	if _, err := (CgroupFS{Root: root}).Read("/missing"); err == nil {
		t.Error("a missing cgroup read without error")
	}
}

func TestStorePersists(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	p := podWith("p", rr("1", "1", "1Gi", "1Gi"))
	if err := s.SetAllocated(p); err != nil {
		t.Fatal(err)
	}
	if err := s.SetActuated("p", "a", rr("500m", "500m", "1Gi", "1Gi")); err != nil {
		t.Fatal(err)
	}
	s2, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	a, ok := s2.Allocated("p")
	if !ok || !resourcesEqual(a["a"], p.Spec.Containers[0].Resources) {
		t.Errorf("allocation after reopen = %v, %v", a, ok)
	}
	if got := s2.Actuated("p")["a"]; got.Limits.Cpu().MilliValue() != 500 {
		t.Errorf("actuated after reopen = %v", got)
	}
	if err := s2.Remove("p"); err != nil {
		t.Fatal(err)
	}
	s3, _ := Open(dir)
	if _, ok := s3.Allocated("p"); ok {
		t.Error("a removed pod's allocation came back")
	}
	// A corrupt checkpoint is an error, and an empty store.
	if err := s3.SetAllocated(p); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(filepath.Join(dir, AllocatedFile))
	if !strings.Contains(string(b), "1Gi") {
		t.Fatalf("checkpoint %s", b)
	}
	_ = os.WriteFile(filepath.Join(dir, AllocatedFile), []byte(strings.Replace(string(b), "1Gi", "2Gi", 1)), 0o600)
	if _, err := Open(dir); err == nil {
		t.Error("a checkpoint whose data does not match its checksum was accepted")
	}
}

func TestStoreConditions(t *testing.T) {
	clk := testclock.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	s, _ := Open(t.TempDir())
	s.SetPending("p", ReasonDeferred, "m", 2, clk.Now())
	t0 := clk.Now()
	clk.Step(time.Minute)
	s.SetPending("p", ReasonDeferred, "m", 2, clk.Now())
	c := s.Conditions("p")
	if len(c) != 1 || c[0].Type != v1.PodResizePending || c[0].Reason != "Deferred" || c[0].ObservedGeneration != 2 ||
		!c[0].LastTransitionTime.Time.Equal(t0) || !c[0].LastProbeTime.Time.Equal(t0) {
		t.Fatalf("an unchanged condition changed: %+v", c)
	}
	// A new message with the same reason: a new probe time only.
	clk.Step(time.Minute)
	s.SetPending("p", ReasonDeferred, "m2", 3, clk.Now())
	c = s.Conditions("p")
	if c[0].Message != "m2" || c[0].ObservedGeneration != 3 || !c[0].LastTransitionTime.Time.Equal(t0) || !c[0].LastProbeTime.Time.Equal(clk.Now()) {
		t.Fatalf("condition %+v", c[0])
	}
	s.SetPending("p", ReasonInfeasible, "n", 3, clk.Now())
	s.SetInProgress("p", "", "", 3, clk.Now())
	c = s.Conditions("p")
	if len(c) != 2 || c[0].Reason != "Infeasible" || !c[0].LastTransitionTime.Time.Equal(clk.Now()) || c[1].Type != v1.PodResizeInProgress || c[1].Status != v1.ConditionTrue {
		t.Fatalf("conditions %+v", c)
	}
	// An error keeps the generation; a later "" keeps the error.
	s.SetInProgress("p", ReasonError, "boom", 4, clk.Now())
	s.SetInProgress("p", "", "", 5, clk.Now())
	if c := s.Conditions("p")[1]; c.Reason != "Error" || c.Message != "boom" || c.ObservedGeneration != 3 {
		t.Fatalf("in progress %+v", c)
	}
	s.SetPending("p", "", "", 0, clk.Now())
	if !s.ClearInProgress("p") || s.ClearInProgress("p") {
		t.Error("ClearInProgress did not report the one it cleared")
	}
	if c := s.Conditions("p"); len(c) != 0 {
		t.Errorf("cleared conditions remain: %+v", c)
	}
}

func TestRequirements(t *testing.T) {
	base := rr("1", "1", "1Gi", "1Gi")
	base.Limits["example.com/dev"] = resource.MustParse("1")
	got := Requirements(base, Values{CPURequest: 250, CPULimit: 500, MemoryRequest: 64 << 20, MemoryLimit: 128 << 20})
	if got.Requests.Cpu().MilliValue() != 250 || got.Limits.Cpu().MilliValue() != 500 || got.Limits.Memory().Value() != 128<<20 {
		t.Errorf("Requirements = %v", got)
	}
	if _, ok := got.Limits["example.com/dev"]; !ok {
		t.Error("other resources dropped")
	}
}

// After a RestartContainer resize stopped its container, the pod's cgroup
// is resized alone; a pod cgroup that has its config is left alone.
func TestApplyReconcilesThePodCgroup(t *testing.T) {
	pod := podWith("p", rr("250m", "250m", "64Mi", "64Mi"))
	f := &fakeCgroups{pod: Cgroup{CPUShares: 512, CPUQuota: 50000, CPUPeriod: 100000, MemoryLimit: 128 << 20, MemoryUsage: 1 << 20}}
	if err := Apply(context.Background(), pod, false, Actions{}, f, f, nil, nil); err != nil {
		t.Fatal(err)
	}
	want := []string{"pod memory=67108864", "pod shares=256", "pod quota=25000"}
	if strings.Join(f.calls, ",") != strings.Join(want, ",") {
		t.Errorf("calls %v, want %v", f.calls, want)
	}
	f = &fakeCgroups{pod: Cgroup{CPUShares: 256, CPUQuota: 25000, CPUPeriod: 100000, MemoryLimit: 64 << 20}}
	if err := Apply(context.Background(), pod, false, Actions{}, f, f, nil, nil); err != nil || len(f.calls) != 0 {
		t.Errorf("a pod cgroup with its config: calls %v, %v", f.calls, err)
	}
	// cgroup v2: the weight is compared, not the lossy shares.
	f = &fakeCgroups{pod: Cgroup{CPUWeight: cm.SharesToWeight(256), CPUShares: 255, CPUQuota: 25000, CPUPeriod: 100000, MemoryLimit: 64 << 20}}
	if err := Apply(context.Background(), pod, false, Actions{}, f, f, nil, nil); err != nil || len(f.calls) != 0 {
		t.Errorf("cgroup v2 pod cgroup with its config: calls %v, %v", f.calls, err)
	}
}

// A pod with exclusive CPUs keeps no CFS quota on its cgroup (kubelet's
// DisableCPUQuotaWithExclusiveCPUs): a memory resize does not put one
// back, a cgroup with one loses it.
func TestApplyWithoutQuota(t *testing.T) {
	old := rr("1", "1", "64Mi", "64Mi")
	pod := podWith("p", rr("1", "1", "128Mi", "128Mi"))
	f := &fakeCgroups{pod: Cgroup{CPUShares: 1024, CPUQuota: -1, CPUPeriod: 100000, MemoryLimit: 64 << 20}}
	acts := ComputeActions(pod, map[string]string{"a": "a"}, Allocation{"a": old})
	if err := Apply(context.Background(), pod, true, acts, f, f, nil, func(string, Values) error { return nil }); err != nil {
		t.Fatal(err)
	}
	if want := []string{"pod memory=134217728", "a cpu=1000/1000 mem=134217728"}; strings.Join(f.calls, ",") != strings.Join(want, ",") {
		t.Errorf("calls %v, want %v", f.calls, want)
	}
	f = &fakeCgroups{pod: Cgroup{CPUShares: 1024, CPUQuota: 100000, CPUPeriod: 100000, MemoryLimit: 128 << 20}}
	if err := Apply(context.Background(), pod, true, Actions{}, f, f, nil, nil); err != nil {
		t.Fatal(err)
	}
	if want := []string{"pod quota=-1"}; strings.Join(f.calls, ",") != strings.Join(want, ",") {
		t.Errorf("calls %v, want %v", f.calls, want)
	}
}

// cpuCFSQuota false: a CPU limit resize updates the container (which
// leaves it without a quota, containerCgroupsOf) and never gives the pod
// cgroup a quota, in either direction.
func TestApplyCPULimitWithoutQuota(t *testing.T) {
	for _, tc := range []struct{ from, to string }{{"500m", "1"}, {"1", "500m"}} {
		pod := podWith("p", rr("250m", tc.to, "64Mi", "64Mi"))
		f := &fakeCgroups{pod: Cgroup{CPUShares: 256, CPUQuota: -1, CPUPeriod: 100000, MemoryLimit: 64 << 20}}
		acts := ComputeActions(pod, map[string]string{"a": "a"}, Allocation{"a": rr("250m", tc.from, "64Mi", "64Mi")})
		if len(acts.Update[v1.ResourceCPU]) != 1 {
			t.Fatalf("%s → %s: actions %+v", tc.from, tc.to, acts)
		}
		if err := Apply(context.Background(), pod, true, acts, f, f, nil, func(string, Values) error { return nil }); err != nil {
			t.Fatal(err)
		}
		want := "a cpu=250/" + map[string]string{"1": "1000", "500m": "500"}[tc.to] + " mem=67108864"
		if strings.Join(f.calls, ",") != want {
			t.Errorf("%s → %s: calls %v, want [%s]", tc.from, tc.to, f.calls, want)
		}
	}
}

// A container without a CFS quota (exclusive CPUs) reports the CPU limit
// last set, as kubelet, whose runtime then reports none.
func TestAppliedWithoutQuota(t *testing.T) {
	alloc := rr("1", "1", "64Mi", "64Mi")
	for _, q := range []int64{-1, 0} {
		cg := Cgroup{CPUShares: 1024, CPUQuota: q, CPUPeriod: 100000, MemoryLimit: 64 << 20}
		if got := Applied(alloc, alloc, cg, false); !resourcesEqual(got, alloc) {
			t.Errorf("quota %d: Applied = %v, want %v", q, got, alloc)
		}
	}
}
