package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/nodeagent/nodeagent/internal/testing/testimage"
)

// A soft nodefs.available threshold (no hard ones), rootDir on a 128 MiB
// tmpfs: a pod filling an emptyDir crosses it; DiskPressure is reported
// at once while the pod keeps running for the 20 s grace period; then the
// pod is evicted with kubelet's message naming the soft threshold, and
// killed with evictionMaxPodGracePeriod (5 s) rather than its own 30 s
// (it ignores SIGTERM, so the kill shows the grace period).
func TestSoftThresholdWaitsGracePeriodThenEvicts(t *testing.T) {
	const grace = 20 * time.Second
	a, statfs := tmpfsRootAgent(t, "evictionHard: {}\nevictionSoft:\n  nodefs.available: 40Mi\nevictionSoftGracePeriod:\n  nodefs.available: 20s\n"+
		"evictionMaxPodGracePeriod: 5\nevictionPressureTransitionPeriod: 10s\n")
	ctx := context.Background()
	filler := a.node + "-soft"
	kubectl(t, a.env, podYAML(filler, a.node, fmt.Sprintf(`  terminationGracePeriodSeconds: 30
  containers:
  - name: fill
    image: %s
    command: ["sh", "-c", "trap '' TERM; dd if=/dev/zero of=/data/fill bs=1M count=100; sleep 3600"]
    volumeMounts: [{name: data, mountPath: /data}]
  volumes:
  - name: data
    emptyDir: {}
`, testimage.Ref)), "apply", "-f", "-")

	var crossed, pressureAt time.Time
	var p *corev1.Pod
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		if crossed.IsZero() && statfs() < 40<<20 {
			crossed = time.Now()
		}
		got, err := a.env.Admin.CoreV1().Pods("default").Get(ctx, filler, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		p = got
		if pressureAt.IsZero() && !evicted(p) {
			if n, err := a.env.Admin.CoreV1().Nodes().Get(ctx, a.node, metav1.GetOptions{}); err == nil {
				if c := condition(n, corev1.NodeDiskPressure); c != nil && c.Status == corev1.ConditionTrue {
					pressureAt = time.Now()
				}
			}
		}
		return evicted(p), nil
	})
	if err != nil {
		t.Fatalf("pod %s not evicted within 2m (threshold crossed at %v): %s", filler, crossed, podStatusOf(p))
	}
	evictedAt := time.Now()
	if crossed.IsZero() {
		t.Fatalf("evicted, but the test never saw nodefs.available below 40Mi")
	}
	took := evictedAt.Sub(crossed)
	t.Logf("nodefs.available crossed the soft 40Mi; DiskPressure True %v later (pod still running); pod Evicted %v after the crossing",
		pressureAt.Sub(crossed).Round(100*time.Millisecond), took.Round(100*time.Millisecond))
	if took < grace {
		t.Errorf("pod evicted %v after the crossing, before the 20s grace period", took)
	}
	if pressureAt.IsZero() {
		t.Errorf("DiskPressure never True while the pod ran: a soft threshold must set the condition before its grace period ends")
	} else if pressureAt.Sub(crossed) > grace {
		t.Errorf("DiskPressure True only %v after the crossing, want within the 20s grace period", pressureAt.Sub(crossed))
	}
	if !a.out.Contains("eviction criteria not yet met") {
		t.Errorf("agent never logged a soft threshold waiting for its grace period")
	}
	a.checkEvicted(ctx, p, "The node was low on resource: ephemeral-storage. Threshold quantity: 40Mi, available: ", "")
	a.waitEvent(ctx, "default", "involvedObject.name="+a.node, "EvictionThresholdMet on the node", func(e corev1.Event) bool {
		return e.Reason == "EvictionThresholdMet" && e.Message == "Attempting to reclaim ephemeral-storage"
	})

	// The container ignores SIGTERM: it is killed once the 5s grace
	// period (not the pod's 30s, nor the hard thresholds' 1s) is over.
	var term *corev1.ContainerStateTerminated
	if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 45*time.Second, true, func(ctx context.Context) (bool, error) {
		got, err := a.env.Admin.CoreV1().Pods("default").Get(ctx, filler, metav1.GetOptions{})
		if err != nil || len(got.Status.ContainerStatuses) == 0 {
			return false, nil
		}
		p = got
		term = got.Status.ContainerStatuses[0].State.Terminated
		return term != nil, nil
	}); err != nil {
		t.Fatalf("evicted container not terminated within 45s: %s", podStatusOf(p))
	}
	// The Evicted event is recorded as the stop begins (the pod's Failed
	// status is written once its containers are gone): from it to the
	// container's end is the grace period. Both are whole seconds.
	evs, err := a.env.Admin.CoreV1().Events("default").List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + filler + ",reason=Evicted"})
	if err != nil || len(evs.Items) == 0 {
		t.Fatalf("no Evicted event: %v", err)
	}
	ev := evs.Items[0]
	start := ev.FirstTimestamp.Time
	if start.IsZero() {
		start = ev.EventTime.Time
	}
	killed := term.FinishedAt.Sub(start)
	t.Logf("container terminated (exit code %d) %v after the Evicted event (both in whole seconds)", term.ExitCode, killed)
	if term.ExitCode != 137 {
		t.Errorf("exit code %d, want 137 (SIGKILL after the grace period; SIGTERM is ignored)", term.ExitCode)
	}
	if killed < 4*time.Second || killed > 8*time.Second {
		t.Errorf("container killed %v after the Evicted event, want evictionMaxPodGracePeriod (5s), not the pod's 30s nor the hard thresholds' 1s", killed)
	}
	var after int64
	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		after = statfs()
		return after > 40<<20, nil
	}); err != nil {
		t.Errorf("nodefs.available %dKi 30s after the eviction, want above 40Mi", after>>10)
	}
}

