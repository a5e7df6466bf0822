package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/opencontainers/cgroups"
	cgmanager "github.com/opencontainers/cgroups/manager"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/nodeagent/nodeagent/internal/testing/testimage"
	"github.com/nodeagent/nodeagent/runtime"
)

// podCgroupFile reads a file of cgroup p by its cgroup v2 name, from the
// matching v1 hierarchy on v1 hosts.
func podCgroupFile(t *testing.T, p, v2name string) string {
	t.Helper()
	file := filepath.Join("/sys/fs/cgroup", p, v2name)
	if !cgroups.IsCgroup2UnifiedMode() {
		v1 := map[string]string{"memory.max": "memory/memory.limit_in_bytes", "cpu.max": "cpu/cpu.cfs_quota_us", "cpu.weight": "cpu/cpu.shares"}[v2name]
		dir, name, _ := strings.Cut(v1, "/")
		file = filepath.Join("/sys/fs/cgroup", dir, p, name)
	}
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatalf("read %s: %v", file, err)
	}
	return strings.TrimSpace(string(b))
}

// cgroupExists: p in the memory hierarchy (v1) or the unified one (v2).
func cgroupExists(p string) bool {
	dir := filepath.Join("/sys/fs/cgroup", p)
	if !cgroups.IsCgroup2UnifiedMode() {
		dir = filepath.Join("/sys/fs/cgroup/memory", p)
	}
	_, err := os.Stat(dir)
	return err == nil
}

// cgroupOf is the cgroup of pid as /proc/<pid>/cgroup names it (the memory
// line on v1, the unified one on v2).
func cgroupOf(t *testing.T, pid int) string {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
	if err != nil {
		t.Fatal(err)
	}
	prefix := "0::"
	if !cgroups.IsCgroup2UnifiedMode() {
		prefix = ":memory:"
	}
	for _, l := range strings.Split(string(b), "\n") {
		if i := strings.Index(l, prefix); i >= 0 && (prefix != "0::" || i == 0) {
			return l[i+len(prefix):]
		}
	}
	t.Fatalf("no %s line in /proc/%d/cgroup:\n%s", prefix, pid, b)
	return ""
}

// oomFloor is the lowest oom_score_adj the agent can set: -1000, or its
// own score without CAP_SYS_RESOURCE (some sandboxes), which the agent
// (started by this test) shares with this process.
func oomFloor(t *testing.T) int {
	st, _ := os.ReadFile("/proc/self/status")
	for _, l := range strings.Split(string(st), "\n") {
		if h, ok := strings.CutPrefix(l, "CapEff:"); ok {
			if caps, err := strconv.ParseUint(strings.TrimSpace(h), 16, 64); err == nil && caps&(1<<24) == 0 {
				b, _ := os.ReadFile("/proc/self/oom_score_adj")
				v, _ := strconv.Atoi(strings.TrimSpace(string(b)))
				t.Logf("no CAP_SYS_RESOURCE here: scores below %d are raised to it", v)
				return v
			}
		}
	}
	return -1000
}

func memTotal(t *testing.T) int64 {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(l, "MemTotal:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			return kb << 10
		}
	}
	t.Fatal("no MemTotal")
	return 0
}

// removeCgroupTree removes an agent's cgroup root (empty by now) from every
// hierarchy.
func removeCgroupTree(p string) error {
	m, err := cgmanager.New(&cgroups.Cgroup{Path: p, Resources: &cgroups.Resources{SkipDevices: true}})
	if err != nil {
		return err
	}
	return m.Destroy()
}

