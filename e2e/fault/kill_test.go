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
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"

	"github.com/nodeagent/nodeagent/internal/mountinfo"
	"github.com/nodeagent/nodeagent/internal/testing/testenv"
	"github.com/nodeagent/nodeagent/internal/testing/testimage"
	"github.com/nodeagent/nodeagent/kubetypes"
	"github.com/nodeagent/nodeagent/runtime"
)

// The agent SIGKILLed at random points while pods are created and deleted
// (issue 15): API pods of four shapes (plain; emptyDir, memory emptyDir,
// Secret and ConfigMap volumes; shareProcessNamespace, so a pause process
// exists; an init container) and static pods, on a CNI bridge network so
// that network namespaces and IPAM reservations can leak. After the last
// restart every pod must converge, with one container per container name
// and no restart, and nothing of a deleted pod may be left on the host:
// containers and tasks, processes, mounts (volumes, /dev/shm, nsfs
// namespace files), namespace files, pod cgroups, host-local
// reservations, veths.
//
// The choices (what the workload does next, when the agent dies) come from
// a seeded math/rand, the seed is logged, and NODEAGENT_FAULT_SEED replays
// it (the timings of the real components still differ). The short form
// kills as many times as fit in about 2 minutes (at least 10); the long
// form (NODEAGENT_FAULT_LONG=1) kills 50 times.
func TestAgentSIGKILLedDuringPodChurn(t *testing.T) {
	seed := faultSeed(t)
	bins := testenv.CNIPlugins(t)
	confDir := filepath.Join(t.TempDir(), "net.d")
	manifests := t.TempDir()
	a := newAgent(t, agentOpts{config: fmt.Sprintf("cniConfDir: %s\ncniBinDir: %s\nstaticPodPath: %s\n", confDir, strings.Join(bins, ","), manifests)})
	ctx := context.Background()
	var node *corev1.Node
	if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 60*time.Second, true, func(ctx context.Context) (bool, error) {
		n, err := a.env.Admin.CoreV1().Nodes().Get(ctx, a.node, metav1.GetOptions{})
		node = n
		return err == nil && n.Spec.PodCIDR != "", nil
	}); err != nil {
		t.Fatal("the node got no pod CIDR within 60s")
	}
	cni := testenv.WriteCNIConfig(t, node.Spec.PodCIDR)
	cni.Install(t, confDir)
	a.waitReady(60 * time.Second)
	a.startPods(0) // waits for the default service account
	rt, err := runtime.New(runtime.Options{Address: a.env.ContainerdAddress, Namespace: a.ns})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rt.Close() })

	w := newWorkload(t, a, manifests, seed)
	w.objects()
	w.writeStatic("static-keep", 0)

	// The kills.
	maxKills, budget := pick(50, 50), pick(2*time.Minute, time.Duration(0))
	minKills := pick(10, 50)
	rng := rand.New(rand.NewPCG(seed, 2))
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); w.run(stop) }()
	start := time.Now()
	kills := 0
	var lastKill time.Time
	for kills < maxKills && (kills < minKills || time.Since(start) < budget) {
		// A third of the kills land while the restarted agent starts up
		// (adopting, listing, cleaning up orphans), the rest later, in
		// the middle of syncs.
		var d time.Duration
		if rng.IntN(3) == 0 {
			d = time.Duration(rng.Int64N(int64(700 * time.Millisecond)))
		} else {
			d = 700*time.Millisecond + time.Duration(rng.Int64N(int64(3300*time.Millisecond)))
		}
		time.Sleep(d)
		a.killAndRestart()
		kills++
		lastKill = time.Now()
	}
	close(stop)
	wg.Wait()
	t.Logf("%d kills in %v; workload: %s", kills, time.Since(start).Round(time.Millisecond), w.summary())

	// Convergence after the last kill.
	want := w.expected()
	ready := map[string]time.Duration{} // pod → ready after the last kill
	conv := a.converge(rt, want, lastKill, 3*time.Minute, ready)
	if conv.err != nil && !strict {
		// Known, not fixed yet (docs/reliability.md): on a loaded host
		// the pause of a shareProcessNamespace pod started during the
		// churn may die within seconds of its start, and the pod stays
		// Pending. The short form (make test) tolerates such pods and
		// checks everything else; NODEAGENT_FAULT_LONG or
		// NODEAGENT_FAULT_STRICT fail on them.
		if stuck := a.stuckSharePID(want); len(stuck) > 0 {
			t.Logf("KNOWN ISSUE: %d shareProcessNamespace pods not running (their pause died): %v; tolerated in the short form", len(stuck), stuck)
			t.Logf("MEASURE kill: sharepid_pods_stuck=%d", len(stuck))
			want.tolerate(stuck)
			conv = a.converge(rt, want, lastKill, 30*time.Second, ready)
			conv.all = 0 // the others converged when the last of them was ready
			for _, d := range conv.podReady {
				conv.all = max(conv.all, d)
			}
		}
	}
	if conv.err != nil {
		t.Errorf("not converged within 3m after the last kill: %v", conv.err)
	}
	orphans := a.checkHost(rt, cni, want)
	a.checkAlive()
	p50, pmax := percentiles(conv.podReady)
	t.Logf("MEASURE kill: kills=%d seed=%d pods_created=%d pods_deleted=%d converged_after_last_kill=%v pod_ready_after_last_kill_p50=%v max=%v orphans=%d",
		kills, seed, w.created, w.deleted, conv.all.Round(time.Millisecond), p50.Round(time.Millisecond), pmax.Round(time.Millisecond), orphans)
}

