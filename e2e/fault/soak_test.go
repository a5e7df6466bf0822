package fault

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/nodeagent/nodeagent/internal/testing/faultproxy"
	"github.com/nodeagent/nodeagent/internal/testing/testimage"
	"github.com/nodeagent/nodeagent/runtime"
)

// TestSoak is the randomized soak of issue 15 (`make soak`, not in CI): one
// agent behind a faultproxy keeps a set of stable pods running while pods are
// created and deleted, and a seeded scheduler injects the suite's faults at
// random with random durations (API server stopped, etcd frozen, established
// or all connections blackholed, latency, connections reset, containerd
// killed, the agent's CPU capped at 5%, the agent SIGKILLed and started
// again). Between faults every expected pod must converge. It counts false
// NotReady, missed renewal windows, lost pods (an expected pod not Running, a
// container restarted without cause), duplicate containers and orphans, and
// prints a report. NODEAGENT_SOAK=<duration> enables it;
// NODEAGENT_SOAK_SEED=<n> replays a schedule. See docs/benchmarks.md.
func TestSoak(t *testing.T) {
	v := os.Getenv("NODEAGENT_SOAK")
	if v == "" {
		t.Skip("the soak runs under `make soak` (NODEAGENT_SOAK=<duration>)")
	}
	dur, err := time.ParseDuration(v)
	if err != nil {
		t.Fatalf("NODEAGENT_SOAK: %v", err)
	}
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("NODEAGENT_SOAK_SEED"); s != "" {
		if seed, err = strconv.ParseUint(s, 10, 64); err != nil {
			t.Fatalf("NODEAGENT_SOAK_SEED: %v", err)
		}
	}
	t.Logf("SOAK seed %d (replay: NODEAGENT_SOAK_SEED=%d), duration %s", seed, seed, dur)

	// (newAgent's thresholds keep a shared host's disk near the default 15%
	// imagefs threshold from evicting its pods: the soak is not about disk
	// pressure.)
	a := newAgent(t, agentOpts{viaProxy: true})
	a.waitReady(60 * time.Second)
	rt, err := runtime.New(runtime.Options{Address: a.env.ContainerdAddress, Namespace: a.ns})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rt.Close() })
	s := &soak{
		t: t, a: a, rt: rt, rng: rand.New(rand.NewPCG(seed, 0x50a4)),
		first: map[string]containerState{}, churn: map[string]time.Time{},
		uncertain: map[string]bool{}, deleting: map[string]time.Time{},
		lostSeen: map[string]bool{}, restartSeen: map[string]bool{},
	}
	s.stable = a.startPods(soakStablePods)
	for k, c := range a.podContainers(s.stable) {
		s.first[strings.TrimSuffix(k, "/sleep")] = c
	}
	o := a.observe()
	defer o.stop()
	nr := s.watchReady()
	defer nr()
	stopLoad := s.sampleLoad()

	start := time.Now()
	deadline := start.Add(dur)
	s.checkpoint("start")
	for time.Now().Before(deadline) {
		s.runFor(s.between(15*time.Second, 45*time.Second), deadline, nil)
		if !time.Now().Before(deadline) {
			break
		}
		s.inject(deadline)
		s.checkpoint(s.faults[len(s.faults)-1].kind)
	}
	end := time.Now()
	s.checkpoint("end")
	stopLoad()
	o.stop()
	s.report(o, start, end, seed)
}

const (
	soakStablePods = 6 // never deleted: their containers must never restart
	soakChurnPods  = 4 // churn pods alive at a time (one created, the oldest deleted)
)

type soak struct {
	t   *testing.T
	a   *agent
	rt  *runtime.Runtime
	rng *rand.Rand

	stable    []string
	churn     map[string]time.Time // churn pods created (not yet deleted): when
	uncertain map[string]bool      // creations that failed (the API server may have them)
	deleting  map[string]time.Time // pods deleted, not yet gone from the API
	first     map[string]containerState
	nextPod   int

	faults      []soakFault
	created     int
	deleted     int
	churnErrs   int
	agentKills  int
	agentCrash  int
	checkpoints int
	lost        []string
	restarted   []string
	duplicates  []string
	orphans     []string
	stuck       []string
	lostSeen    map[string]bool
	restartSeen map[string]bool
	converge    []time.Duration // how long each checkpoint took to see every pod Running

	mu       sync.Mutex
	notReady []soakSighting
	load     []float64
}