// evictionMinimumReclaim: rootDir on a 128 MiB tmpfs, nodefs.available
// hard 40Mi with a minimum reclaim of 40Mi; three pods write 32 MiB each
// into emptyDirs. Evicting one brings nodefs.available above 40Mi but not
// above 80Mi, so a second pod goes too; the third stays. Without the
// minimum reclaim one eviction would do.
func TestMinimumReclaimEvictsUntilThresholdPlusMinimum(t *testing.T) {
	a, statfs := tmpfsRootAgent(t, "evictionHard:\n  nodefs.available: 40Mi\nevictionMinimumReclaim:\n  nodefs.available: 40Mi\nevictionPressureTransitionPeriod: 10s\n")
	ctx := context.Background()
	var names []string
	for i := range 3 {
		name := fmt.Sprintf("%s-fill%d", a.node, i)
		names = append(names, name)
		// Each writes once the others' files are there, so that the
		// threshold is crossed only with all three written.
		kubectl(t, a.env, podYAML(name, a.node, fmt.Sprintf(`  terminationGracePeriodSeconds: 1
  containers:
  - name: fill
    image: %s
    command: ["sh", "-c", "dd if=/dev/zero of=/data/fill bs=1M count=32; sleep 3600"]
    volumeMounts: [{name: data, mountPath: /data}]
  volumes:
  - name: data
    emptyDir: {}
`, testimage.Ref)), "apply", "-f", "-")
		a.waitPod(ctx, name, 60*time.Second, "running", running)
		time.Sleep(time.Second)
	}
	t.Logf("nodefs.available %dKi with the three pods' 96 MiB written", statfs()>>10)

	evictedPods := func() (out []string) {
		for _, n := range names {
			if p, err := a.env.Admin.CoreV1().Pods("default").Get(ctx, n, metav1.GetOptions{}); err == nil && evicted(p) {
				out = append(out, n)
			}
		}
		return out
	}
	if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 90*time.Second, true, func(context.Context) (bool, error) {
		return len(evictedPods()) >= 2, nil
	}); err != nil {
		t.Fatalf("evicted %v within 90s, want two pods (nodefs.available now %dKi)", evictedPods(), statfs()>>10)
	}
	// Settled: no third eviction once above threshold + minimum reclaim.
	time.Sleep(25 * time.Second)
	got, avail := evictedPods(), statfs()
	t.Logf("evicted %d pods; nodefs.available %dKi afterwards", len(got), avail>>10)
	if len(got) != 2 {
		t.Errorf("evicted %v, want exactly two pods", got)
	}
	if avail <= 80<<20 {
		t.Errorf("nodefs.available %dKi after the evictions, want above threshold + minimum reclaim (80Mi)", avail>>10)
	}
	if !a.out.Contains("minimumReclaim=41943040") {
		t.Errorf("the eviction manager never logged the 40Mi minimum reclaim")
	}
}