// strict makes the kill test fail on the known issue it otherwise
// tolerates (see TestAgentSIGKILLedDuringPodChurn).
var strict = long || os.Getenv("NODEAGENT_FAULT_STRICT") != ""

// stuckSharePID returns the shareProcessNamespace pods of want that are
// not running and ready, by UID.
func (a *agent) stuckSharePID(want expectation) map[types.UID]string {
	out := map[types.UID]string{}
	for name, k := range want.api {
		if k != kindSharePID {
			continue
		}
		p, err := a.env.Admin.CoreV1().Pods("default").Get(context.Background(), name, metav1.GetOptions{})
		if err == nil && podRunningReady(p, containersOf(k)) != "" {
			out[p.UID] = name
		}
	}
	return out
}

// tolerate takes pods out of what must converge; their UIDs stay live
// (nothing of theirs counts as an orphan, nothing of theirs is checked).
func (e *expectation) tolerate(uids map[types.UID]string) {
	if e.tolerated == nil {
		e.tolerated = map[types.UID]string{}
	}
	for uid, name := range uids {
		delete(e.api, name)
		e.tolerated[uid] = "default/" + name
	}
}

// killAndRestart SIGKILLs the agent and starts it again with the same
// command line.
func (a *agent) killAndRestart() {
	a.t.Helper()
	pid := a.cmd.Process.Pid
	_ = a.cmd.Process.Kill()
	<-a.exited
	fmt.Fprintf(a.out, "\n===== agent pid %d SIGKILLed at %s; restarting\n", pid, time.Now().Format("15:04:05.000"))
	cmd := exec.Command(a.cmd.Path, a.cmd.Args[1:]...)
	cmd.Stdout, cmd.Stderr = a.out, a.out
	if err := cmd.Start(); err != nil {
		a.t.Fatal(err)
	}
	a.cmd, a.started = cmd, time.Now()
	exited := make(chan struct{})
	a.exited = exited
	go func() { _ = cmd.Wait(); close(exited) }()
}

// podKind is a shape of pod the workload creates.
type podKind int

const (
	kindPlain podKind = iota
	kindVolumes
	kindSharePID
	kindInit
	numKinds
)

func (k podKind) String() string {
	return [...]string{"plain", "volumes", "sharepid", "init"}[k]
}

// workload creates and deletes pods on the agent's node.
type workload struct {
	t         *testing.T
	a         *agent
	manifests string
	rng       *rand.Rand

	mu      sync.Mutex
	live    map[string]podKind // API pods that should exist, by name
	uids    map[string]types.UID
	gone    map[types.UID]string // deleted API pods
	static  map[string]int       // static pods whose file exists: name → generation
	lastGen int                  // the churning static pod's last generation (its file may be gone)
	n       int
	created int
	deleted int
	forced  int
	errs    []string
}

func newWorkload(t *testing.T, a *agent, manifests string, seed uint64) *workload {
	return &workload{
		t: t, a: a, manifests: manifests, rng: rand.New(rand.NewPCG(seed, 1)),
		live: map[string]podKind{}, uids: map[string]types.UID{}, gone: map[types.UID]string{}, static: map[string]int{},
	}
}

