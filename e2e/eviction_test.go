package e2e

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/nodeagent/nodeagent/internal/testing/testimage"
)

// memAvailable is the agent's memory.available signal: MemFree plus
// Inactive(file) from /proc/meminfo, in bytes.
func memAvailable(t *testing.T) int64 {
	t.Helper()
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var sum int64
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fs := strings.Fields(sc.Text())
		if len(fs) >= 2 && (fs[0] == "MemFree:" || fs[0] == "Inactive(file):") {
			kb, _ := strconv.ParseInt(fs[1], 10, 64)
			sum += kb << 10
		}
	}
	return sum
}

func evicted(p *corev1.Pod) bool {
	return p.Status.Phase == corev1.PodFailed && p.Status.Reason == "Evicted"
}

// checkEvicted checks kubelet's status of an evicted pod: the message
// prefix, the DisruptionTarget condition, the Evicted event.
func (a *agent) checkEvicted(ctx context.Context, p *corev1.Pod, msgPrefix, msgPart string) {
	t := a.t
	t.Helper()
	if !strings.HasPrefix(p.Status.Message, msgPrefix) || !strings.Contains(p.Status.Message, msgPart) {
		t.Errorf("pod %s: message %q, want prefix %q containing %q", p.Name, p.Status.Message, msgPrefix, msgPart)
	}
	var dt *corev1.PodCondition
	for i := range p.Status.Conditions {
		if p.Status.Conditions[i].Type == corev1.DisruptionTarget {
			dt = &p.Status.Conditions[i]
		}
	}
	if dt == nil || dt.Status != corev1.ConditionTrue || dt.Reason != corev1.PodReasonTerminationByKubelet || dt.Message != p.Status.Message {
		t.Errorf("pod %s: DisruptionTarget condition %+v, want True/TerminationByKubelet with the pod's message", p.Name, dt)
	}
	a.waitEvent(ctx, "default", "involvedObject.name="+p.Name, "Evicted (Warning) with the pod's message", func(e corev1.Event) bool {
		return e.Reason == "Evicted" && e.Type == corev1.EventTypeWarning && e.Message == p.Status.Message
	})
}

