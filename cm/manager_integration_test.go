package cm

import (
	"crypto/rand"
	"encoding/hex"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/opencontainers/cgroups"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// cgroupFile reads a limit of cgroup p (a cgroupfs path) under the host's
// cgroup mounts, by its cgroup v2 name, from the v1 file on v1 hosts.
func cgroupFile(t *testing.T, p, v2name string) string {
	t.Helper()
	file := filepath.Join("/sys/fs/cgroup", p, v2name)
	if !cgroups.IsCgroup2UnifiedMode() {
		v1 := map[string]string{
			"memory.max": "memory/memory.limit_in_bytes",
			"cpu.weight": "cpu/cpu.shares",
			"cpu.max":    "cpu/cpu.cfs_quota_us",
			"pids.max":   "pids/pids.max",
		}[v2name]
		dir, name, _ := strings.Cut(v1, "/")
		file = filepath.Join("/sys/fs/cgroup", dir, p, name)
	}
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatalf("read %s: %v", file, err)
	}
	return strings.TrimSpace(string(b))
}

// exists reports whether cgroup p is there (in the memory hierarchy on v1).
func exists(p string) bool {
	dir := filepath.Join("/sys/fs/cgroup", p)
	if !cgroups.IsCgroup2UnifiedMode() {
		dir = filepath.Join("/sys/fs/cgroup/memory", p)
	}
	_, err := os.Stat(dir)
	return err == nil
}

func testManager(t *testing.T) (*Manager, CgroupName) {
	t.Helper()
	if os.Geteuid() != 0 || testing.Short() {
		t.Skip("needs root and real cgroups")
	}
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	root := CgroupName{"nodeagent-cmtest-" + hex.EncodeToString(b)}
	m, err := New(Config{
		Root: root, CgroupsPerQOS: true, PodPidsLimit: 64,
		Allocatable: res("cpu", "2", "memory", "3Gi"), EnforceAllocatable: true,
		MemoryCapacity: 4 << 30, LegacyParent: "/" + root[0] + "-legacy",
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, p := range []string{root.ToCgroupfs(), "/" + root[0] + "-legacy"} {
			if err := destroyCgroupfs(p); err != nil {
				t.Errorf("cleanup %s: %v", p, err)
			}
		}
	})
	return m, root
}