type soakFault struct {
	kind       string
	start, end time.Time
	// apiCut: the agent could not reach the API server for the whole fault
	// (renewals impossible; NotReady excused when it lasted longer than
	// the node monitor grace period allows).
	apiCut bool
	// extra is how much longer than one renew interval (+2s) a renewal gap
	// overlapping the fault may be.
	extra time.Duration
}

type soakSighting struct {
	at   time.Time
	cond string
}

func (s *soak) between(lo, hi time.Duration) time.Duration {
	return lo + time.Duration(s.rng.Int64N(int64(hi-lo)+1))
}

// runFor sleeps d (not past deadline), churning pods every 10–25s and
// relaunching the agent if it crashed; during is checked each second.
func (s *soak) runFor(d time.Duration, deadline time.Time, during func()) {
	end := time.Now().Add(d)
	if end.After(deadline) {
		end = deadline
	}
	nextChurn := time.Now().Add(s.between(10*time.Second, 25*time.Second))
	for time.Now().Before(end) {
		if during != nil {
			during()
		}
		s.checkCrash()
		if !time.Now().Before(nextChurn) {
			s.churnOnce()
			nextChurn = time.Now().Add(s.between(10*time.Second, 25*time.Second))
		}
		time.Sleep(min(time.Second, time.Until(end)))
	}
}

// checkCrash counts an agent exit the soak did not cause and starts it again.
func (s *soak) checkCrash() {
	select {
	case <-s.a.exited:
		s.agentCrash++
		s.t.Errorf("SOAK the agent exited on its own at %s: %v", time.Now().Format("15:04:05"), s.a.cmd.ProcessState)
		soakRelaunch(s.a, false)
	default:
	}
}

