package fault

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodeagent/nodeagent/internal/testing/faultproxy"
)

// Tests that stop or freeze a shared component (API server, etcd,
// containerd) do not call t.Parallel: Go runs them one after another before
// the parallel ones, whose faults stay within their own agent.

// TestAPIServerDownThenBack: the API server is stopped for 20s (60s in the
// long form) and started again. The agent must not crash or restart, must
// renew the Lease within one renew interval of the API server's return, and
// no pod may restart.
func TestAPIServerDownThenBack(t *testing.T) {
	down := pick(20*time.Second, 60*time.Second)
	a := newAgent(t, agentOpts{})
	a.waitReady(60 * time.Second)
	names := a.startPods(2)
	before := a.podContainers(names)
	o := a.observe()
	defer o.stop()
	cl := cluster(t)
	stopAt := time.Now()
	if err := cl.Stop("kube-apiserver", syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	time.Sleep(down - time.Since(stopAt))
	startAt := time.Now()
	if err := cl.Start(context.Background(), "kube-apiserver"); err != nil {
		t.Fatal(err)
	}
	back := time.Now()
	t.Logf("API server stopped %s, started again after %s, ready %s later",
		stopAt.Format("15:04:05.000"), startAt.Sub(stopAt).Round(time.Millisecond), back.Sub(startAt).Round(time.Millisecond))
	// The new process serves requests before its /readyz says so (here
	// "ready"): the first renewal written by it counts, even if seen before
	// ready (negative figures), not only the first one seen after ready.
	var r time.Time
	for deadline := back.Add(3 * renewInterval); r.IsZero(); time.Sleep(100 * time.Millisecond) {
		if r = o.renewedSince(startAt); r.IsZero() && time.Now().After(deadline) {
			t.Fatalf("no Lease renewal sent after the API server was started again (%s)", startAt.Format("15:04:05.000"))
		}
	}
	t.Logf("MEASURE apiserver-down: Lease renewed %s after the API server was ready again (down %s)", r.Sub(back).Round(time.Millisecond), back.Sub(stopAt).Round(time.Second))
	o.log(startAt)
	if r.Sub(back) > renewInterval {
		t.Errorf("Lease renewed %s after the API server returned, want within %s", r.Sub(back), renewInterval)
	}
	a.checkAlive()
	a.checkNoRestart(before, a.podContainers(names))
	o.mu.Lock()
	t.Logf("Node seen not Ready %d times during the outage (the API server was gone: not asserted)", len(o.notReady))
	o.mu.Unlock()
}

// TestEtcdFrozen: etcd is frozen (SIGSTOP) for 15s (60s long), so the API
// server accepts requests and hangs them. The Lease must be renewed within
// one renew interval of etcd's thaw, and in the short form the node must
// never be seen NotReady.
func TestEtcdFrozen(t *testing.T) {
	frozen := pick(15*time.Second, 60*time.Second)
	a := newAgent(t, agentOpts{})
	a.waitReady(60 * time.Second)
	o := a.observe()
	defer o.stop()
	cl := cluster(t)
	if err := cl.Freeze("etcd"); err != nil {
		t.Fatal(err)
	}
	thawed := false
	defer func() {
		if !thawed {
			_ = cl.Thaw("etcd")
		}
	}()
	time.Sleep(frozen)
	if err := cl.Thaw("etcd"); err != nil {
		t.Fatal(err)
	}
	thawed = true
	back := time.Now()
	r := o.waitRenewedAfter(back, 3*renewInterval)
	t.Logf("MEASURE etcd-frozen: Lease renewed %s after etcd was thawed (frozen %s)", r.Sub(back).Round(time.Millisecond), frozen)
	if r.Sub(back) > renewInterval {
		t.Errorf("Lease renewed %s after etcd was thawed, want within %s", r.Sub(back), renewInterval)
	}
	// The short freeze, the renew interval before it and the renewal after
	// the thaw fit in the 40 s grace period: the node must stay Ready. The
	// long form's 60 s freeze is longer than the grace, so kube-controller-
	// manager marks it NotReady once etcd answers again: logged, not asserted.
	// Two node-monitor periods (5 s) give the controller time to act.
	time.Sleep(10 * time.Second)
	o.stop()
	if !long {
		o.checkNeverNotReady()
	} else {
		o.mu.Lock()
		t.Logf("Node seen not Ready %d times (the freeze outlasted the 40 s grace period: not asserted)", len(o.notReady))
		o.mu.Unlock()
	}
	a.checkAlive()
}

// TestContainerdKilled: containerd is SIGKILLed under running pods and
// started again 2s later. No container may restart, no pod status may be
// lost, the PLEG must be healthy within 10s of containerd's return, the node
// never NotReady, and the agent must drive containerd again (a new pod runs).
func TestContainerdKilled(t *testing.T) {
	n := pick(5, 20)
	a := newAgent(t, agentOpts{})
	a.waitReady(60 * time.Second)
	names := a.startPods(n)
	before := a.podContainers(names)
	o := a.observe()
	defer o.stop()
	cl := cluster(t)
	killed := time.Now()
	if err := cl.Stop("containerd", syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	// A container exits while containerd is down: its exit event is lost
	// with containerd, and the agent must still find it and restart it.
	victim := names[0]
	victimPID := containerPID(t, strings.TrimPrefix(before[victim+"/sleep"].id, "containerd://"))
	if err := syscall.Kill(victimPID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * time.Second)
	// The PLEG noticed: its containerd event source failed, it relists
	// fast. Usually within the 2s outage; on a loaded machine a little
	// later, so containerd stays down until it did (bounded).
	fallback := a.metric("nodeagent_pleg_fallback_active")
	for deadline := time.Now().Add(10 * time.Second); fallback != 1 && time.Now().Before(deadline); {
		time.Sleep(100 * time.Millisecond)
		fallback = a.metric("nodeagent_pleg_fallback_active")
	}
	if fallback != 1 {
		t.Errorf("nodeagent_pleg_fallback_active = %v 12s after containerd was killed, want 1", fallback)
	}
	if err := cl.Start(context.Background(), "containerd"); err != nil {
		t.Fatal(err)
	}
	back := time.Now()
	t.Logf("containerd killed, serving again %s later", back.Sub(killed).Round(time.Millisecond))
	// Healthy again: /livez (PLEG relisting within its threshold) and the
	// containerd event source back (no fallback relisting).
	var healthy time.Time
	for deadline := back.Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if code, _ := a.get("/livez"); code == http.StatusOK && a.metric("nodeagent_pleg_fallback_active") == 0 {
			healthy = time.Now()
			break
		}
	}
	if healthy.IsZero() {
		_, body := a.get("/livez")
		t.Fatalf("PLEG not back in event mode and healthy within 30s of containerd's return: /livez %s", body)
	}
	t.Logf("MEASURE containerd-restart: PLEG healthy and back in event mode %s after containerd returned, %d pods", healthy.Sub(back).Round(time.Millisecond), n)
	if healthy.Sub(back) > 10*time.Second {
		t.Errorf("PLEG healthy %s after containerd returned, want within 10s", healthy.Sub(back))
	}
	// The runtime connection works again: a new pod starts.
	a.startPods(1)
	t.Logf("MEASURE containerd-restart: a pod created after the restart ran %s after containerd returned", time.Since(back).Round(time.Millisecond))
	// Observe a little longer for a delayed NotReady or restart.
	time.Sleep(5 * time.Second)
	a.waitPods(names, 30*time.Second)
	after := a.podContainers(names)
	// The victim restarted once; its old container's exit was not lost.
	if v := after[victim+"/sleep"]; v.restarts != 1 || v.id == before[victim+"/sleep"].id {
		t.Errorf("container killed while containerd was down: after the restart %+v, want restartCount 1 and a new container", v)
	} else {
		t.Logf("the container killed while containerd was down was restarted (restartCount 1, new ID)")
	}
	if p, err := a.env.Admin.CoreV1().Pods("default").Get(context.Background(), victim, metav1.GetOptions{}); err != nil {
		t.Error(err)
	} else if lt := p.Status.ContainerStatuses[0].LastTerminationState.Terminated; lt == nil || lt.ExitCode != 137 {
		t.Errorf("killed container's lastState = %+v, want terminated with exit code 137", p.Status.ContainerStatuses[0].LastTerminationState)
	}
	delete(before, victim+"/sleep")
	delete(after, victim+"/sleep")
	a.checkNoRestart(before, after)
	o.stop()
	o.checkNeverNotReady()
	a.checkAlive()
}

// TestEstablishedConnectionsBlackholed: every connection the agent has open
// is silently blackholed (kept open, nothing forwarded), new ones work, as
// when a load balancer loses its state. The Lease must be renewed on a new
// connection within 2 renew intervals, without waiting for TCP timeouts, and
// the node never NotReady. The agent's other clients (informers, status)
// must recover too: a pod created during the fault runs and is reported.
func TestEstablishedConnectionsBlackholed(t *testing.T) {
	t.Parallel()
	window := pick(60*time.Second, 3*time.Minute)
	a := newAgent(t, agentOpts{viaProxy: true})
	a.waitReady(60 * time.Second)
	o := a.observe()
	defer o.stop()
	// Start right after a renewal, so the fault catches an idle heartbeat
	// connection: the worst case for detection.
	o.waitRenewedAfter(time.Now(), 2*renewInterval)
	open, _ := a.proxy.Stats()
	t0 := time.Now()
	a.proxy.SetMode(faultproxy.BlackholeEstablished)
	t.Logf("blackholed %d established connections", open)
	created := time.Now()
	a.startPods(1) // fails the test if it does not run within 90s
	podTook := time.Since(created)
	t.Logf("MEASURE blackhole-established: a pod created during the fault ran and was reported %s after creation", podTook.Round(time.Millisecond))
	// The heartbeat finds its connection dead within ~15s and closes the
	// main client's connections too; without that the informers' watch
	// waits for client-go's HTTP/2 health check (30s + 15s).
	if podTook > 30*time.Second {
		t.Errorf("a pod created on a blackholed watch connection took %s to run, want within 30s", podTook)
	}
	r := o.waitRenewedAfter(t0, 3*renewInterval)
	time.Sleep(window - time.Since(t0))
	end := time.Now()
	gap, at, renewals := o.maxGap(t0, end)
	_, accepted := a.proxy.Stats()
	t.Logf("MEASURE blackhole-established: first renewal %s after the fault; longest gap between renewals %s (from %s), %d renewals in %s; %d connections accepted by the proxy",
		r.Sub(t0).Round(time.Millisecond), gap.Round(time.Millisecond), at.Format("15:04:05.000"), renewals, end.Sub(t0).Round(time.Second), accepted)
	if gap > 2*renewInterval {
		t.Errorf("%s without a Lease renewal, want at most 2 renew intervals (%s)", gap, 2*renewInterval)
	}
	o.stop()
	o.checkNeverNotReady()
	a.checkAlive()
}

// TestAllConnectionsBlackholed: nothing is forwarded on any connection for
// 20s (60s long); then forwarding resumes. The Lease must be renewed within
// one renew interval, and in the short form the node must never be seen
// NotReady.
func TestAllConnectionsBlackholed(t *testing.T) {
	t.Parallel()
	dur := pick(20*time.Second, 60*time.Second)
	a := newAgent(t, agentOpts{viaProxy: true})
	a.waitReady(60 * time.Second)
	o := a.observe()
	defer o.stop()
	t0 := time.Now()
	a.proxy.SetMode(faultproxy.BlackholeAll)
	time.Sleep(dur)
	a.proxy.SetMode(faultproxy.Forward)
	back := time.Now()
	r := o.waitRenewedAfter(back, 3*renewInterval)
	o.log(t0)
	t.Logf("MEASURE blackhole-all: Lease renewed %s after forwarding resumed (blackholed %s)", r.Sub(back).Round(time.Millisecond), dur)
	if r.Sub(back) > renewInterval {
		t.Errorf("Lease renewed %s after forwarding resumed, want within %s", r.Sub(back), renewInterval)
	}
	// As for etcd: the short partition fits in the 40 s grace period with a
	// renew interval on each side, the long form's 60 s does not.
	time.Sleep(10 * time.Second) // two node-monitor periods
	o.stop()
	if !long {
		o.checkNeverNotReady()
	} else {
		o.mu.Lock()
		t.Logf("Node seen not Ready %d times (the partition outlasted the 40 s grace period: not asserted)", len(o.notReady))
		o.mu.Unlock()
	}
	a.checkAlive()
}

// TestConnectionsReset: every connection of the agent is reset (a
// middlebox restart). The Lease must be renewed on schedule, the node stay
// Ready, and the informers reconnect: a pod created just after runs.
func TestConnectionsReset(t *testing.T) {
	t.Parallel()
	a := newAgent(t, agentOpts{viaProxy: true})
	a.waitReady(60 * time.Second)
	o := a.observe()
	defer o.stop()
	t0 := time.Now()
	n := a.proxy.ResetAll()
	a.startPods(1)
	t.Logf("MEASURE reset-all: %d connections reset; a pod created after it ran and was reported %s later", n, time.Since(t0).Round(time.Millisecond))
	r := o.waitRenewedAfter(t0, 3*renewInterval)
	time.Sleep(time.Until(t0.Add(2 * renewInterval)))
	gap, _, _ := o.maxGap(t0, time.Now())
	t.Logf("MEASURE reset-all: first renewal seen %s after the reset, longest gap %s", r.Sub(t0).Round(time.Millisecond), gap.Round(time.Millisecond))
	if gap > renewInterval+2*time.Second {
		t.Errorf("%s without a renewal after a reset, want at most %s", gap, renewInterval+2*time.Second)
	}
	o.stop()
	o.checkNeverNotReady()
	a.checkAlive()
}

// TestAPIServerLatency: every response from the API server arrives 2s late
// for 60s (5 min long). Renewals may be late but never so late that the
// node goes NotReady, and the agent must not grow goroutines.
func TestAPIServerLatency(t *testing.T) {
	t.Parallel()
	dur := pick(60*time.Second, 5*time.Minute)
	const delay = 2 * time.Second
	a := newAgent(t, agentOpts{viaProxy: true})
	a.waitReady(60 * time.Second)
	a.startPods(1)
	time.Sleep(3 * time.Second) // let start-up goroutines settle
	g0 := a.metric("go_goroutines")
	o := a.observe()
	defer o.stop()
	t0 := time.Now()
	a.proxy.SetLatency(faultproxy.Down, delay)
	time.Sleep(dur)
	gDuring := a.metric("go_goroutines")
	end := time.Now()
	a.proxy.SetLatency(faultproxy.Down, 0)
	gap, at, renewals := o.maxGap(t0, end)
	t.Logf("MEASURE latency: %s per response for %s: longest gap between renewals %s (from %s), %d renewals",
		delay, dur, gap.Round(time.Millisecond), at.Format("15:04:05.000"), renewals)
	if gap > renewInterval+2*delay+2*time.Second {
		t.Errorf("%s without a Lease renewal under %s latency, want at most %s", gap, delay, renewInterval+2*delay+2*time.Second)
	}
	time.Sleep(10 * time.Second)
	g1 := a.metric("go_goroutines")
	t.Logf("MEASURE latency: go_goroutines %v before, %v at the end of the latency, %v 10s after", g0, gDuring, g1)
	if g1 > g0+10 {
		t.Errorf("go_goroutines grew from %v to %v across the latency", g0, g1)
	}
	o.stop()
	o.checkNeverNotReady()
	a.checkAlive()
}

// TestAgentCPUStarved: the agent is confined to 5% of a core (a CFS quota)
// for 60s (10 min long). No renewal window may be missed and the node must
// never go NotReady.
func TestAgentCPUStarved(t *testing.T) {
	t.Parallel()
	dur := pick(60*time.Second, 10*time.Minute)
	a := newAgent(t, agentOpts{})
	a.waitReady(60 * time.Second)
	a.startPods(1)
	o := a.observe()
	defer o.stop()
	stat := confineCPU(t, a.cmd.Process.Pid, 5000, 100000)
	t0 := time.Now()
	// Work for the starved agent: an idle agent needs less than 5% of a
	// core, so pods are started (and their status reported) under the quota.
	a.startPods(3)
	t.Logf("MEASURE cpu-5pct: 3 pods started under the quota ran and were reported %s after creation", time.Since(t0).Round(time.Millisecond))
	time.Sleep(time.Until(t0.Add(dur)))
	end := time.Now()
	gap, at, renewals := o.maxGap(t0, end)
	t.Logf("MEASURE cpu-5pct: longest gap between renewals %s (from %s), %d renewals in %s; %s",
		gap.Round(time.Millisecond), at.Format("15:04:05.000"), renewals, dur, stat())
	if gap > renewInterval+2*time.Second {
		t.Errorf("%s without a Lease renewal at 5%% of a core, want at most %s", gap, renewInterval+2*time.Second)
	}
	o.stop()
	o.checkNeverNotReady()
	a.checkAlive()
}

// confineCPU moves pid into a new cpu cgroup (v1 or v2) with a CFS quota of
// quota/period, removed when the test ends (the process moves back to the
// root first). stat reports the cgroup's throttling figures.
func confineCPU(t *testing.T, pid int, quota, period int) (stat func() string) {
	t.Helper()
	name := "nodeagent-fault-" + strconv.Itoa(pid)
	var dir, root string
	if _, err := os.Stat("/sys/fs/cgroup/cgroup.controllers"); err == nil {
		root = "/sys/fs/cgroup"
		dir = filepath.Join(root, name)
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		write(t, filepath.Join(dir, "cpu.max"), strconv.Itoa(quota)+" "+strconv.Itoa(period))
	} else {
		root = "/sys/fs/cgroup/cpu"
		dir = filepath.Join(root, name)
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		write(t, filepath.Join(dir, "cpu.cfs_period_us"), strconv.Itoa(period))
		write(t, filepath.Join(dir, "cpu.cfs_quota_us"), strconv.Itoa(quota))
	}
	write(t, filepath.Join(dir, "cgroup.procs"), strconv.Itoa(pid))
	t.Cleanup(func() {
		_ = os.WriteFile(filepath.Join(root, "cgroup.procs"), []byte(strconv.Itoa(pid)), 0o644)
		_ = os.Remove(dir)
	})
	return func() string {
		b, _ := os.ReadFile(filepath.Join(dir, "cpu.stat"))
		return "cpu.stat: " + strings.Join(strings.Fields(string(b)), " ")
	}
}

func write(t *testing.T, path, v string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(v), 0o644); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

// containerPID finds the main process of a running container by its
// cgroup, which ends with the container ID.
func containerPID(t *testing.T, id string) int {
	t.Helper()
	procs, _ := os.ReadDir("/proc")
	for _, p := range procs {
		pid, err := strconv.Atoi(p.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + p.Name() + "/cgroup")
		if err != nil || !strings.Contains(string(b), id) {
			continue
		}
		if cmd, _ := os.ReadFile("/proc/" + p.Name() + "/cmdline"); strings.HasPrefix(string(cmd), "sleep\x00") {
			return pid
		}
	}
	t.Fatalf("no process of container %s found", id)
	return 0
}