// objects creates the Secret and ConfigMap the volume pods mount.
func (w *workload) objects() {
	ctx := context.Background()
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: w.a.node + "-s", Namespace: "default"}, StringData: map[string]string{"k": "secret"}}
	if _, err := w.a.env.Admin.CoreV1().Secrets("default").Create(ctx, s, metav1.CreateOptions{}); err != nil {
		w.t.Fatal(err)
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: w.a.node + "-cm", Namespace: "default"}, Data: map[string]string{"k": "config"}}
	if _, err := w.a.env.Admin.CoreV1().ConfigMaps("default").Create(ctx, cm, metav1.CreateOptions{}); err != nil {
		w.t.Fatal(err)
	}
	w.t.Cleanup(func() {
		_ = w.a.env.Admin.CoreV1().Secrets("default").Delete(context.Background(), s.Name, metav1.DeleteOptions{})
		_ = w.a.env.Admin.CoreV1().ConfigMaps("default").Delete(context.Background(), cm.Name, metav1.DeleteOptions{})
	})
}

// sleeper ends at once on SIGTERM.
var sleeper = []string{"sh", "-c", "trap 'exit 0' TERM; sleep 3600 & wait"}

func (w *workload) podSpec(k podKind) corev1.PodSpec {
	spec := corev1.PodSpec{
		AutomountServiceAccountToken:  ptr.To(false),
		TerminationGracePeriodSeconds: ptr.To[int64](1),
		Containers:                    []corev1.Container{{Name: "main", Image: testimage.Ref, Command: sleeper}},
	}
	switch k {
	case kindVolumes:
		spec.Volumes = []corev1.Volume{
			{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
			{Name: "mem", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumMemory}}},
			{Name: "secret", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: w.a.node + "-s"}}},
			{Name: "config", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: w.a.node + "-cm"}}}},
		}
		spec.Containers[0].VolumeMounts = []corev1.VolumeMount{
			{Name: "scratch", MountPath: "/scratch"}, {Name: "mem", MountPath: "/mem"},
			{Name: "secret", MountPath: "/secret"}, {Name: "config", MountPath: "/config"},
		}
		spec.Containers = append(spec.Containers, corev1.Container{Name: "side", Image: testimage.Ref, Command: sleeper,
			VolumeMounts: []corev1.VolumeMount{{Name: "scratch", MountPath: "/scratch"}}})
	case kindSharePID:
		spec.ShareProcessNamespace = ptr.To(true)
		spec.Containers = append(spec.Containers, corev1.Container{Name: "side", Image: testimage.Ref, Command: []string{"sleep", "3600"}})
	case kindInit:
		spec.InitContainers = []corev1.Container{{Name: "init", Image: testimage.Ref, Command: []string{"sh", "-c", "echo init done"}}}
	}
	return spec
}

// run drives the workload until stop: every 0.2–1.5 s it creates a pod,
// deletes one (gracefully, or forced with grace 0), or adds or removes the
// churning static pod.
func (w *workload) run(stop <-chan struct{}) {
	for i := 0; i < 10000; i++ { // bounded; stop ends it long before
		select {
		case <-stop:
			return
		case <-time.After(200*time.Millisecond + time.Duration(w.rng.Int64N(int64(1300*time.Millisecond)))):
		}
		w.step()
	}
}

func (w *workload) step() {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	w.mu.Lock()
	nLive := len(w.live)
	w.mu.Unlock()
	r := w.rng.Float64()
	switch {
	case r < 0.1:
		w.toggleStatic()
	case nLive < 3 || (nLive < 8 && r < 0.6):
		k := podKind(w.rng.IntN(int(numKinds)))
		w.mu.Lock()
		w.n++
		name := fmt.Sprintf("%s-%s-%d", w.a.node, k, w.n)
		w.mu.Unlock()
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"}, Spec: w.podSpec(k)}
		p.Spec.NodeName = w.a.node
		got, err := w.a.env.Admin.CoreV1().Pods("default").Create(ctx, p, metav1.CreateOptions{})
		w.mu.Lock()
		defer w.mu.Unlock()
		if err != nil {
			w.errs = append(w.errs, "create "+name+": "+err.Error())
			return
		}
		w.live[name], w.uids[name] = k, got.UID
		w.created++
	default:
		w.mu.Lock()
		names := make([]string, 0, len(w.live))
		for n := range w.live {
			names = append(names, n)
		}
		sort.Strings(names)
		name := names[w.rng.IntN(len(names))]
		force := w.rng.IntN(4) == 0
		w.mu.Unlock()
		opts := metav1.DeleteOptions{}
		if force {
			opts.GracePeriodSeconds = ptr.To[int64](0)
		}
		err := w.a.env.Admin.CoreV1().Pods("default").Delete(ctx, name, opts)
		w.mu.Lock()
		defer w.mu.Unlock()
		if err != nil && !apierrors.IsNotFound(err) {
			w.errs = append(w.errs, "delete "+name+": "+err.Error())
			return
		}
		w.gone[w.uids[name]] = name
		delete(w.live, name)
		w.deleted++
		if force {
			w.forced++
		}
	}
}