// soakRelaunch SIGKILLs the agent (when kill) and starts it again with the
// same command line: same node, rootDir and containerd namespace.
func soakRelaunch(a *agent, kill bool) {
	a.t.Helper()
	if kill {
		_ = a.cmd.Process.Signal(syscall.SIGKILL)
	}
	<-a.exited // closed by the goroutine waiting for the old process
	cmd := exec.Command(a.cmd.Path, a.cmd.Args[1:]...)
	cmd.Stdout, cmd.Stderr = a.out, a.out
	fmt.Fprintf(a.out, "--- soak: agent started again at %s ---\n", time.Now().Format(time.RFC3339Nano))
	if err := cmd.Start(); err != nil {
		a.t.Fatalf("starting the agent again: %v", err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	a.cmd, a.exited = cmd, exited
}

// client returns a client with a per-request timeout: a hung API server
// must not hang the soak.
func (s *soak) client() kubernetes.Interface {
	cfg := rest(s.a)
	cfg.Timeout = 10 * time.Second
	return kubernetes.NewForConfigOrDie(cfg)
}

// churnOnce creates one pod and, when more than soakChurnPods are alive,
// deletes the oldest; failures (the API server may be down) are retried at
// the next checkpoint.
func (s *soak) churnOnce() {
	c := s.client()
	ctx := context.Background()
	s.nextPod++
	name := fmt.Sprintf("%s-c%d", s.a.node, s.nextPod)
	if _, err := c.CoreV1().Pods("default").Create(ctx, soakPod(name, s.a.node), metav1.CreateOptions{}); err != nil {
		s.churnErrs++
		s.uncertain[name] = true // a timed-out request may still land
	} else {
		s.created++
		s.churn[name] = time.Now()
	}
	if len(s.churn) <= soakChurnPods {
		return
	}
	oldest := ""
	for n, at := range s.churn {
		if oldest == "" || at.Before(s.churn[oldest]) {
			oldest = n
		}
	}
	s.delete(c, oldest)
}

func (s *soak) delete(c kubernetes.Interface, name string) {
	delete(s.churn, name)
	if _, ok := s.deleting[name]; !ok {
		s.deleting[name] = time.Now()
	}
	err := c.CoreV1().Pods("default").Delete(context.Background(), name, metav1.DeleteOptions{})
	switch {
	case err == nil:
		s.deleted++
	case apierrors.IsNotFound(err):
	default:
		s.churnErrs++
		s.deleting[name] = time.Time{} // retried at the checkpoint
	}
}

func soakPod(name, node string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: corev1.PodSpec{
			NodeName:                      node,
			AutomountServiceAccountToken:  ptr.To(false),
			TerminationGracePeriodSeconds: ptr.To[int64](1),
			Containers: []corev1.Container{{
				Name: "sleep", Image: testimage.Ref, Command: []string{"sleep", "86400"},
			}},
		},
	}
}

// inject picks a fault and a duration at random, applies it, keeps churning
// while it lasts, and reverts it.
func (s *soak) inject(deadline time.Time) {
	kinds := []string{"apiserver-down", "etcd-frozen", "blackhole-established", "blackhole-all",
		"latency-2s", "reset-all", "containerd-killed", "cpu-5pct", "agent-sigkill"}
	kind := kinds[s.rng.IntN(len(kinds))]
	f := soakFault{kind: kind, start: time.Now()}
	cl := cluster(s.t)
	ctx := context.Background()
	fail := func(err error) {
		if err != nil {
			s.t.Fatalf("SOAK %s: %v", kind, err)
		}
	}
	var d time.Duration
	switch kind {
	case "apiserver-down":
		d = s.between(5*time.Second, 60*time.Second)
		f.apiCut = true
		fail(cl.Stop("kube-apiserver", syscall.SIGTERM))
		time.Sleep(min(d, max(time.Until(deadline), time.Second))) // nothing to churn against
		fail(cl.Start(ctx, "kube-apiserver"))
	case "etcd-frozen":
		d = s.between(5*time.Second, 60*time.Second)
		f.apiCut = true
		fail(cl.Freeze("etcd"))
		time.Sleep(min(d, max(time.Until(deadline), time.Second)))
		fail(cl.Thaw("etcd"))
	case "blackhole-established":
		d = s.between(20*time.Second, 90*time.Second)
		f.extra = renewInterval // renewed on a new connection within 2 intervals
		s.a.proxy.SetMode(faultproxy.BlackholeEstablished)
		s.runFor(d, deadline, nil)
		s.a.proxy.SetMode(faultproxy.Forward)
	case "blackhole-all":
		d = s.between(5*time.Second, 60*time.Second)
		f.apiCut = true
		s.a.proxy.SetMode(faultproxy.BlackholeAll)
		s.runFor(d, deadline, nil)
		s.a.proxy.SetMode(faultproxy.Forward)
	case "latency-2s":
		d = s.between(30*time.Second, 180*time.Second)
		f.extra = 2 * 2 * time.Second
		s.a.proxy.SetLatency(faultproxy.Down, 2*time.Second)
		s.runFor(d, deadline, nil)
		s.a.proxy.SetLatency(faultproxy.Down, 0)
	case "reset-all":
		s.a.proxy.ResetAll()
	case "containerd-killed":
		d = s.between(time.Second, 10*time.Second)
		fail(cl.Stop("containerd", syscall.SIGKILL))
		time.Sleep(d)
		fail(cl.Start(ctx, "containerd"))
	case "cpu-5pct":
		d = s.between(30*time.Second, 180*time.Second)
		undo := soakConfineCPU(s.t, s.a.cmd.Process.Pid, 5000, 100000)
		s.runFor(d, deadline, nil)
		undo()
	case "agent-sigkill":
		// Killed at a random point of its work, started again at once
		// (or after up to 5s): renewal resumes with the new process.
		f.extra = 10 * time.Second
		s.churnOnce() // work in flight when it dies
		time.Sleep(s.between(0, 2*time.Second))
		soakRelaunch(s.a, true)
		s.agentKills++
		d = s.between(0, 5*time.Second)
	}
	f.end = time.Now()
	s.faults = append(s.faults, f)
	s.t.Logf("SOAK %s fault %s for %s (%s)", f.start.Format("15:04:05"), kind, d.Round(100*time.Millisecond), f.end.Sub(f.start).Round(100*time.Millisecond))
}

// soakConfineCPU moves pid into a cpu cgroup with a CFS quota; undo moves it
// back and removes the cgroup.
func soakConfineCPU(t *testing.T, pid, quota, period int) (undo func()) {
	t.Helper()
	name := "nodeagent-soak-" + strconv.Itoa(pid)
	root := "/sys/fs/cgroup/cpu"
	if _, err := os.Stat("/sys/fs/cgroup/cgroup.controllers"); err == nil {
		root = "/sys/fs/cgroup"
	}
	dir := filepath.Join(root, name)
	if err := os.Mkdir(dir, 0o755); err != nil && !os.IsExist(err) {
		t.Fatal(err)
	}
	if root == "/sys/fs/cgroup" {
		write(t, filepath.Join(dir, "cpu.max"), strconv.Itoa(quota)+" "+strconv.Itoa(period))
	} else {
		write(t, filepath.Join(dir, "cpu.cfs_period_us"), strconv.Itoa(period))
		write(t, filepath.Join(dir, "cpu.cfs_quota_us"), strconv.Itoa(quota))
	}
	write(t, filepath.Join(dir, "cgroup.procs"), strconv.Itoa(pid))
	undo = func() {
		_ = os.WriteFile(filepath.Join(root, "cgroup.procs"), []byte(strconv.Itoa(pid)), 0o644)
		_ = os.Remove(dir)
	}
	t.Cleanup(undo)
	return undo
}

// checkpoint waits (up to 90s) until every expected pod runs with its first
// container and every deleted pod is gone, then counts what did not
// converge, restarted containers, duplicates and orphans in containerd.
func (s *soak) checkpoint(after string) {
	s.checkpoints++
	c := s.client()
	ctx := context.Background()
	// Settle what the faults left uncertain.
	for name := range s.uncertain {
		if _, err := c.CoreV1().Pods("default").Get(ctx, name, metav1.GetOptions{}); err == nil {
			s.created++
			s.churn[name] = time.Now()
			delete(s.uncertain, name)
		} else if apierrors.IsNotFound(err) {
			delete(s.uncertain, name)
		}
	}
	for name, at := range s.deleting {
		if at.IsZero() {
			s.delete(c, name)
		}
	}
	expected := append([]string{}, s.stable...)
	for n := range s.churn {
		expected = append(expected, n)
	}
	sort.Strings(expected)
	t0 := time.Now()
	var pods map[string]*corev1.Pod
	var notRunning, notGone []string
	listed := false
	for {
		notRunning, notGone = nil, nil
		pods = map[string]*corev1.Pod{}
		list, err := c.CoreV1().Pods("default").List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + s.a.node})
		listed = err == nil
		if err == nil {
			for i := range list.Items {
				pods[list.Items[i].Name] = &list.Items[i]
			}
			for _, n := range expected {
				if p := pods[n]; p == nil || !soakRunning(p) {
					notRunning = append(notRunning, n)
				}
			}
			for n := range s.deleting {
				if pods[n] != nil {
					notGone = append(notGone, n)
				}
			}
		}
		if err == nil && len(notRunning)+len(notGone) == 0 {
			break
		}
		if time.Since(t0) > 90*time.Second {
			break
		}
		time.Sleep(time.Second)
	}
	s.converge = append(s.converge, time.Since(t0))
	for _, n := range notRunning {
		if !s.lostSeen[n] {
			s.lostSeen[n] = true
			desc := "missing from the API"
			if p := pods[n]; p != nil {
				desc = fmt.Sprintf("phase %s, containers %+v", p.Status.Phase, p.Status.ContainerStatuses)
			}
			s.lost = append(s.lost, fmt.Sprintf("%s after %s: %s not Running 90s later (%s)", time.Now().Format("15:04:05"), after, n, desc))
		}
	}
	for _, n := range notGone {
		s.stuck = append(s.stuck, fmt.Sprintf("%s after %s: %s deleted at %s, still in the API", time.Now().Format("15:04:05"), after, n, s.deleting[n].Format("15:04:05")))
		delete(s.deleting, n) // counted once
	}
	for n := range s.deleting {
		if pods[n] == nil {
			delete(s.deleting, n)
		}
	}
	// Restarts without cause: nothing the soak does may restart a container.
	uids := map[string]bool{}
	for n, p := range pods {
		uids[string(p.UID)] = true
		if len(p.Status.ContainerStatuses) != 1 || p.Status.ContainerStatuses[0].State.Running == nil {
			continue
		}
		cs := p.Status.ContainerStatuses[0]
		now := containerState{id: cs.ContainerID, restarts: cs.RestartCount, started: cs.State.Running.StartedAt.Time}
		f, ok := s.first[n]
		if !ok {
			s.first[n] = now
			f = now
		}
		if (now.id != f.id || now.restarts != 0) && !s.restartSeen[n+now.id] {
			s.restartSeen[n+now.id] = true
			// The previous instance's end (exit code, reason, when) is
			// what tells a container's own exit from a kill.
			last := "no lastState"
			if t := cs.LastTerminationState.Terminated; t != nil {
				last = fmt.Sprintf("last exit code %d reason %q signal %d finished %s", t.ExitCode, t.Reason, t.Signal, t.FinishedAt.Format("15:04:05.000"))
			}
			s.restarted = append(s.restarted, fmt.Sprintf("%s after %s: %s container %s restart %d (first %s; %s)", time.Now().Format("15:04:05"), after, n, now.id, now.restarts, f.id, last))
		}
	}
	// Duplicates and orphans in containerd: at most one running container
	// per pod and name, none for a pod the API server no longer has.
	if !listed {
		s.t.Logf("SOAK checkpoint after %s: the API server did not answer for 90s", after)
		return
	}
	// The client's connection may still be in gRPC's reconnect backoff
	// after containerd came back: retry for a while.
	cs, err := s.rt.ListContainers(ctx)
	for try := 0; err != nil && try < 20; try++ {
		time.Sleep(time.Second)
		cs, err = s.rt.ListContainers(ctx)
	}
	if err != nil {
		s.t.Logf("SOAK checkpoint after %s: listing containers: %v", after, err)
		return
	}
	running := map[string][]string{}
	for _, k := range cs {
		if k.State != runtime.StateRunning {
			continue
		}
		key := k.Pod.Name + "/" + k.Name
		running[key] = append(running[key], k.ID)
		if !uids[string(k.Pod.UID)] && pods[k.Pod.Name] == nil {
			s.orphans = append(s.orphans, fmt.Sprintf("%s after %s: container %s of pod %s (gone from the API) running", time.Now().Format("15:04:05"), after, k.ID, key))
		}
	}
	for key, ids := range running {
		if len(ids) > 1 {
			s.duplicates = append(s.duplicates, fmt.Sprintf("%s after %s: %s running %d times: %v", time.Now().Format("15:04:05"), after, key, len(ids), ids))
		}
	}
}