// A BestEffort pod filling a memory-backed emptyDir crosses the agent's
// memory.available threshold: it is evicted with kubelet's status and
// event, a Guaranteed pod and the agent survive, and new BestEffort pods
// are refused while the node reports MemoryPressure.
func TestMemoryPressureEvictsBestEffortPod(t *testing.T) {
	const fill = 3 << 30
	avail := memAvailable(t)
	if avail < fill+(4<<30) {
		t.Skipf("needs %d MiB of available memory, have %d MiB", (fill+(4<<30))>>20, avail>>20)
	}
	// Crossed once about half the fill is written; 1.5 GiB of margin
	// either side for what other processes do meanwhile.
	threshold := (avail - fill/2) >> 20
	a, _ := readyPodAgent(t, fmt.Sprintf("evictionHard:\n  memory.available: %dMi\nevictionPressureTransitionPeriod: 30s\n", threshold))
	ctx := context.Background()
	guaranteed, hog := a.node+"-guaranteed", a.node+"-hog"
	kubectl(t, a.env, podYAML(guaranteed, a.node, fmt.Sprintf(`  terminationGracePeriodSeconds: 1
  containers:
  - name: c
    image: %s
    command: ["sleep", "3600"]
    resources: {limits: {cpu: 100m, memory: 64Mi}}
`, testimage.Ref)), "apply", "-f", "-")
	a.waitPod(ctx, guaranteed, 60*time.Second, "running", running)
	kubectl(t, a.env, podYAML(hog, a.node, fmt.Sprintf(`  terminationGracePeriodSeconds: 30
  containers:
  - name: fill
    image: %s
    command: ["sh", "-c", "dd if=/dev/zero of=/mem/fill bs=1M count=%d; sleep 3600"]
    volumeMounts: [{name: mem, mountPath: /mem}]
  volumes:
  - name: mem
    emptyDir: {medium: Memory, sizeLimit: 4Gi}
`, testimage.Ref, fill>>20)), "apply", "-f", "-")

	// Watch the signal cross and the pod's eviction.
	var crossed time.Time
	sawPressure := false
	var p *corev1.Pod
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		if crossed.IsZero() && memAvailable(t) < threshold<<20 {
			crossed = time.Now()
		}
		if n, err := a.env.Admin.CoreV1().Nodes().Get(ctx, a.node, metav1.GetOptions{}); err == nil {
			if c := condition(n, corev1.NodeMemoryPressure); c != nil && c.Status == corev1.ConditionTrue {
				sawPressure = true
			}
		}
		got, err := a.env.Admin.CoreV1().Pods("default").Get(ctx, hog, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		p = got
		return evicted(p), nil
	})
	if err != nil {
		t.Fatalf("pod %s not evicted within 2m (threshold %dMi crossed at %v): %s", hog, threshold, crossed, podStatusOf(p))
	}
	evictedAt := time.Now()
	if crossed.IsZero() {
		t.Errorf("evicted, but the test never saw memory.available below %dMi", threshold)
	} else {
		t.Logf("memory.available crossed %dMi; pod Evicted in the API %v later", threshold, evictedAt.Sub(crossed).Round(100*time.Millisecond))
	}
	a.checkEvicted(ctx, p, fmt.Sprintf("The node was low on resource: memory. Threshold quantity: %dMi, available: ", threshold),
		"Container fill was using ")
	if !strings.Contains(p.Status.Message, "request is 0, has larger consumption of memory. ") {
		t.Errorf("message %q does not name the container's request and resource as kubelet", p.Status.Message)
	}
	a.waitEvent(ctx, "default", "involvedObject.name="+a.node, "EvictionThresholdMet on the node", func(e corev1.Event) bool {
		return e.Reason == "EvictionThresholdMet" && e.Message == "Attempting to reclaim memory"
	})

	// New BestEffort pods are refused while MemoryPressure holds.
	late := a.node + "-late"
	kubectl(t, a.env, podYAML(late, a.node, fmt.Sprintf(`  containers:
  - name: c
    image: %s
    command: ["sleep", "3600"]
`, testimage.Ref)), "apply", "-f", "-")
	lp := a.waitPod(ctx, late, 30*time.Second, "rejected", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodFailed })
	if lp.Status.Reason != "Evicted" || lp.Status.Message != "Pod was rejected: The node had condition: [MemoryPressure]. " {
		t.Errorf("BestEffort pod under memory pressure: reason %q message %q, want kubelet's Evicted / \"Pod was rejected: The node had condition: [MemoryPressure]. \"", lp.Status.Reason, lp.Status.Message)
	}
	if !sawPressure {
		a.waitNode(ctx, 20*time.Second, "MemoryPressure True", func(n *corev1.Node) bool {
			c := condition(n, corev1.NodeMemoryPressure)
			return c != nil && c.Status == corev1.ConditionTrue
		})
	}

	// The memory came back; the Guaranteed pod and the agent are alive.
	var got int64
	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		got = memAvailable(t)
		return got > threshold<<20, nil
	}); err != nil {
		t.Errorf("memory.available %dMi 30s after the eviction, still below %dMi", got>>20, threshold)
	}
	t.Logf("memory.available back to %dMi %v after the pod was marked Evicted", got>>20, time.Since(evictedAt).Round(100*time.Millisecond))
	g, err := a.env.Admin.CoreV1().Pods("default").Get(ctx, guaranteed, metav1.GetOptions{})
	if err != nil || g.Status.Phase != corev1.PodRunning || g.Status.ContainerStatuses[0].RestartCount != 0 {
		t.Errorf("Guaranteed pod after the eviction: %v %+v", err, g.Status)
	}
	select {
	case <-a.exited:
		t.Fatal("the agent exited")
	default:
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/oom_score_adj", a.cmd.Process.Pid))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := strings.TrimSpace(string(b)), strconv.Itoa(max(-999, oomFloor(t))); got != want {
		t.Errorf("agent oom_score_adj %s, want %s", got, want)
	}
}