// toggleStatic removes the churning static pod's file, or writes it
// again (a new generation, hence a new pod UID).
func (w *workload) toggleStatic() {
	w.mu.Lock()
	_, ok := w.static["static-churn"]
	gen := w.lastGen
	w.mu.Unlock()
	if ok {
		if err := os.Remove(filepath.Join(w.manifests, "static-churn.yaml")); err != nil {
			w.t.Error(err)
		}
		w.mu.Lock()
		delete(w.static, "static-churn")
		w.deleted++
		w.mu.Unlock()
		return
	}
	w.writeStatic("static-churn", gen+1)
}

func (w *workload) writeStatic(name string, gen int) {
	m := fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata:
  name: %s
  namespace: default
  annotations: {generation: "%d"}
spec:
  terminationGracePeriodSeconds: 1
  volumes: [{name: scratch, emptyDir: {}}]
  containers:
  - name: main
    image: %s
    command: ["sh", "-c", "trap 'exit 0' TERM; sleep 3600 & wait"]
    volumeMounts: [{name: scratch, mountPath: /scratch}]
`, name, gen, testimage.Ref)
	tmp := filepath.Join(w.manifests, "."+name+".tmp")
	if err := os.WriteFile(tmp, []byte(m), 0o644); err != nil {
		w.t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(w.manifests, name+".yaml")); err != nil {
		w.t.Fatal(err)
	}
	w.mu.Lock()
	w.static[name] = gen
	if name == "static-churn" {
		// Every new file a new generation, hence a new pod UID (the
		// generation was read from the map the removal deletes from, so
		// every re-add was generation 1: the same UID again).
		w.lastGen = gen
	}
	w.created++
	w.mu.Unlock()
}

func (w *workload) summary() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.errs) > 0 {
		w.t.Logf("workload API errors (%d): %v", len(w.errs), w.errs)
	}
	return fmt.Sprintf("%d pods created, %d deleted (%d forced), %d API pods and %d static pods left", w.created, w.deleted, w.forced, len(w.live), len(w.static))
}

// expectation is what must exist at the end.
type expectation struct {
	api    map[string]podKind // API pod name → kind
	uids   map[string]types.UID
	gone   map[types.UID]string
	static []string // static pod names (without the node suffix)
	// tolerated pods (UID → full name) may be in any state (see strict).
	tolerated map[types.UID]string
}

func (w *workload) expected() expectation {
	w.mu.Lock()
	defer w.mu.Unlock()
	e := expectation{api: map[string]podKind{}, uids: map[string]types.UID{}, gone: map[types.UID]string{}}
	for n, k := range w.live {
		e.api[n], e.uids[n] = k, w.uids[n]
	}
	for u, n := range w.gone {
		e.gone[u] = n
	}
	for n := range w.static {
		e.static = append(e.static, n)
	}
	sort.Strings(e.static)
	return e
}

// containersOf is the number of containers (init included) a kind runs.
func containersOf(k podKind) []string {
	switch k {
	case kindVolumes, kindSharePID:
		return []string{"main", "side"}
	case kindInit:
		return []string{"init", "main"}
	}
	return []string{"main"}
}

type convergence struct {
	all      time.Duration   // until everything converged
	podReady []time.Duration // per pod, until it was first seen ready
	err      error
	live     map[types.UID]string // pod UID → full name, of every pod that must run (static ones too)
}

// converge waits until every pod that should run runs and is Ready with
// its containers, every deleted pod is gone from the API and from
// containerd, and nothing else of the agent's is in containerd.
func (a *agent) converge(rt *runtime.Runtime, want expectation, since time.Time, timeout time.Duration, ready map[string]time.Duration) convergence {
	a.t.Helper()
	var c convergence
	var why string
	err := wait.PollUntilContextTimeout(context.Background(), 250*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		live, problem := a.convergedOnce(ctx, rt, want, since, ready)
		if strings.HasPrefix(problem, "listing: ") && why != "" {
			return false, nil // a slow list: keep what was wrong before
		}
		c.live, why = live, problem
		return problem == "", nil
	})
	c.all = time.Since(since)
	if err != nil {
		c.err = fmt.Errorf("%s", why)
	}
	for name, d := range ready {
		if _, ok := want.api[name]; ok || strings.HasPrefix(name, "static-") {
			c.podReady = append(c.podReady, d)
		}
	}
	return c
}

func (a *agent) convergedOnce(ctx context.Context, rt *runtime.Runtime, want expectation, since time.Time, ready map[string]time.Duration) (map[types.UID]string, string) {
	live := map[types.UID]string{}
	var problems []string
	pods, err := a.env.Admin.CoreV1().Pods("default").List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + a.node})
	if err != nil {
		return nil, "listing: " + err.Error()
	}
	byName := map[string]*corev1.Pod{}
	for i := range pods.Items {
		byName[pods.Items[i].Name] = &pods.Items[i]
	}
	check := func(name string, p *corev1.Pod, names []string) {
		if p == nil {
			problems = append(problems, name+": not in the API")
			return
		}
		if msg := podRunningReady(p, names); msg != "" {
			problems = append(problems, name+": "+msg)
			return
		}
		if _, ok := ready[name]; !ok {
			ready[name] = time.Since(since)
		}
	}
	for name, k := range want.api {
		p := byName[name]
		if p != nil && p.UID != want.uids[name] {
			problems = append(problems, fmt.Sprintf("%s: UID %s, created as %s", name, p.UID, want.uids[name]))
			continue
		}
		check(name, p, containersOf(k))
		live[want.uids[name]] = "default/" + name
	}
	for uid, name := range want.tolerated {
		live[uid] = name
	}
	for _, s := range want.static {
		mirror := s + "-" + a.node
		p := byName[mirror]
		check(mirror, p, []string{"main"})
		if p != nil {
			live[types.UID(p.Annotations[kubetypes.AnnotationConfigMirror])] = "default/" + mirror
		}
	}
	for name, p := range byName {
		if _, ok := want.api[name]; ok {
			continue
		}
		if _, ok := want.tolerated[p.UID]; ok {
			continue
		}
		if isMirror := p.Annotations[kubetypes.AnnotationConfigMirror] != ""; isMirror && contains(want.static, strings.TrimSuffix(name, "-"+a.node)) {
			continue
		}
		problems = append(problems, fmt.Sprintf("%s: still in the API (phase %s, deleting %v)", name, p.Status.Phase, p.DeletionTimestamp != nil))
	}
	cs, err := rt.ListContainers(ctx)
	if err != nil {
		return live, "listing: " + err.Error()
	}
	for _, c := range cs {
		if _, ok := live[c.Pod.UID]; !ok {
			problems = append(problems, fmt.Sprintf("container %s (%s/%s %s, %s) of a pod that must not run", c.ID, c.Pod.Namespace, c.Pod.Name, c.Name, c.State))
		}
	}
	ps, err := rt.ListPauses(ctx, "")
	if err != nil {
		return live, "listing: " + err.Error()
	}
	for _, p := range ps {
		if _, ok := live[p.Pod.UID]; !ok {
			problems = append(problems, fmt.Sprintf("pause %s of %s/%s (%s), a pod that must not run", p.ID, p.Pod.Namespace, p.Pod.Name, p.State))
		}
	}
	sort.Strings(problems)
	if len(problems) > 0 {
		return live, fmt.Sprintf("%d problems: %s", len(problems), strings.Join(problems, "; "))
	}
	return live, ""
}

// podRunningReady says what is wrong with p ("" if nothing): it must be
// Running and Ready, with its containers (names) running, init containers
// completed, none restarted.
func podRunningReady(p *corev1.Pod, names []string) string {
	if p.Status.Phase != corev1.PodRunning {
		return "phase " + string(p.Status.Phase)
	}
	readyCond := false
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
			readyCond = true
		}
	}
	if !readyCond {
		return "not Ready"
	}
	seen := 0
	for _, s := range p.Status.InitContainerStatuses {
		seen++
		if s.State.Terminated == nil || s.State.Terminated.ExitCode != 0 || s.RestartCount != 0 {
			return fmt.Sprintf("init container %s: %+v restarts %d", s.Name, s.State, s.RestartCount)
		}
	}
	for _, s := range p.Status.ContainerStatuses {
		seen++
		if s.State.Running == nil || !s.Ready || s.RestartCount != 0 {
			return fmt.Sprintf("container %s: %+v ready %v restarts %d", s.Name, s.State, s.Ready, s.RestartCount)
		}
	}
	if seen != len(names) {
		return fmt.Sprintf("%d container statuses, want %d", seen, len(names))
	}
	return ""
}

func contains(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}

// checkHost looks, once the pods converged, for duplicates in containerd
// and for anything left on the host by pods that must not run, and
// returns how many orphans it found (each one is also an error).
func (a *agent) checkHost(rt *runtime.Runtime, cni *testenv.CNINetwork, want expectation) int {
	a.t.Helper()
	start := time.Now()
	for {
		h, summary := a.checkHostOnce(rt, cni, want)
		if len(h.others) > 0 || len(h.leftovers) == 0 || time.Since(start) > hostSettle {
			for _, p := range append(h.others, h.leftovers...) {
				a.t.Error(p)
			}
			a.t.Logf("%s (the last look %v after convergence)", summary, time.Since(start).Round(time.Millisecond))
			return h.orphans
		}
		time.Sleep(time.Second)
	}
}

// hostSettle bounds how long checkHost waits for the host to be clean.
// Convergence is judged from the API and containerd; a deleted pod whose
// containers were already removed can still be in the cleanup of orphans
// of an agent restarted a moment before (it starts once the pod sources
// have synced, a few hundred milliseconds after the start), so one look
// right after the last kill can find its directory, namespace files,
// cgroups and network (seen: converged 29 ms after the last kill, the
// cleanup done 0.8 s later). What is still there after hostSettle is left;
// any other problem (a duplicate, a restarted container) fails at once.
const hostSettle = 60 * time.Second

// hostCheck is what one look at the host found: leftovers of pods that
// must not run (a cleanup in progress removes them), other problems (a
// duplicate, a restarted container: no waiting undoes them), and the
// number of orphans among the leftovers.
type hostCheck struct {
	leftovers, others []string
	orphans           int
}

// checkHostOnce looks at the host once and returns what it found and a
// summary line.
func (a *agent) checkHostOnce(rt *runtime.Runtime, cni *testenv.CNINetwork, want expectation) (hostCheck, string) {
	a.t.Helper()
	ctx := context.Background()
	live, _ := a.convergedOnce(ctx, rt, want, time.Now(), map[string]time.Duration{})
	var h hostCheck
	errorf := func(format string, args ...any) { h.others = append(h.others, fmt.Sprintf(format, args...)) }
	orphan := func(format string, args ...any) {
		h.orphans++
		h.leftovers = append(h.leftovers, fmt.Sprintf("orphan: "+format, args...))
	}
	isLive := func(uid string) bool { _, ok := live[types.UID(uid)]; return ok }
	tolerated := func(uid types.UID) bool { _, ok := want.tolerated[uid]; return ok }

	// containerd: one container per container name of each pod, no
	// restart attempt; init containers exited, others running; one running
	// pause per shareProcessNamespace pod.
	cs, err := rt.ListContainers(ctx)
	if err != nil {
		a.t.Fatal(err)
	}
	perName := map[string][]runtime.Container{}
	running := map[string]bool{} // container IDs with a live task
	for _, c := range cs {
		if !isLive(string(c.Pod.UID)) {
			orphan("container %s of %s/%s (%s)", c.ID, c.Pod.Namespace, c.Pod.Name, c.State)
			continue
		}
		if c.State == runtime.StateRunning {
			running[c.ID] = true
		}
		if tolerated(c.Pod.UID) {
			continue
		}
		k := live[c.Pod.UID] + "/" + c.Name
		perName[k] = append(perName[k], c)
		if c.State == runtime.StateRunning {
			running[c.ID] = true
		}
	}
	nContainers := 0
	for k, l := range perName {
		nContainers += len(l)
		if len(l) != 1 {
			var ids []string
			for _, c := range l {
				ids = append(ids, fmt.Sprintf("%s attempt %d %s", c.ID, c.Attempt, c.State))
			}
			errorf("duplicate: %d containers for %s: %v", len(l), k, ids)
			continue
		}
		c := l[0]
		wantState := runtime.StateRunning
		if c.Name == "init" {
			wantState = runtime.StateExited
		}
		if c.Attempt != 0 || c.State != wantState {
			errorf("container %s: attempt %d state %s, want attempt 0 %s", k, c.Attempt, c.State, wantState)
		}
	}
	ps, err := rt.ListPauses(ctx, "")
	if err != nil {
		a.t.Fatal(err)
	}
	pauses := map[types.UID]int{}
	for _, p := range ps {
		if !isLive(string(p.Pod.UID)) {
			orphan("pause %s of %s/%s (%s)", p.ID, p.Pod.Namespace, p.Pod.Name, p.State)
			continue
		}
		pauses[p.Pod.UID]++
		if p.State == runtime.StateRunning {
			running[p.ID] = true
		}
	}
	for name, k := range want.api {
		n := pauses[want.uids[name]]
		if k == kindSharePID && n != 1 || k != kindSharePID && n != 0 {
			errorf("pod %s (%s) has %d pause containers", name, k, n)
		}
	}

	// Namespace files and pod directories: one entry per live pod.
	netnsDir, podNSDir := testenv.AgentRunDirs(a.env.ContainerdAddress, a.ns)[0], testenv.AgentRunDirs(a.env.ContainerdAddress, a.ns)[1]
	podsDir := filepath.Join(a.dir, "root", "pods")
	for _, d := range []string{netnsDir, podNSDir, podsDir} {
		es, _ := os.ReadDir(d)
		for _, e := range es {
			if !isLive(e.Name()) {
				orphan("%s", filepath.Join(d, e.Name()))
			}
		}
	}

	// Mounts: none of a pod that must not run; no stacked mounts; each
	// live pod's netns and /dev/shm mounted once. Container root
	// filesystems (containerd's state directory) only of containers with
	// a task.
	ms, err := mountinfo.Read()
	if err != nil {
		a.t.Fatal(err)
	}
	count := map[string]int{}
	for _, m := range ms {
		count[m.MountPoint]++
		for _, d := range []string{netnsDir, podNSDir, podsDir} {
			rel, ok := strings.CutPrefix(m.MountPoint, d+"/")
			if !ok {
				continue
			}
			if uid, _, _ := strings.Cut(rel, "/"); !isLive(uid) {
				orphan("%s mount %s", m.FSType, m.MountPoint)
			}
		}
		if i := strings.Index(m.MountPoint, "/"+a.ns+"/"); i >= 0 && strings.HasSuffix(m.MountPoint, "/rootfs") {
			id := strings.TrimSuffix(m.MountPoint[i+len(a.ns)+2:], "/rootfs")
			if !running[id] {
				orphan("container root filesystem %s (no running container %s)", m.MountPoint, id)
			}
		}
	}
	for p, n := range count {
		if n > 1 && (strings.HasPrefix(p, netnsDir+"/") || strings.HasPrefix(p, podNSDir+"/") || strings.HasPrefix(p, podsDir+"/")) {
			errorf("%d mounts stacked on %s", n, p)
		}
	}
	for uid, name := range live {
		if tolerated(uid) {
			continue
		}
		if count[filepath.Join(netnsDir, string(uid))] != 1 {
			errorf("pod %s: %d netns mounts", name, count[filepath.Join(netnsDir, string(uid))])
		}
		if count[filepath.Join(podNSDir, string(uid), "shm")] != 1 {
			errorf("pod %s: %d /dev/shm mounts", name, count[filepath.Join(podNSDir, string(uid), "shm")])
		}
	}

	// Processes and cgroups: none in a pod cgroup of a pod that must not
	// run; every container cgroup in a live pod's is a running
	// container's (or pause's).
	procs, cgs := a.podProcessesAndCgroups()
	for uid, pids := range procs {
		if !isLive(uid) {
			orphan("processes %v in the cgroup of pod %s", pids, uid)
		}
	}
	for path := range cgs {
		uid, ctr := cgs[path][0], cgs[path][1]
		switch {
		case !isLive(uid):
			orphan("pod cgroup %s", path)
		case ctr != "" && !running[ctr] && !tolerated(types.UID(uid)):
			orphan("container cgroup %s (no running container %s)", path, ctr)
		}
	}

	// The pod network: one host-local reservation and one veth on the
	// bridge per live pod, none of others; the agent's CNI cache likewise.
	resDir := filepath.Join(cni.DataDir, cni.Name)
	es, _ := os.ReadDir(resDir)
	reserved := map[string]int{}
	for _, e := range es {
		if strings.HasPrefix(e.Name(), "last_reserved_ip") || strings.HasPrefix(e.Name(), "lock") {
			continue
		}
		b, err := os.ReadFile(filepath.Join(resDir, e.Name()))
		if err != nil {
			continue
		}
		id, _, _ := strings.Cut(strings.TrimSpace(string(b)), "\n")
		id = strings.TrimSpace(id)
		reserved[id]++
		if !isLive(id) {
			orphan("host-local reservation %s for %s", e.Name(), id)
		}
	}
	for uid, name := range live {
		if tolerated(uid) {
			continue
		}
		if reserved[string(uid)] != 1 {
			errorf("pod %s: %d host-local reservations", name, reserved[string(uid)])
		}
	}
	brif, _ := os.ReadDir(filepath.Join("/sys/class/net", cni.Bridge, "brif"))
	if len(brif) > len(live) || len(brif) < len(live)-len(want.tolerated) {
		var names []string
		for _, e := range brif {
			names = append(names, e.Name())
		}
		msg := fmt.Sprintf("%d interfaces on bridge %s (%v), want one per pod (%d)", len(brif), cni.Bridge, names, len(live))
		if len(brif) > len(live) { // veths of pods that must not run
			h.orphans += len(brif) - len(live)
			h.leftovers = append(h.leftovers, msg)
		} else {
			h.others = append(h.others, msg)
		}
	}
	for _, sub := range []string{"results", "pending"} {
		es, _ := os.ReadDir(filepath.Join(a.dir, "root", "cni", sub))
		for _, e := range es {
			found := false
			for uid := range live {
				if strings.Contains(e.Name(), string(uid)) {
					found = true
				}
			}
			if !found {
				orphan("CNI cache entry %s/%s", sub, e.Name())
			}
		}
	}
	return h, fmt.Sprintf("host after convergence: %d pods, %d containers, %d pauses, %d bridge ports, %d reservations; %d orphans",
		len(live), nContainers, len(ps), len(brif), len(reserved), h.orphans)
}

// podProcessesAndCgroups finds the agent's pod cgroups (cgroupfs layout
// under /nodeagent-<ns>: .../pod<uid>[/<container ID>]) in every cgroup v1
// controller and the unified hierarchy, and the processes in them by pod
// UID. cgs maps a cgroup directory to {pod UID, container ID or ""}.
func (a *agent) podProcessesAndCgroups() (procs map[string][]int, cgs map[string][2]string) {
	procs, cgs = map[string][]int{}, map[string][2]string{}
	root := "nodeagent-" + a.ns
	parse := func(p string) (uid, ctr string, ok bool) {
		i := strings.Index(p, "/"+root+"/")
		if i < 0 {
			return "", "", false
		}
		for _, part := range strings.Split(p[i:], "/") {
			if u, ok := strings.CutPrefix(part, "pod"); ok && len(u) == 36 {
				uid = u
				continue
			}
			if uid != "" && part != "" {
				ctr = part
			}
		}
		return uid, ctr, uid != ""
	}
	dirs, _ := filepath.Glob("/sys/fs/cgroup/*/" + root)
	if _, err := os.Stat("/sys/fs/cgroup/" + root); err == nil {
		dirs = append(dirs, "/sys/fs/cgroup/"+root)
	}
	for _, d := range dirs {
		_ = filepath.WalkDir(d, func(p string, e os.DirEntry, err error) error {
			if err != nil || !e.IsDir() {
				return nil
			}
			if uid, ctr, ok := parse(p); ok {
				cgs[p] = [2]string{uid, ctr}
			}
			return nil
		})
	}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cgroup"))
		if err != nil {
			continue
		}
		for _, l := range strings.Split(string(b), "\n") {
			if uid, _, ok := parse(l); ok {
				procs[uid] = append(procs[uid], pid)
				break
			}
		}
	}
	return procs, cgs
}

func percentiles(ds []time.Duration) (p50, max time.Duration) {
	if len(ds) == 0 {
		return 0, 0
	}
	sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
	return ds[len(ds)/2], ds[len(ds)-1]
}
