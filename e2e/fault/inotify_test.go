package fault

import (
	"context"
	"net/http"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

const maxUserWatches = "/proc/sys/fs/inotify/max_user_watches"

// lowerInotifyWatches sets fs.inotify.max_user_watches below what is in use,
// so no process of the user (root) can add a watch, and returns the function
// that restores it; the test's cleanup restores it too, even on failure.
// The limit is host-wide for root: the test does not run in parallel with
// the rest of the suite (hack/test.sh runs the suite alone) and keeps the
// window short.
func lowerInotifyWatches(t *testing.T) (restore func()) {
	t.Helper()
	orig, err := os.ReadFile(maxUserWatches)
	if err != nil {
		t.Skipf("no %s: %v", maxUserWatches, err)
	}
	restore = func() {
		if err := os.WriteFile(maxUserWatches, orig, 0o644); err != nil {
			t.Errorf("restoring %s to %s: %v", maxUserWatches, strings.TrimSpace(string(orig)), err)
		}
	}
	t.Cleanup(restore)
	if err := os.WriteFile(maxUserWatches, []byte("1"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("fs.inotify.max_user_watches lowered from %s to 1", strings.TrimSpace(string(orig)))
	return restore
}

// TestInotifyWatchesExhausted: the agent's PLEG uses only the cgroup
// (inotify) event source, so without watches nothing but relisting can see
// a container die. With fs.inotify.max_user_watches exhausted, a new pod's
// cgroups cannot be watched: the PLEG must fall back to relisting (metrics
// say so), stay healthy, and still see its container die (by relisting,
// within the fallback period + slack), with the pod's status right (the
// container restarted once, lastState exit code 137, other pods untouched,
// the node Ready). Once watches are available again it must go back to
// event mode (within its 10s retry backoff) and see the next death through
// inotify.
func TestInotifyWatchesExhausted(t *testing.T) {
	a := newAgent(t, agentOpts{config: "pleg:\n  eventSources: [cgroups]\n"})
	a.waitReady(60 * time.Second)
	names := a.startPods(2)
	const (
		fallback = `nodeagent_pleg_fallback_active`
		healthy  = `nodeagent_pleg_source_healthy{source="cgroups"}`
		byRelist = `nodeagent_pleg_events_total{source="relist",type="ContainerDied"}`
		byCgroup = `nodeagent_pleg_events_total{source="cgroups",type="ContainerDied"}`
	)
	waitMetric := func(name string, want func(float64) bool, timeout time.Duration) time.Duration {
		t.Helper()
		start := time.Now()
		for time.Since(start) < timeout {
			if code, body := a.get("/metrics"); code == http.StatusOK && want(metricIn(body, name)) {
				return time.Since(start)
			}
			time.Sleep(50 * time.Millisecond)
		}
		t.Fatalf("%s: not as wanted within %s (now %v)", name, timeout, a.metricOr(name))
		return 0
	}
	waitMetric(fallback, func(v float64) bool { return v == 0 }, 30*time.Second)
	o := a.observe()
	defer o.stop()
	before := a.podContainers(names)

	restore := lowerInotifyWatches(t)
	exhausted := time.Now()
	victim := a.startPods(1)[0]
	took := waitMetric(fallback, func(v float64) bool { return v == 1 }, 20*time.Second)
	t.Logf("MEASURE inotify-exhausted: PLEG fell back to relisting %s after its new pod ran (%s after the limit was lowered); %s = %v",
		took.Round(time.Millisecond), time.Since(exhausted).Round(time.Millisecond), healthy, a.metricOr(healthy))
	if code, body := a.get("/livez"); code != http.StatusOK {
		t.Errorf("/livez %d with inotify exhausted: %s", code, body)
	}
	// The new pod's container cannot be watched: a relist (every 1s) sees
	// it die, or the source's retry to watch it, which finds its process
	// gone; no inotify event can.
	vs := a.podContainers([]string{victim})[victim+"/sleep"]
	pid := containerPID(t, strings.TrimPrefix(vs.id, "containerd://"))
	died := func() float64 { return max(a.metricOr(byRelist), 0) + max(a.metricOr(byCgroup), 0) }
	relisted, retried, total := a.metricOr(byRelist), a.metricOr(byCgroup), died()
	killed := time.Now()
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	var seen time.Duration
	for seen = 0; died() <= total; seen = time.Since(killed) {
		if seen > 10*time.Second {
			t.Fatal("the unwatched container's death not seen within 10s")
		}
		time.Sleep(20 * time.Millisecond)
	}
	reported := a.waitRestarted(victim, vs.id, 30*time.Second)
	t.Logf("MEASURE inotify-exhausted: unwatched container's death seen %s after SIGKILL (by relist: %v, by the watch retry: %v; fallback relist period 1s); restart reported in the pod status %s after",
		seen.Round(time.Millisecond), a.metricOr(byRelist) > relisted, a.metricOr(byCgroup) > retried, reported.Sub(killed).Round(time.Millisecond))
	if seen > 3*time.Second {
		t.Errorf("death seen %s after the kill, want within the 1s fallback relist period + 2s", seen)
	}
	if code, body := a.get("/livez"); code != http.StatusOK {
		t.Errorf("/livez %d with inotify exhausted: %s", code, body)
	}

	restore()
	freed := time.Now()
	back := waitMetric(fallback, func(v float64) bool { return v == 0 }, 30*time.Second)
	t.Logf("MEASURE inotify-exhausted: back in event mode %s after watches were available again (retry backoff capped at 10s); exhausted for %s",
		back.Round(time.Millisecond), freed.Sub(exhausted).Round(time.Millisecond))
	if back > 12*time.Second {
		t.Errorf("back in event mode %s after the limit was restored, want within 12s", back)
	}
	if v := a.metricOr(healthy); v != 1 {
		t.Errorf("%s = %v after recovery", healthy, v)
	}
	// The restarted container is watched now: its death comes through
	// inotify (the safety-net relist is 5 min away).
	vs2 := a.podContainers([]string{victim})[victim+"/sleep"]
	pid = containerPID(t, strings.TrimPrefix(vs2.id, "containerd://"))
	viaCgroup := a.metricOr(byCgroup)
	killed = time.Now()
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	seen = waitMetric(byCgroup, func(v float64) bool { return v > viaCgroup }, 10*time.Second)
	t.Logf("MEASURE inotify-exhausted: after recovery a death is seen through inotify %s after SIGKILL", seen.Round(time.Millisecond))

	a.checkNoRestart(before, a.podContainers(names))
	o.stop()
	o.checkNeverNotReady()
	a.checkAlive()
}

// waitRestarted waits until the pod's container is a new one (not old)
// with restartCount 1 and lastState terminated with exit code 137, and
// returns when that was seen.
func (a *agent) waitRestarted(pod, old string, timeout time.Duration) time.Time {
	a.t.Helper()
	deadline := time.Now().Add(timeout)
	var last string
	for time.Now().Before(deadline) {
		p, err := a.env.Admin.CoreV1().Pods("default").Get(context.Background(), pod, metav1.GetOptions{})
		if err == nil && len(p.Status.ContainerStatuses) == 1 {
			cs := p.Status.ContainerStatuses[0]
			lt := cs.LastTerminationState.Terminated
			if cs.RestartCount >= 1 && lt != nil && lt.ExitCode == 137 && lt.ContainerID == old {
				return time.Now()
			}
			last = cs.String()
		}
		time.Sleep(100 * time.Millisecond)
	}
	a.t.Fatalf("pod %s: restart of the killed container not reported within %s: %s", pod, timeout, last)
	return time.Time{}
}

// metricOr reads one sample (labels included in name, as /metrics prints
// them); -1 when absent.
func (a *agent) metricOr(name string) float64 {
	_, body := a.get("/metrics")
	return metricIn(body, name)
}

func metricIn(body, name string) float64 {
	for _, l := range strings.Split(body, "\n") {
		if v, ok := strings.CutPrefix(l, name+" "); ok {
			if f, err := strconv.ParseFloat(strings.TrimSpace(v), 64); err == nil {
				return f
			}
		}
	}
	return -1
}