// The agent's rootDir on a small filesystem: a pod filling an emptyDir
// crosses nodefs.available; the node reports DiskPressure, the agent
// reclaims what it can, evicts the filling pod (not a quiet one), the
// space comes back, DiskPressure clears, and the agent restarts cleanly on
// the same rootDir.
func TestDiskPressureEvictsPodFillingRootDir(t *testing.T) {
	a, statfs := tmpfsRootAgent(t, "evictionHard:\n  nodefs.available: 40Mi\nevictionPressureTransitionPeriod: 10s\n")
	ctx := context.Background()
	quiet, filler := a.node+"-quiet", a.node+"-filler"
	kubectl(t, a.env, podYAML(quiet, a.node, fmt.Sprintf(`  terminationGracePeriodSeconds: 1
  containers:
  - name: c
    image: %s
    command: ["sleep", "3600"]
`, testimage.Ref)), "apply", "-f", "-")
	a.waitPod(ctx, quiet, 60*time.Second, "running", running)
	before := statfs()
	kubectl(t, a.env, podYAML(filler, a.node, fmt.Sprintf(`  terminationGracePeriodSeconds: 30
  containers:
  - name: fill
    image: %s
    command: ["sh", "-c", "dd if=/dev/zero of=/data/fill bs=1M count=100; sleep 3600"]
    volumeMounts: [{name: data, mountPath: /data}]
  volumes:
  - name: data
    emptyDir: {}
`, testimage.Ref)), "apply", "-f", "-")

	var crossed time.Time
	var minAvail int64 = 1 << 62
	sawPressure := false
	var p *corev1.Pod
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		if av := statfs(); av < minAvail {
			minAvail = av
			if crossed.IsZero() && av < 40<<20 {
				crossed = time.Now()
			}
		}
		if n, err := a.env.Admin.CoreV1().Nodes().Get(ctx, a.node, metav1.GetOptions{}); err == nil {
			if c := condition(n, corev1.NodeDiskPressure); c != nil && c.Status == corev1.ConditionTrue {
				sawPressure = true
			}
		}
		got, err := a.env.Admin.CoreV1().Pods("default").Get(ctx, filler, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		p = got
		return evicted(p), nil
	})
	if err != nil {
		t.Fatalf("pod %s not evicted within 2m (min available %dKi): %s", filler, minAvail>>10, podStatusOf(p))
	}
	if crossed.IsZero() {
		t.Errorf("evicted, but the test never saw nodefs.available below 40Mi")
	} else {
		t.Logf("nodefs.available crossed 40Mi; pod Evicted in the API %v later", time.Since(crossed).Round(100*time.Millisecond))
	}
	a.checkEvicted(ctx, p, "The node was low on resource: ephemeral-storage. Threshold quantity: 40Mi, available: ", "")
	a.waitEvent(ctx, "default", "involvedObject.name="+a.node, "EvictionThresholdMet on the node", func(e corev1.Event) bool {
		return e.Reason == "EvictionThresholdMet" && e.Message == "Attempting to reclaim ephemeral-storage"
	})
	if !a.out.Contains("removed dead containers of terminated pods") || !a.out.Contains("removed unused images") {
		t.Errorf("no dead-container and image reclaim before the eviction")
	}
	// The space comes back once the evicted pod's volume is released.
	var after int64
	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		after = statfs()
		return after > 40<<20, nil
	}); err != nil {
		t.Errorf("nodefs.available %dKi 30s after the eviction, want above 40Mi", after>>10)
	}
	t.Logf("nodefs available: %dKi before the filler, %dKi at least, %dKi after the eviction (%dKi reclaimed)", before>>10, minAvail>>10, after>>10, (after-minAvail)>>10)
	if !sawPressure {
		a.waitNode(ctx, 20*time.Second, "DiskPressure True", func(n *corev1.Node) bool {
			c := condition(n, corev1.NodeDiskPressure)
			return c != nil && c.Status == corev1.ConditionTrue
		})
	}
	start := time.Now()
	a.waitNode(ctx, 60*time.Second, "DiskPressure back to False", func(n *corev1.Node) bool {
		c := condition(n, corev1.NodeDiskPressure)
		return c != nil && c.Status == corev1.ConditionFalse
	})
	t.Logf("DiskPressure False %v after the space came back", time.Since(start).Round(100*time.Millisecond))
	q, err := a.env.Admin.CoreV1().Pods("default").Get(ctx, quiet, metav1.GetOptions{})
	if err != nil || q.Status.Phase != corev1.PodRunning {
		t.Fatalf("quiet pod after the eviction: %v %+v", err, q.Status)
	}

	// The agent restarts on the same rootDir and keeps the quiet pod.
	if code, _ := a.stop(syscall.SIGTERM); code != 0 {
		t.Errorf("agent exit code %d after SIGTERM", code)
	}
	a.start()
	a.waitReady(ctx, 30*time.Second)
	time.Sleep(5 * time.Second)
	q2 := a.waitPod(ctx, quiet, 30*time.Second, "running", running)
	if q2.Status.ContainerStatuses[0].RestartCount != 0 || q2.Status.ContainerStatuses[0].ContainerID != q.Status.ContainerStatuses[0].ContainerID {
		t.Errorf("quiet pod's container changed across the restart: %+v -> %+v", q.Status.ContainerStatuses, q2.Status.ContainerStatuses)
	}
	if p2, err := a.env.Admin.CoreV1().Pods("default").Get(ctx, filler, metav1.GetOptions{}); err != nil || !evicted(p2) {
		t.Errorf("evicted pod after the restart: %v %+v", err, p2.Status)
	}
}

// podStatusOf prints a pod's status for a failure message; nil when the
// pod was never read.
func podStatusOf(p *corev1.Pod) string {
	if p == nil {
		return "(the pod was never read)"
	}
	return fmt.Sprintf("%+v", p.Status)
}

// tmpfsRootAgent starts a Ready pod agent with cfg whose rootDir is a
// 128 MiB tmpfs (so a pod can fill it quickly), and returns it with a
// function reading the rootDir's available bytes.
func tmpfsRootAgent(t *testing.T, cfg string) (*agent, func() int64) {
	t.Helper()
	a, _ := podAgent(t, cfg)
	if err := os.MkdirAll(a.rootDir(), 0o750); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=128m", "tmpfs", a.rootDir()).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a tmpfs for rootDir: %v %s", err, out)
	}
	t.Cleanup(func() {
		a.stop(syscall.SIGKILL)
		_ = exec.Command("umount", "-l", a.rootDir()).Run()
	})
	a.start()
	a.waitReady(context.Background(), 30*time.Second)
	return a, func() int64 {
		var st syscall.Statfs_t
		if err := syscall.Statfs(a.rootDir(), &st); err != nil {
			t.Fatal(err)
		}
		return int64(st.Bavail) * st.Bsize
	}
}