func soakRunning(p *corev1.Pod) bool {
	cs := p.Status.ContainerStatuses
	return p.DeletionTimestamp == nil && p.Status.Phase == corev1.PodRunning && len(cs) == 1 && cs[0].State.Running != nil && cs[0].Ready
}

// watchReady polls the Node every 500ms and records every sighting of
// Ready != True.
func (s *soak) watchReady() (stop func()) {
	cfg := rest(s.a)
	cfg.Timeout = 2 * time.Second
	c := kubernetes.NewForConfigOrDie(cfg)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(500 * time.Millisecond)
		defer tick.Stop()
		for {
			if n, err := c.CoreV1().Nodes().Get(ctx, s.a.node, metav1.GetOptions{}); err == nil && !ready(n) {
				cond := "no Ready condition"
				for _, c := range n.Status.Conditions {
					if c.Type == corev1.NodeReady {
						cond = fmt.Sprintf("Ready=%s %s: %s", c.Status, c.Reason, c.Message)
					}
				}
				s.mu.Lock()
				s.notReady = append(s.notReady, soakSighting{time.Now(), cond})
				s.mu.Unlock()
			}
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
	return func() { cancel(); <-done }
}

// sampleLoad records the 1-minute load average every 30s.
func (s *soak) sampleLoad() (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			if b, err := os.ReadFile("/proc/loadavg"); err == nil {
				if f := strings.Fields(string(b)); len(f) > 0 {
					if v, err := strconv.ParseFloat(f[0], 64); err == nil {
						s.mu.Lock()
						s.load = append(s.load, v)
						s.mu.Unlock()
					}
				}
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(30 * time.Second):
			}
		}
	}()
	return func() { cancel(); <-done }
}

