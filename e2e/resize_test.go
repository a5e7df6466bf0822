package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/nodeagent/nodeagent/internal/testing/testimage"
)

// In-place pod resize as kubelet 1.34 does it (kubectl patch --subresource
// resize): a Guaranteed pod resized up and down in CPU and memory keeps
// its container (same ID, no restart) and its cgroups have the new limits;
// a container whose resizePolicy says RestartContainer for memory is
// restarted, alone; a resize larger than the node is PodResizePending /
// Infeasible and nothing changes; an agent restart keeps the allocation.
func TestInPlacePodResize(t *testing.T) {
	t.Parallel()
	a, _ := readyPodAgent(t, "")
	ctx := context.Background()
	name := a.node + "-resize"
	kubectl(t, a.env, podYAML(name, a.node, fmt.Sprintf(`  terminationGracePeriodSeconds: 1
  containers:
  - name: a
    image: %[1]s
    command: ["sleep", "3600"]
    resources: {limits: {cpu: 200m, memory: 64Mi}}
  - name: b
    image: %[1]s
    command: ["sleep", "3600"]
    resources: {limits: {cpu: 100m, memory: 32Mi}}
    resizePolicy:
    - {resourceName: memory, restartPolicy: RestartContainer}
  - name: c
    image: %[1]s
    command: ["sh", "-c", "head -c 41943040 /dev/zero > /dev/shm/fill && sleep 3600"]
    resources: {limits: {cpu: 100m, memory: 64Mi}}
`, testimage.Ref)), "apply", "-f", "-")
	before := a.waitPod(ctx, name, 60*time.Second, "running", running)
	if before.Status.QOSClass != corev1.PodQOSGuaranteed {
		t.Fatalf("QoS %s", before.Status.QOSClass)
	}
	status := func(p *corev1.Pod, c string) corev1.ContainerStatus {
		for _, s := range p.Status.ContainerStatuses {
			if s.Name == c {
				return s
			}
		}
		t.Fatalf("no status of container %s", c)
		return corev1.ContainerStatus{}
	}
	id := func(p *corev1.Pod, c string) string {
		return strings.TrimPrefix(status(p, c).ContainerID, "containerd://")
	}
	resize := func(c, cpu, mem string) {
		kubectl(t, a.env, "", "patch", "pod", name, "--subresource", "resize", "-p",
			fmt.Sprintf(`{"spec":{"containers":[{"name":%q,"resources":{"requests":{"cpu":%q,"memory":%q},"limits":{"cpu":%q,"memory":%q}}}]}}`, c, cpu, mem, cpu, mem))
	}
	// applied: the status says container c has cpu and mem, and no resize
	// is pending or in progress.
	applied := func(c, cpu, mem string) func(*corev1.Pod) bool {
		return func(p *corev1.Pod) bool {
			if !running(p) || podCondition(p, corev1.PodResizeInProgress) != "" || podCondition(p, corev1.PodResizePending) != "" {
				return false
			}
			s := status(p, c)
			return s.Resources != nil && s.Resources.Limits.Cpu().String() == cpu && s.Resources.Limits.Memory().String() == mem &&
				s.AllocatedResources.Cpu().String() == cpu
		}
	}
	checkCgroup := func(p *corev1.Pod, c string, wantMem int64, wantQuota string) {
		t.Helper()
		mem, quota := cgroupLimits(t, string(p.UID), id(p, c))
		if mem != wantMem || !strings.HasPrefix(quota, wantQuota+" ") {
			t.Errorf("container %s cgroup: memory %d cpu %q, want %d and quota %s", c, mem, quota, wantMem, wantQuota)
		}
		// memory+swap moves with the memory limit (NoSwap).
		checkNoSwap(t, string(p.UID), id(p, c), wantMem)
	}
	podMem := func(p *corev1.Pod) string {
		return podCgroupFile(t, "/nodeagent-e2e-"+a.node+"/kubepods/pod"+string(p.UID), "memory.max")
	}

	// Up, in place.
	resize("a", "400m", "96Mi")
	up := a.waitPod(ctx, name, 60*time.Second, "a resized up", applied("a", "400m", "96Mi"))
	for _, c := range []string{"a", "b", "c"} {
		if id(up, c) != id(before, c) || status(up, c).RestartCount != 0 {
			t.Errorf("container %s replaced by the resize: %s (%d restarts), was %s", c, id(up, c), status(up, c).RestartCount, id(before, c))
		}
	}
	checkCgroup(up, "a", 96<<20, "40000")
	// The container sees its new limit in its own /sys/fs/cgroup (mounted
	// read-only as containerd's CRI does), where applications read it.
	inside := "cat /sys/fs/cgroup/memory.max 2>/dev/null || cat /sys/fs/cgroup/memory/memory.limit_in_bytes"
	if got := strings.TrimSpace(kubectl(t, a.env, "", "exec", name, "-c", "a", "--", "sh", "-c", inside)); got != fmt.Sprint(96<<20) {
		t.Errorf("memory limit inside the container %q, want %d", got, 96<<20)
	}
	if got, want := podMem(up), fmt.Sprint((96+32+64)<<20); got != want {
		t.Errorf("pod cgroup memory limit %s, want %s", got, want)
	}

	// Down, in place.
	resize("a", "100m", "48Mi")
	down := a.waitPod(ctx, name, 60*time.Second, "a resized down", applied("a", "100m", "48Mi"))
	if id(down, "a") != id(before, "a") || status(down, "a").RestartCount != 0 {
		t.Errorf("container a replaced by the resize down")
	}
	checkCgroup(down, "a", 48<<20, "10000")
	if got, want := podMem(down), fmt.Sprint((48+32+64)<<20); got != want {
		t.Errorf("pod cgroup memory limit %s, want %s", got, want)
	}

	// RestartContainer for b's memory: b restarts, a does not.
	resize("b", "100m", "48Mi")
	restarted := a.waitPod(ctx, name, 90*time.Second, "b restarted with more memory", func(p *corev1.Pod) bool {
		return applied("b", "100m", "48Mi")(p) && status(p, "b").RestartCount == 1
	})
	if id(restarted, "a") != id(before, "a") || status(restarted, "a").RestartCount != 0 {
		t.Errorf("container a restarted by b's resize")
	}
	if id(restarted, "b") == id(before, "b") {
		t.Errorf("container b kept its ID across a RestartContainer resize")
	}
	checkCgroup(restarted, "b", 48<<20, "10000")

	// More than the node has: Infeasible, nothing applied.
	resize("a", "1000", "48Mi")
	pending := a.waitPod(ctx, name, 60*time.Second, "PodResizePending Infeasible", func(p *corev1.Pod) bool {
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodResizePending && c.Reason == "Infeasible" && strings.HasPrefix(c.Message, "Node didn't have enough capacity: cpu, requested: 1000200, capacity: ") {
				return true
			}
		}
		return false
	})
	if s := status(pending, "a"); s.Resources.Limits.Cpu().String() != "100m" || s.AllocatedResources.Cpu().String() != "100m" {
		t.Errorf("an infeasible resize shows as applied: resources %v allocated %v", s.Resources, s.AllocatedResources)
	}
	checkCgroup(pending, "a", 48<<20, "10000")

	// An agent restart keeps the allocation (not the spec's 1000 cpus) and
	// every container.
	if _, err := os.Stat(filepath.Join(a.rootDir(), "allocated_pods_state")); err != nil {
		t.Errorf("no allocation checkpoint: %v", err)
	}
	if code, _ := a.stop(syscall.SIGTERM); code != 0 {
		t.Fatalf("agent exit code %d", code)
	}
	a.start()
	a.waitReady(ctx, 30*time.Second)
	after := a.waitPod(ctx, name, 60*time.Second, "Infeasible again after the restart", func(p *corev1.Pod) bool {
		return running(p) && podCondition(p, corev1.PodResizePending) == corev1.ConditionTrue
	})
	time.Sleep(2 * time.Second)
	after = a.waitPod(ctx, name, 10*time.Second, "running", running)
	for _, c := range []string{"a", "b"} {
		if id(after, c) != id(restarted, c) {
			t.Errorf("container %s replaced across the agent restart", c)
		}
	}
	if s := status(after, "a"); s.AllocatedResources.Cpu().String() != "100m" || s.Resources.Limits.Cpu().String() != "100m" {
		t.Errorf("after the agent restart: resources %v allocated %v, want 100m", s.Resources, s.AllocatedResources)
	}
	checkCgroup(after, "a", 48<<20, "10000")
	// A feasible resize after the restart still applies.
	resize("a", "300m", "64Mi")
	final := a.waitPod(ctx, name, 60*time.Second, "a resized after the restart", applied("a", "300m", "64Mi"))
	checkCgroup(final, "a", 64<<20, "30000")
	if id(final, "a") != id(before, "a") {
		t.Errorf("container a replaced")
	}

	// A memory limit below what c uses (40Mi in /dev/shm) is refused as
	// kubelet refuses it: PodResizeInProgress with reason Error, the
	// cgroup and the status keep 64Mi.
	resize("c", "100m", "32Mi")
	refused := a.waitPod(ctx, name, 60*time.Second, "PodResizeInProgress Error", func(p *corev1.Pod) bool {
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodResizeInProgress && c.Reason == "Error" &&
				strings.HasPrefix(c.Message, "cannot decrease memory limits: ") && strings.Contains(c.Message, `attempting to set container "c" memory limit (33554432) below current usage`) {
				return true
			}
		}
		return false
	})
	if s := status(refused, "c"); s.Resources.Limits.Memory().Value() != 64<<20 || s.RestartCount != 0 {
		t.Errorf("a refused memory decrease shows as applied: %v (%d restarts)", s.Resources, s.RestartCount)
	}
	checkCgroup(refused, "c", 64<<20, "10000")
}