// Pods get kubelet's cgroup layout: a Guaranteed pod's cgroup is
// kubepods/pod<uid> with its memory and cpu limits, a Burstable one is
// under kubepods/burstable, a BestEffort one under kubepods/besteffort;
// containers run in their pod's cgroup with the QoS class's OOM score; a
// deleted pod's cgroup goes. The agent's namespace is not k8s.io, so its
// kubepods lives under /nodeagent-<namespace>.
func TestPodCgroupsAndOOMScores(t *testing.T) {
	t.Parallel()
	a, rt := readyPodAgent(t, "")
	ctx := context.Background()
	root := "/nodeagent-e2e-" + a.node // podAgent's cleanup removes it
	pods := []struct {
		name, resources string
		parent          string // below root
		memMax, cpuMax  string
		adj             int
	}{
		{"guaranteed", "{limits: {cpu: 500m, memory: 64Mi}}", "/kubepods", "67108864", "50000", max(-997, oomFloor(t))},
		{"burstable", "{requests: {cpu: 100m, memory: 16Mi}}", "/kubepods/burstable", "", "", min(999, int(1000-1000*(16<<20)/memTotal(t)))},
		{"besteffort", "{}", "/kubepods/besteffort", "", "", 1000},
	}
	for _, p := range pods {
		kubectl(t, a.env, podYAML(a.node+"-"+p.name, a.node, fmt.Sprintf(`  terminationGracePeriodSeconds: 1
  containers:
  - name: c
    image: %s
    command: ["sleep", "3600"]
    resources: %s
`, testimage.Ref, p.resources)), "apply", "-f", "-")
	}
	podDirs := map[string]string{}
	for _, p := range pods {
		pod := a.waitPod(ctx, a.node+"-"+p.name, 60*time.Second, "running", running)
		dir := root + p.parent + "/pod" + string(pod.UID)
		podDirs[p.name] = dir
		cs, err := rt.ListContainers(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var c runtime.Container
		for _, x := range cs {
			if x.Pod.UID == pod.UID && x.State == runtime.StateRunning {
				c = x
			}
		}
		if c.Pid == 0 {
			t.Fatalf("%s: no running container of pod %s in %+v", p.name, pod.UID, cs)
		}
		if got := cgroupOf(t, int(c.Pid)); got != dir+"/"+c.ID {
			t.Errorf("%s: container cgroup %s, want %s", p.name, got, dir+"/"+c.ID)
		}
		if p.memMax != "" {
			if got := podCgroupFile(t, dir, "memory.max"); got != p.memMax {
				t.Errorf("%s: pod memory limit %s, want %s", p.name, got, p.memMax)
			}
			want := p.cpuMax
			if cgroups.IsCgroup2UnifiedMode() {
				want += " 100000"
			}
			if got := podCgroupFile(t, dir, "cpu.max"); got != want {
				t.Errorf("%s: pod cpu quota %s, want %s", p.name, got, want)
			}
		}
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/oom_score_adj", c.Pid))
		if err != nil {
			t.Fatal(err)
		}
		if got, _ := strconv.Atoi(strings.TrimSpace(string(b))); got != p.adj {
			t.Errorf("%s: oom_score_adj %d, want %d", p.name, got, p.adj)
		}
	}
	// The burstable level's cpu shares follow its pod's request (100m).
	if !cgroups.IsCgroup2UnifiedMode() {
		if got := podCgroupFile(t, root+"/kubepods/burstable", "cpu.weight"); got != "102" {
			t.Errorf("burstable QoS cpu.shares %s, want 102", got)
		}
	}

	for _, p := range pods {
		zero := int64(0)
		if err := a.env.Admin.CoreV1().Pods("default").Delete(ctx, a.node+"-"+p.name, metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range pods {
		dir := podDirs[p.name]
		err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 60*time.Second, true, func(context.Context) (bool, error) {
			return !cgroupExists(dir), nil
		})
		if err != nil {
			t.Errorf("%s: pod cgroup %s still there after the pod was deleted", p.name, dir)
		}
	}
}

// podContainerCgroup finds a container's cgroup (relative to the cgroup
// mounts) in kubelet's layout under any agent's root, or in the layout of
// agents before it (nodeagent/<uid>/<id>).
func podContainerCgroup(podUID, id string) string {
	for _, mount := range []string{"/sys/fs/cgroup/memory", "/sys/fs/cgroup", "/sys/fs/cgroup/unified"} {
		for _, pat := range []string{"*/kubepods/pod%s/%s", "*/kubepods/*/pod%s/%s", "kubepods/pod%s/%s", "kubepods/*/pod%s/%s", "nodeagent/%s/%s"} {
			if m, _ := filepath.Glob(filepath.Join(mount, fmt.Sprintf(pat, podUID, id))); len(m) > 0 {
				rel, _ := filepath.Rel(mount, m[0])
				return rel
			}
		}
	}
	return filepath.Join("nodeagent", podUID, id)
}