// missedWindows returns every renewal gap longer than its allowance: one
// renew interval + 2s; when the gap overlaps a fault, that fault's extra,
// and for a fault that cut the agent off the API server, the renewal must
// come within that allowance of the fault's end.
func (s *soak) missedWindows(renewals []time.Time) (missed []string, worst map[string]time.Duration) {
	worst = map[string]time.Duration{}
	base := renewInterval + 2*time.Second
	for i := 1; i < len(renewals); i++ {
		prev, r := renewals[i-1], renewals[i]
		gap := r.Sub(prev)
		allowed := base
		label := "none"
		for _, f := range s.faults {
			if f.start.After(r) || f.end.Before(prev) {
				continue
			}
			a := base + f.extra
			if f.apiCut {
				a = f.end.Sub(prev) + base
			}
			allowed, label = max(allowed, a), f.kind
		}
		if gap > worst[label] {
			worst[label] = gap
		}
		if gap > allowed {
			missed = append(missed, fmt.Sprintf("%s: %s without a renewal (allowed %s, fault %s)", prev.Format("15:04:05"), gap.Round(time.Millisecond), allowed.Round(time.Millisecond), label))
		}
	}
	return missed, worst
}

// notReadyEpisodes groups the NotReady sightings into episodes (sightings
// less than 2s apart) and splits them into excused ones (starting within a
// fault that cut the agent off the API server for longer than 30s, or 30s
// after it: the node monitor's grace is 40s) and false ones. Each is
// described with its length and, when excused, how long after the API came
// back the Node was Ready again.
//
// A Ready=Unknown episode (written by the node lifecycle controller) that
// starts less than 35s (the 40s grace less the monitor's 5s period) after a
// renewal the soak itself saw through the API server is counted apart, as
// stale: the Lease was fresh, and the controller had not seen it — after
// API server restarts its informers reconnect with a backoff that grows
// with consecutive failures. Such an episode says nothing about the agent
// and is reported with its evidence, not counted as a failure.
func (s *soak) notReadyEpisodes(renewals []time.Time) (false_, excused, stale []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	type episode struct {
		first, last soakSighting
		n           int
	}
	var eps []episode
	for _, n := range s.notReady {
		if k := len(eps); k > 0 && n.at.Sub(eps[k-1].last.at) < 2*time.Second {
			eps[k-1].last = n
			eps[k-1].n++
			continue
		}
		eps = append(eps, episode{first: n, last: n, n: 1})
	}
	for _, e := range eps {
		var cause *soakFault
		for i, f := range s.faults {
			if f.apiCut && f.end.Sub(f.start) > 30*time.Second && !e.first.at.Before(f.start) && e.first.at.Before(f.end.Add(30*time.Second)) {
				cause = &s.faults[i]
			}
		}
		line := fmt.Sprintf("%s to %s (%s, %d sightings) %s", e.first.at.Format("15:04:05.000"), e.last.at.Format("15:04:05.000"),
			e.last.at.Sub(e.first.at).Round(100*time.Millisecond), e.n, e.first.cond)
		if cause == nil {
			var last time.Time
			for _, r := range renewals {
				if !r.After(e.first.at) && r.After(last) {
					last = r
				}
			}
			if strings.HasPrefix(e.first.cond, "Ready=Unknown") && !last.IsZero() && e.first.at.Sub(last) < 35*time.Second {
				stale = append(stale, fmt.Sprintf("%s; the Lease was renewed at %s, %s before", line, last.Format("15:04:05.000"), e.first.at.Sub(last).Round(100*time.Millisecond)))
				continue
			}
			false_ = append(false_, line)
			continue
		}
		excused = append(excused, fmt.Sprintf("%s; after %s %s (cut off %s), Ready again %s after it ended", line, cause.kind,
			cause.start.Format("15:04:05"), cause.end.Sub(cause.start).Round(time.Second), e.last.at.Sub(cause.end).Round(100*time.Millisecond)))
	}
	return false_, excused, stale
}