func TestManagerLaysOutKubepods(t *testing.T) {
	m, root := testManager(t)
	if err := m.Setup(); err != nil {
		t.Fatal(err)
	}
	kp := root.ToCgroupfs() + "/kubepods"
	v2 := cgroups.IsCgroup2UnifiedMode()
	want := map[bool][2]string{false: {"2048", "2"}, true: {"79", "1"}}[v2]
	if got := cgroupFile(t, kp, "cpu.weight"); got != want[0] {
		t.Errorf("kubepods cpu = %s, want %s (2 cpus allocatable)", got, want[0])
	}
	if got := cgroupFile(t, kp, "memory.max"); got != "3221225472" {
		t.Errorf("kubepods memory = %s, want 3Gi", got)
	}
	for _, q := range []string{"burstable", "besteffort"} {
		if got := cgroupFile(t, kp+"/"+q, "cpu.weight"); got != want[1] {
			t.Errorf("%s cpu = %s, want %s", q, got, want[1])
		}
	}

	guaranteed := podOf(ctr("a", res("cpu", "500m", "memory", "64Mi"), res("cpu", "500m", "memory", "64Mi")))
	guaranteed.UID = "g-1"
	burstable := podOf(ctr("a", res("cpu", "1", "memory", "10Mi"), nil))
	burstable.UID = "b-1"
	besteffort := podOf(ctr("a", nil, nil))
	besteffort.UID = "be-1"
	for _, tc := range []struct {
		pod    *v1.Pod
		path   string
		checks map[string]string
	}{
		{guaranteed, kp + "/podg-1", map[string]string{"memory.max": "67108864", "cpu.max": map[bool]string{false: "50000", true: "50000 100000"}[v2], "pids.max": "64"}},
		{burstable, kp + "/burstable/podb-1", map[string]string{"cpu.weight": map[bool]string{false: "1024", true: "39"}[v2]}},
		{besteffort, kp + "/besteffort/podbe-1", map[string]string{"cpu.weight": want[1]}},
	} {
		parent, err := m.EnsurePod(tc.pod)
		if err != nil {
			t.Fatal(err)
		}
		if parent != tc.path {
			t.Errorf("pod %s: parent %s, want %s", tc.pod.UID, parent, tc.path)
		}
		for f, want := range tc.checks {
			if got := cgroupFile(t, tc.path, f); got != want {
				t.Errorf("pod %s: %s = %s, want %s", tc.pod.UID, f, got, want)
			}
		}
	}
	// The burstable level follows its pods' requests.
	m.updateQoS()
	if got, want := cgroupFile(t, kp+"/burstable", "cpu.weight"), map[bool]string{false: "1024", true: "39"}[v2]; got != want {
		t.Errorf("burstable cpu with one 1-cpu pod = %s, want %s", got, want)
	}

	// A container cgroup left below a pod (a cancelled task) goes with it;
	// so does an older agent's cgroup of the same pod.
	if err := m.apply(CgroupName{root[0], "kubepods", "burstable", "podb-1", "c1"}, ResourceConfig{}); err != nil {
		t.Fatal(err)
	}
	if err := destroyCgroupfs("/" + root[0] + "-legacy"); err != nil {
		t.Fatal(err)
	}
	if err := m.apply(CgroupName{root[0] + "-legacy", "b-1"}, ResourceConfig{}); err != nil {
		t.Fatal(err)
	}
	for _, uid := range []types.UID{"g-1", "b-1", "be-1"} {
		if err := m.RemovePod(uid); err != nil {
			t.Fatalf("RemovePod(%s): %v", uid, err)
		}
	}
	for _, p := range []string{kp + "/podg-1", kp + "/burstable/podb-1", kp + "/besteffort/podbe-1", "/" + root[0] + "-legacy/b-1"} {
		if exists(p) {
			t.Errorf("%s still exists after RemovePod", p)
		}
	}
	m.updateQoS()
	if got := cgroupFile(t, kp+"/burstable", "cpu.weight"); got != want[1] {
		t.Errorf("burstable cpu without pods = %s, want %s", got, want[1])
	}
	if err := m.RemovePod("../x"); err == nil {
		t.Error("RemovePod accepted a UID with a slash")
	}
}

// cpuCFSQuota false (NoCPUQuota): a pod cgroup gets no CFS quota whatever
// its containers' limits, as kubelet's ResourceConfigForPod without
// enforceCPULimits; the rest of its configuration is unchanged.
func TestManagerNoCPUQuota(t *testing.T) {
	m, root := testManager(t)
	m.cfg.NoCPUQuota = true
	if err := m.Setup(); err != nil {
		t.Fatal(err)
	}
	kp := root.ToCgroupfs() + "/kubepods"
	v2 := cgroups.IsCgroup2UnifiedMode()
	guaranteed := podOf(ctr("a", res("cpu", "500m", "memory", "64Mi"), res("cpu", "500m", "memory", "64Mi")))
	guaranteed.UID = "g-1"
	burstable := podOf(ctr("a", res("cpu", "250m", "memory", "10Mi"), res("cpu", "1")))
	burstable.UID = "b-1"
	for _, tc := range []struct {
		pod    *v1.Pod
		path   string
		checks map[string]string
	}{
		{guaranteed, kp + "/podg-1", map[string]string{"memory.max": "67108864", "cpu.max": map[bool]string{false: "-1", true: "max 100000"}[v2], "pids.max": "64"}},
		{burstable, kp + "/burstable/podb-1", map[string]string{"cpu.max": map[bool]string{false: "-1", true: "max 100000"}[v2], "cpu.weight": map[bool]string{false: "256", true: "10"}[v2]}},
	} {
		if _, err := m.EnsurePod(tc.pod); err != nil {
			t.Fatal(err)
		}
		for f, want := range tc.checks {
			if got := cgroupFile(t, tc.path, f); got != want {
				t.Errorf("pod %s: %s = %s, want %s", tc.pod.UID, f, got, want)
			}
		}
	}
}
