package e2e

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/opencontainers/cgroups"
	corev1 "k8s.io/api/core/v1"

	"github.com/nodeagent/nodeagent/internal/testing/testimage"
	"github.com/nodeagent/nodeagent/runtime"
)

// Pod-level resources (spec.resources, PodLevelResources on by default in
// 1.34): a pod whose containers set no resources of their own but whose
// pod level sets equal cpu and memory requests and limits is Guaranteed
// (the API server's qosClass, and the agent's cgroup placement agrees:
// kubepods/pod<uid>, not besteffort), its pod cgroup has the pod-level
// limits, a container without limits is bounded by them in its own
// cgroup, one with a limit keeps its own, and both get the Guaranteed
// OOM score. Wall time 9.7 s at load 8.
func TestPodLevelResources(t *testing.T) {
	t.Parallel()
	a, rt := readyPodAgent(t, "")
	ctx := context.Background()
	root := "/nodeagent-e2e-" + a.node
	name := a.node + "-podlevel"
	kubectl(t, a.env, podYAML(name, a.node, fmt.Sprintf(`  terminationGracePeriodSeconds: 1
  resources:
    requests: {cpu: 500m, memory: 64Mi}
    limits: {cpu: 500m, memory: 64Mi}
  containers:
  - name: bare
    image: %[1]s
    command: ["sleep", "3600"]
  - name: own
    image: %[1]s
    command: ["sleep", "3600"]
    resources:
      limits: {memory: 32Mi}
`, testimage.Ref)), "apply", "-f", "-")
	pod := a.waitPod(ctx, name, 60*time.Second, "running", running)
	if pod.Status.QOSClass != corev1.PodQOSGuaranteed {
		t.Errorf("qosClass %q, want Guaranteed (from the pod-level resources)", pod.Status.QOSClass)
	}
	dir := root + "/kubepods/pod" + string(pod.UID)
	if got := podCgroupFile(t, dir, "memory.max"); got != strconv.Itoa(64<<20) {
		t.Errorf("pod memory limit %s, want %d", got, 64<<20)
	}
	wantCPU := "50000"
	if cgroups.IsCgroup2UnifiedMode() {
		wantCPU += " 100000"
	}
	if got := podCgroupFile(t, dir, "cpu.max"); got != wantCPU {
		t.Errorf("pod cpu quota %s, want %s", got, wantCPU)
	}
	cs, err := rt.ListContainers(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"bare": strconv.Itoa(64 << 20), "own": strconv.Itoa(32 << 20)}
	seen := 0
	for _, c := range cs {
		if c.Pod.UID != pod.UID || c.State != runtime.StateRunning || want[c.Name] == "" {
			continue
		}
		seen++
		cg := cgroupOf(t, int(c.Pid))
		if cg != dir+"/"+c.ID {
			t.Errorf("%s: cgroup %s, want %s", c.Name, cg, dir+"/"+c.ID)
		}
		if got := podCgroupFile(t, cg, "memory.max"); got != want[c.Name] {
			t.Errorf("%s: container memory limit %s, want %s", c.Name, got, want[c.Name])
		}
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/oom_score_adj", c.Pid))
		if err != nil {
			t.Fatal(err)
		}
		if got, _ := strconv.Atoi(strings.TrimSpace(string(b))); got != max(-997, oomFloor(t)) {
			t.Errorf("%s: oom_score_adj %d, want %d", c.Name, got, max(-997, oomFloor(t)))
		}
	}
	if seen != 2 {
		t.Fatalf("found %d running containers of pod %s, want 2: %+v", seen, pod.UID, cs)
	}
}