func (s *soak) report(o *observer, start, end time.Time, seed uint64) {
	t := s.t
	o.mu.Lock()
	renewals := append([]time.Time{}, o.renewals...)
	o.mu.Unlock()
	var inRun []time.Time
	for _, r := range renewals {
		if !r.Before(start.Add(-renewInterval)) {
			inRun = append(inRun, r)
		}
	}
	missed, worst := s.missedWindows(inRun)
	falseNR, excusedNR, staleNR := s.notReadyEpisodes(inRun)
	counts := map[string]int{}
	total := map[string]time.Duration{}
	for _, f := range s.faults {
		counts[f.kind]++
		total[f.kind] += f.end.Sub(f.start)
	}
	var kinds []string
	for k := range counts {
		kinds = append(kinds, k)
	}
	sort.Strings(kinds)
	s.mu.Lock()
	load := append([]float64{}, s.load...)
	s.mu.Unlock()
	lmin, lmax, lsum := 1e9, 0.0, 0.0
	for _, l := range load {
		lmin, lmax, lsum = min(lmin, l), max(lmax, l), lsum+l
	}
	var conv time.Duration
	for _, c := range s.converge {
		conv = max(conv, c)
	}
	t.Logf("SOAK REPORT seed %d: ran %s (%s to %s), %d faults, %d checkpoints",
		seed, end.Sub(start).Round(time.Second), start.Format("15:04:05"), end.Format("15:04:05"), len(s.faults), s.checkpoints)
	for _, k := range kinds {
		t.Logf("SOAK REPORT   fault %-22s %3d times, %s in all; longest renewal gap across it %s", k, counts[k], total[k].Round(time.Second), worst[k].Round(time.Millisecond))
	}
	t.Logf("SOAK REPORT   longest renewal gap with no fault %s; %d renewals", worst["none"].Round(time.Millisecond), len(inRun))
	t.Logf("SOAK REPORT pods: %d stable, %d created, %d deleted, %d API calls failed under faults (retried); agent SIGKILLed %d times, crashed %d times; longest convergence at a checkpoint %s",
		len(s.stable), s.created, s.deleted, s.churnErrs, s.agentKills, s.agentCrash, conv.Round(100*time.Millisecond))
	if len(load) > 0 {
		t.Logf("SOAK REPORT load average (1 min, every 30s): min %.1f, mean %.1f, max %.1f", lmin, lsum/float64(len(load)), lmax)
	}
	t.Logf("SOAK REPORT missed renewal windows: %d", len(missed))
	t.Logf("SOAK REPORT false NotReady episodes: %d (excused, API cut off > 30s: %d; the controller's stale view of a fresh Lease: %d)", len(falseNR), len(excusedNR), len(staleNR))
	t.Logf("SOAK REPORT lost pods: %d; containers restarted without cause: %d", len(s.lost), len(s.restarted))
	t.Logf("SOAK REPORT duplicate containers: %d; orphan containers: %d; deletions stuck > 90s: %d", len(s.duplicates), len(s.orphans), len(s.stuck))
	for name, l := range map[string][]string{"missed renewal window": missed, "false NotReady": falseNR, "excused NotReady": excusedNR,
		"stale-view NotReady": staleNR,
		"lost pod":            s.lost, "restart without cause": s.restarted, "duplicate": s.duplicates, "orphan": s.orphans, "stuck deletion": s.stuck} {
		for i, line := range l {
			if i == 20 {
				t.Logf("SOAK   %s: ... %d more", name, len(l)-20)
				break
			}
			t.Logf("SOAK   %s: %s", name, line)
		}
	}
	if len(missed)+len(falseNR)+len(s.lost)+len(s.restarted)+len(s.duplicates)+len(s.orphans)+len(s.stuck)+s.agentCrash > 0 {
		t.Errorf("SOAK failed: see the report above (seed %d)", seed)
	}
}
