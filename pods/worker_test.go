package pods

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	testclock "k8s.io/utils/clock/testing"
	utilptr "k8s.io/utils/ptr"

	"github.com/nodeagent/nodeagent/crilog"
	"github.com/nodeagent/nodeagent/internal/testing/testlog"
	"github.com/nodeagent/nodeagent/kubetypes"
	"github.com/nodeagent/nodeagent/network"
	"github.com/nodeagent/nodeagent/pleg"
	"github.com/nodeagent/nodeagent/pods/status"
	"github.com/nodeagent/nodeagent/runtime"
)

// The worker's lifecycle against fakes of everything it calls and a fake
// clock: no containerd, no API server, no real time. Each test drives
// syncOnce (the loop body) directly, as kubelet's pod_workers_test drives
// its fake syncer.

// fakeRuntime is a runtime whose containers change only through the calls
// the worker makes, plus exit() for the test.
type fakeRuntime struct {
	clk     *testclock.FakeClock
	mu      sync.Mutex
	next    int
	cs      map[string]*runtime.Container
	specs   map[string]runtime.ContainerSpec
	stops   []stopCall
	removed []string
	pulls   int
	images  map[string]bool // present images (nil: all)
	cgroups []types.UID

	// pullFail fails a pull with these credentials (nil: anonymous);
	// auths records each pull's username ("" anonymous).
	pullFail func(*runtime.RegistryAuth) error
	auths    []string
	// pullHook runs at each PullImageWithAuth before it acts, outside
	// the runtime's lock (so that pulls may overlap in it).
	pullHook func(ctx context.Context, ref string)
	// onStop runs at each StopContainer, before it acts.
	onStop func(id string)
	// drainErr is DrainOutput's answer (nil: drained); onDrain runs at
	// each DrainOutput before it answers; drains lists the IDs drained.
	drainErr error
	onDrain  func(ctx context.Context, c runtime.Container)
	drains   []string
}

type stopCall struct {
	id    string
	grace time.Duration
}

func newFakeRuntime(clk *testclock.FakeClock) *fakeRuntime {
	return &fakeRuntime{clk: clk, cs: map[string]*runtime.Container{}, specs: map[string]runtime.ContainerSpec{}}
}

func (r *fakeRuntime) CreateContainer(_ context.Context, s runtime.ContainerSpec) (string, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.next++
	id := fmt.Sprintf("c%d", r.next)
	r.cs[id] = &runtime.Container{ID: id, Pod: s.Pod, Name: s.Name, Attempt: s.Attempt, Image: s.Image,
		State: runtime.StateCreated, CreatedAt: r.clk.Now(), Labels: s.Labels, LogPath: s.LogPath}
	r.specs[id] = s
	return id, nil
}

func (r *fakeRuntime) StartContainer(_ context.Context, id string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	c := r.cs[id]
	c.State, c.StartedAt, c.Pid = runtime.StateRunning, r.clk.Now(), 42
	return nil
}

func (r *fakeRuntime) StopContainer(_ context.Context, id string, grace time.Duration) error {
	if r.onStop != nil {
		r.onStop(id)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.stops = append(r.stops, stopCall{id, grace})
	if c := r.cs[id]; c != nil && c.State == runtime.StateRunning {
		c.State, c.FinishedAt, c.ExitCode, c.Pid = runtime.StateExited, r.clk.Now(), 137, 0
	}
	return nil
}

func (r *fakeRuntime) DrainOutput(ctx context.Context, c runtime.Container) error {
	if r.onDrain != nil {
		r.onDrain(ctx, c)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.drains = append(r.drains, c.ID)
	return r.drainErr
}

func (r *fakeRuntime) RemoveContainer(_ context.Context, id string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.cs, id)
	r.removed = append(r.removed, id)
	return nil
}

func (r *fakeRuntime) ListPods(context.Context) ([]runtime.Pod, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var cs []runtime.Container
	for _, c := range r.cs {
		cs = append(cs, *c)
	}
	return runtime.GroupPods(cs), nil
}

func (r *fakeRuntime) GetImage(_ context.Context, ref string) (runtime.Image, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.images != nil && !r.images[ref] {
		return runtime.Image{}, runtime.ErrNotFound
	}
	return runtime.Image{ID: "sha256:" + ref, Names: []string{ref}}, nil
}

func (r *fakeRuntime) PullImageWithAuth(ctx context.Context, ref string, auth *runtime.RegistryAuth) (runtime.Image, error) {
	if r.pullHook != nil {
		r.pullHook(ctx, ref)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.pulls++
	if err := r.pullAttempt(auth); err != nil {
		return runtime.Image{}, err
	}
	if r.images != nil {
		r.images[ref] = true
	}
	return runtime.Image{ID: "sha256:" + ref, Names: []string{ref}}, nil
}

func (r *fakeRuntime) RemovePodCgroup(uid types.UID) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.cgroups = append(r.cgroups, uid)
	return nil
}

// exit ends a running container as its process would.
func (r *fakeRuntime) exit(id string, code int32) {
	r.mu.Lock()
	defer r.mu.Unlock()
	c := r.cs[id]
	c.State, c.ExitCode, c.FinishedAt, c.Pid = runtime.StateExited, code, r.clk.Now(), 0
}

// podCache answers the worker's cache reads from the runtime's containers,
// as the PLEG would once it saw them.
func (r *fakeRuntime) Get(uid types.UID) (pleg.PodStatus, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	st := pleg.PodStatus{Pod: runtime.PodRef{UID: uid}, Timestamp: r.clk.Now()}
	ids := make([]string, 0, len(r.cs))
	for id := range r.cs {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		if c := r.cs[id]; c.Pod.UID == uid {
			st.Containers = append(st.Containers, *c)
		}
	}
	return st, true
}

func (r *fakeRuntime) GetNewerThan(_ context.Context, uid types.UID, _ time.Time) (pleg.PodStatus, error) {
	st, _ := r.Get(uid)
	return st, nil
}

// running lists the running containers by name.
func (r *fakeRuntime) running() map[string]runtime.Container {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := map[string]runtime.Container{}
	for _, c := range r.cs {
		if c.State == runtime.StateRunning {
			out[c.Name] = *c
		}
	}
	return out
}

type fakePLEG struct {
	mu       sync.Mutex
	expected []pleg.EventType
	events   chan pleg.Event // Watch (nil: none)
}

func (p *fakePLEG) Watch() <-chan pleg.Event { return p.events }
func (p *fakePLEG) ExpectWithin(_ types.UID, _ string, t pleg.EventType, _ time.Duration) {
	p.mu.Lock()
	p.expected = append(p.expected, t)
	p.mu.Unlock()
}
func (p *fakePLEG) WaitExpected(context.Context, types.UID) error { return nil }

type fakeStatus struct {
	mu      sync.Mutex
	last    map[types.UID]v1.PodStatus
	flushed []types.UID
	deleted []types.UID
	forgot  []types.UID
}

func (s *fakeStatus) Set(pod *v1.Pod, st v1.PodStatus) {
	s.mu.Lock()
	s.last[pod.UID] = st
	s.mu.Unlock()
}
func (s *fakeStatus) Flush(_ context.Context, uid types.UID) error {
	s.mu.Lock()
	s.flushed = append(s.flushed, uid)
	s.mu.Unlock()
	return nil
}
func (s *fakeStatus) Forget(uid types.UID) {
	s.mu.Lock()
	s.forgot = append(s.forgot, uid)
	s.mu.Unlock()
}
func (s *fakeStatus) DeletePod(_ context.Context, pod *v1.Pod) error {
	s.mu.Lock()
	s.deleted = append(s.deleted, pod.UID)
	s.mu.Unlock()
	return nil
}

type fakeMirror struct {
	ready   bool // Ensure succeeds
	ensured int
	deleted int
}

func (m *fakeMirror) Ensure(context.Context, *v1.Pod) bool  { m.ensured++; return m.ready }
func (m *fakeMirror) Delete(context.Context, *v1.Pod) error { m.deleted++; return nil }
func (f *fakeVolumes) Teardown(uid types.UID, _ string) error {
	f.torn = append(f.torn, uid)
	return nil
}
func (f *fakeVolumes) Setup(context.Context, *v1.Pod, string) (map[string]string, time.Time, error) {
	f.setups++
	return map[string]string{}, time.Time{}, nil
}

type fakeVolumes struct {
	setups int
	torn   []types.UID
}

type fakeNetNS struct{ created, removed []string }

func (n *fakeNetNS) Create(p string) error { n.created = append(n.created, p); return nil }
func (n *fakeNetNS) Remove(p string) error { n.removed = append(n.removed, p); return nil }

type fakeRecorder struct {
	mu      sync.Mutex
	reasons []string
}

func (r *fakeRecorder) Event(_ k8sruntime.Object, _, reason, _ string) {
	r.mu.Lock()
	r.reasons = append(r.reasons, reason)
	r.mu.Unlock()
}
func (r *fakeRecorder) Eventf(o k8sruntime.Object, t, reason, f string, args ...any) {
	r.Event(o, t, reason, fmt.Sprintf(f, args...))
}

func (r *fakeRecorder) has(reason string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, x := range r.reasons {
		if x == reason {
			return true
		}
	}
	return false
}

type fakeHost struct {
	sibling bool // another pod of the same name is stopping
	done    int
}

func (h *fakeHost) terminatingSibling(types.UID, *v1.Pod) bool { return h.sibling }
func (h *fakeHost) workerDone(*podWorker)                      { h.done++ }

type workerEnv struct {
	t      *testing.T
	clk    *testclock.FakeClock
	rt     *fakeRuntime
	pleg   *fakePLEG
	status *fakeStatus
	mirror *fakeMirror
	vols   *fakeVolumes
	netns  *fakeNetNS
	rec    *fakeRecorder
	host   *fakeHost
	deps   *workerDeps
}

func newWorkerEnv(t *testing.T) *workerEnv {
	clk := testclock.NewFakeClock(time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC))
	e := &workerEnv{t: t, clk: clk, rt: newFakeRuntime(clk), pleg: &fakePLEG{},
		status: &fakeStatus{last: map[types.UID]v1.PodStatus{}}, mirror: &fakeMirror{ready: true},
		vols: &fakeVolumes{}, netns: &fakeNetNS{}, rec: &fakeRecorder{}, host: &fakeHost{}}
	e.deps = &workerDeps{
		rt: e.rt, cache: e.rt, pleg: e.pleg, status: e.status, mirror: e.mirror, rec: e.rec,
		volumes: e.vols, netns: e.netns, host: e.host, clock: clk, met: newMetrics(nil),
		nodeName: "node-1", rootDir: t.TempDir(), podLogsDir: t.TempDir(), netnsDir: t.TempDir(), resync: time.Minute,
		hostIP: func() string { return "192.0.2.1" },
	}
	return e
}

func testPod(name string, restart v1.RestartPolicy, containers ...v1.Container) *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID("uid-" + name),
			Annotations: map[string]string{kubetypes.AnnotationConfigSource: kubetypes.SourceAPI}},
		Spec: v1.PodSpec{RestartPolicy: restart, Containers: containers, TerminationGracePeriodSeconds: utilptr.To[int64](7)},
	}
}

func ctr(name string) v1.Container {
	return v1.Container{Name: name, Image: "busybox:test", Command: []string{"sleep", "1d"}, ImagePullPolicy: v1.PullIfNotPresent}
}

// testWorker is a pod's state machine with the real syncer, as the tests
// drive them: the syncer's fields and methods, and the podWorker's
// requests.
type testWorker struct {
	*worker
	pw *podWorker
}

func (w testWorker) update(pod *v1.Pod)                                 { w.pw.update(pod) }
func (w testWorker) remove()                                            { w.pw.remove() }
func (w testWorker) reject(r status.Waiting)                            { w.pw.reject(r) }
func (w testWorker) poke()                                              { w.pw.poke() }
func (w testWorker) rejected() bool                                     { return w.pw.rejected() }
func (w testWorker) syncOnce(ctx context.Context) (time.Duration, bool) { return w.pw.syncOnce(ctx) }
func (w testWorker) pod() *v1.Pod                                       { p, _ := w.pw.snapshot(); return p }

// terminate asks the worker to end the pod as t says and returns the
// termination in force.
func (w testWorker) terminate(t *termination) *termination { return w.pw.requestTermination(t) }

func (e *workerEnv) worker(pod *v1.Pod, src string) testWorker {
	pw := newPodWorkerPair(e.deps, pod, src, testlog.New(e.t))
	return testWorker{worker: pw.sync.(*worker), pw: pw}
}

// manager makes a Manager around the env's fakes (its status manager
// writes nowhere).
func (e *workerEnv) manager(o Options) *Manager {
	if o.Logger == nil {
		o.Logger = testlog.New(e.t)
	}
	if o.NodeName == "" {
		o.NodeName = "node-1"
	}
	if o.MaxPods == 0 {
		o.MaxPods = 110
	}
	if o.NodeAnyway == nil {
		o.NodeAnyway = func(context.Context) (*v1.Node, error) { return &v1.Node{}, nil }
	}
	if o.Node == nil {
		o.Node = func() *v1.Node { return nil }
	}
	if o.RootDir == "" {
		o.RootDir = e.deps.rootDir
	}
	if o.NetNSDir == "" {
		o.NetNSDir, o.PodNSDir = e.deps.netnsDir, e.t.TempDir()
	}
	o.Runtime, o.PLEG, o.PodCache, o.Clock = e.rt, e.pleg, e.rt, e.clk
	return newManager(o, e.deps, status.NewManager(nil, o.Logger))
}

// adopt gives workers made by e.worker to m, as if it had made them.
func adopt(m *Manager, ws ...testWorker) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, w := range ws {
		m.workers[w.uid] = w.pw
	}
}

type syncer interface {
	syncOnce(context.Context) (time.Duration, bool)
}

// sync runs one sync and returns when the worker asks to run the next.
func (e *workerEnv) sync(w syncer) (time.Duration, bool) {
	e.t.Helper()
	return w.syncOnce(context.Background())
}

// settle syncs until the worker stops acting at once (at most 10 syncs).
func (e *workerEnv) settle(w syncer) (time.Duration, bool) {
	e.t.Helper()
	for i := 0; i < 10; i++ {
		next, done := e.sync(w)
		if done || next > 0 {
			return next, done
		}
	}
	e.t.Fatal("the worker kept acting after 10 syncs")
	return 0, false
}

func (e *workerEnv) lastStatus(uid types.UID) v1.PodStatus {
	e.status.mu.Lock()
	defer e.status.mu.Unlock()
	return e.status.last[uid]
}

func TestWorkerStartsAPod(t *testing.T) {
	e := newWorkerEnv(t)
	e.rt.images = map[string]bool{} // nothing present: pulled
	pod := testPod("web", v1.RestartPolicyAlways, ctr("a"), ctr("b"))
	w := e.worker(pod, kubetypes.SourceAPI)

	next, done := e.sync(w)
	if done || next != 0 {
		t.Fatalf("first sync: next %v done %v; want to sync again at once", next, done)
	}
	if len(e.rt.running()) != 2 || e.rt.pulls != 1 { // one image for both
		t.Fatalf("running %v, pulls %d", e.rt.running(), e.rt.pulls)
	}
	// Before the first start the pod said Pending / ContainerCreating.
	if e.vols.setups != 1 || len(e.netns.created) != 1 {
		t.Errorf("sandbox: %d volume setups, netns %v", e.vols.setups, e.netns.created)
	}
	next, _ = e.settle(w)
	if next != time.Minute {
		t.Errorf("idle resync in %v, want 1m", next)
	}
	st := e.lastStatus(pod.UID)
	if st.Phase != v1.PodRunning || len(st.ContainerStatuses) != 2 || !st.ContainerStatuses[0].Ready {
		t.Errorf("status %+v", st)
	}
	for _, r := range []string{"Pulling", "Pulled", "Created", "Started"} {
		if !e.rec.has(r) {
			t.Errorf("no %s event", r)
		}
	}
	// Nothing more happens while it runs.
	before := len(e.rt.specs)
	e.clk.Step(time.Minute)
	e.settle(w)
	if len(e.rt.specs) != before {
		t.Errorf("a running pod got %d new containers", len(e.rt.specs)-before)
	}
}

// Kubelet's crash-loop back-off: the first restart at once, then 10s, 20s,
// ... with CrashLoopBackOff while held back; restartPolicy Never restarts
// nothing.
func TestWorkerCrashLoopBackOff(t *testing.T) {
	e := newWorkerEnv(t)
	pod := testPod("crash", v1.RestartPolicyAlways, ctr("c"))
	w := e.worker(pod, kubetypes.SourceAPI)
	e.settle(w)

	exitRunning := func() {
		for _, c := range e.rt.running() {
			e.rt.exit(c.ID, 3)
		}
	}
	exitRunning()
	if next, _ := e.settle(w); next != time.Minute {
		t.Fatalf("first restart not immediate: next sync in %v", next)
	}
	if c := e.rt.running()["c"]; c.Attempt != 1 {
		t.Fatalf("attempt %d running, want 1", c.Attempt)
	}
	for i, want := range []time.Duration{10 * time.Second, 20 * time.Second, 40 * time.Second} {
		exitRunning()
		next, _ := e.settle(w)
		if next != want {
			t.Fatalf("exit %d: held back %v, want %v", i+2, next, want)
		}
		st := e.lastStatus(pod.UID).ContainerStatuses[0]
		if st.State.Waiting == nil || st.State.Waiting.Reason != status.ReasonCrashLoopBackOff {
			t.Fatalf("exit %d: state %+v, want waiting CrashLoopBackOff", i+2, st.State)
		}
		if st.LastTerminationState.Terminated == nil || st.LastTerminationState.Terminated.ExitCode != 3 {
			t.Errorf("lastState %+v", st.LastTerminationState)
		}
		e.clk.Step(next)
		e.settle(w)
		if c, ok := e.rt.running()["c"]; !ok || c.Attempt != uint32(i+2) {
			t.Fatalf("after the back-off: running %+v, want attempt %d", e.rt.running(), i+2)
		}
	}
	if !e.rec.has("BackOff") {
		t.Error("no BackOff event")
	}
	if st := e.lastStatus(pod.UID).ContainerStatuses[0]; st.RestartCount != 4 {
		t.Errorf("restartCount %d, want 4", st.RestartCount)
	}

	never := testPod("once", v1.RestartPolicyNever, ctr("c"))
	wn := e.worker(never, kubetypes.SourceAPI)
	e.settle(wn)
	for id, c := range e.rt.cs {
		if c.Pod.UID == never.UID && c.State == runtime.StateRunning {
			e.rt.exit(id, 1)
		}
	}
	e.settle(wn)
	if st := e.lastStatus(never.UID); st.Phase != v1.PodFailed {
		t.Errorf("restartPolicy Never, exit 1: phase %s, want Failed", st.Phase)
	}
}

// A deleted API pod is stopped with its grace period, its final status is
// written, it is deleted from the API; once its source drops it, what it
// had on the host is removed and the worker ends.
func TestWorkerTerminatesWithGrace(t *testing.T) {
	e := newWorkerEnv(t)
	pod := testPod("web", v1.RestartPolicyAlways, ctr("a"), ctr("b"))
	w := e.worker(pod, kubetypes.SourceAPI)
	e.settle(w)

	del := pod.DeepCopy()
	del.DeletionTimestamp = &metav1.Time{Time: e.clk.Now()}
	del.DeletionGracePeriodSeconds = utilptr.To[int64](5)
	w.update(del)
	e.settle(w)
	if len(e.rt.stops) != 2 {
		t.Fatalf("stops %+v", e.rt.stops)
	}
	for _, s := range e.rt.stops {
		if s.grace != 5*time.Second {
			t.Errorf("stopped %s with grace %v, want the deletion's 5s", s.id, s.grace)
		}
	}
	if len(e.status.flushed) != 1 || len(e.status.deleted) != 1 {
		t.Fatalf("final status written %v, deleted %v", e.status.flushed, e.status.deleted)
	}
	// kubelet's order: the volumes are torn down before the API delete.
	if len(e.vols.torn) != 1 {
		t.Errorf("volumes torn down %v when the pod was deleted from the API, want once before it", e.vols.torn)
	}
	if st := e.lastStatus(pod.UID); st.Phase != v1.PodFailed && st.Phase != v1.PodSucceeded {
		t.Errorf("final phase %s", st.Phase)
	}
	// The API drops the pod: everything goes (the volumes not twice).
	w.remove()
	if _, done := e.settle(w); !done {
		t.Fatal("the worker did not end")
	}
	if len(e.rt.cs) != 0 || len(e.vols.torn) != 1 || len(e.netns.removed) != 1 || len(e.rt.cgroups) != 1 || len(e.status.forgot) != 1 {
		t.Errorf("left: containers %d, volumes torn %v, netns removed %v, cgroups %v, forgotten %v",
			len(e.rt.cs), e.vols.torn, e.netns.removed, e.rt.cgroups, e.status.forgot)
	}
}

// A rejected pod runs nothing (it may have run before an agent restart)
// and is Failed with admission's reason.
func TestWorkerRejectedPodRunsNothing(t *testing.T) {
	e := newWorkerEnv(t)
	pod := testPod("big", v1.RestartPolicyAlways, ctr("c"))
	// It ran before the agent restarted.
	id, _ := e.rt.CreateContainer(context.Background(), runtime.ContainerSpec{Pod: runtime.PodRef{UID: pod.UID, Name: pod.Name, Namespace: pod.Namespace}, Name: "c"})
	_ = e.rt.StartContainer(context.Background(), id)

	w := e.worker(pod, kubetypes.SourceAPI)
	w.reject(status.Waiting{Reason: "OutOfcpu", Message: "Pod was rejected: Node didn't have enough resource: cpu"})
	if !w.rejected() || !e.rec.has("OutOfcpu") {
		t.Fatal("rejection not recorded")
	}
	e.settle(w)
	if len(e.rt.running()) != 0 || len(e.rt.stops) != 1 {
		t.Errorf("running %v, stops %v", e.rt.running(), e.rt.stops)
	}
	if len(e.rt.specs) != 1 {
		t.Errorf("a rejected pod created %d containers", len(e.rt.specs)-1)
	}
	st := e.lastStatus(pod.UID)
	if st.Phase != v1.PodFailed || st.Reason != "OutOfcpu" {
		t.Errorf("status phase %s reason %q", st.Phase, st.Reason)
	}
}

// A static pod gets its mirror pod; while the mirror cannot be made (the
// node is not registered yet) the pod still runs and the worker retries
// soon; the mirror pod goes with the static pod.
func TestWorkerMirrorPod(t *testing.T) {
	e := newWorkerEnv(t)
	e.mirror.ready = false
	pod := testPod("static", v1.RestartPolicyAlways, ctr("c"))
	pod.Annotations[kubetypes.AnnotationConfigSource] = kubetypes.SourceFile
	w := e.worker(pod, kubetypes.SourceFile)
	next, _ := e.settle(w)
	if next != mirrorRetry {
		t.Errorf("no mirror pod yet: next sync in %v, want %v", next, mirrorRetry)
	}
	if len(e.rt.running()) != 1 {
		t.Error("the static pod waited for its mirror pod")
	}
	e.mirror.ready = true
	e.clk.Step(next)
	if next, _ = e.settle(w); next != time.Minute {
		t.Errorf("mirror pod made: next sync in %v, want the resync", next)
	}
	w.remove()
	if _, done := e.settle(w); !done || e.mirror.deleted != 1 {
		t.Errorf("static pod removed: done %v, mirror deletes %d", done, e.mirror.deleted)
	}
	if len(e.status.deleted) != 0 {
		t.Error("a static pod was deleted from the API")
	}
}

// A static pod whose previous version is still stopping waits for it.
func TestWorkerWaitsForTerminatingSibling(t *testing.T) {
	e := newWorkerEnv(t)
	e.host.sibling = true
	w := e.worker(testPod("web", v1.RestartPolicyAlways, ctr("c")), kubetypes.SourceFile)
	e.settle(w)
	if len(e.rt.specs) != 0 {
		t.Fatal("started while the old version was stopping")
	}
	e.host.sibling = false
	e.settle(w)
	if len(e.rt.running()) != 1 {
		t.Error("did not start once the old version was gone")
	}
}

// After an agent restart, the containers of a pod no source knows are
// stopped with a short grace and removed with everything else.
func TestWorkerOrphanCleanup(t *testing.T) {
	e := newWorkerEnv(t)
	ref := runtime.PodRef{UID: "gone", Name: "gone", Namespace: "default"}
	for _, n := range []string{"a", "b"} {
		id, _ := e.rt.CreateContainer(context.Background(), runtime.ContainerSpec{Pod: ref, Name: n})
		_ = e.rt.StartContainer(context.Background(), id)
	}
	w := newOrphanWorker(e.deps, ref, testlog.New(t))
	if _, done := e.settle(w); !done {
		t.Fatal("orphan worker did not end")
	}
	for _, s := range e.rt.stops {
		if s.grace != orphanGrace*time.Second {
			t.Errorf("orphan stopped with grace %v", s.grace)
		}
	}
	if len(e.rt.stops) != 2 || len(e.rt.cs) != 0 || len(e.vols.torn) != 1 {
		t.Errorf("stops %v, containers left %d, volumes torn %v", e.rt.stops, len(e.rt.cs), e.vols.torn)
	}
	if len(e.status.deleted) != 0 || len(e.status.flushed) != 0 {
		t.Error("an orphan was written to or deleted from the API")
	}
}

// After an agent restart a running container whose spec hash matches is
// adopted; one whose spec changed is replaced.
func TestWorkerAdoptsRunningContainers(t *testing.T) {
	e := newWorkerEnv(t)
	pod := testPod("web", v1.RestartPolicyAlways, ctr("same"), ctr("changed"))
	ref := runtime.PodRef{UID: pod.UID, Name: pod.Name, Namespace: pod.Namespace}
	start := func(name, hash string) string {
		id, _ := e.rt.CreateContainer(context.Background(), runtime.ContainerSpec{Pod: ref, Name: name, Labels: map[string]string{LabelContainerHash: hash}})
		_ = e.rt.StartContainer(context.Background(), id)
		return id
	}
	same := start("same", containerHash(&pod.Spec.Containers[0]))
	changed := start("changed", "0123")

	w := e.worker(pod, kubetypes.SourceAPI)
	e.settle(w)
	run := e.rt.running()
	if run["same"].ID != same || run["same"].Attempt != 0 {
		t.Errorf("the matching container was replaced: %+v", run["same"])
	}
	if run["changed"].ID == changed || run["changed"].Attempt != 1 {
		t.Errorf("the changed container was not replaced: %+v", run["changed"])
	}
	if st := e.lastStatus(pod.UID); st.Phase != v1.PodRunning {
		t.Errorf("phase %s", st.Phase)
	}
}

// A failing sync retries with the sync back-off.
func TestWorkerRetriesFailedSync(t *testing.T) {
	e := newWorkerEnv(t)
	e.deps.volumes = failingVolumes{}
	w := e.worker(testPod("web", v1.RestartPolicyAlways, ctr("c")), kubetypes.SourceAPI)
	var delays []time.Duration
	for i := 0; i < 8; i++ {
		next, _ := e.sync(w)
		delays = append(delays, next)
	}
	want := []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 16 * time.Second, 32 * time.Second, time.Minute, time.Minute}
	if fmt.Sprint(delays) != fmt.Sprint(want) {
		t.Errorf("retry delays %v, want %v", delays, want)
	}
	if !e.rec.has("FailedCreatePodSandBox") {
		t.Error("no FailedCreatePodSandBox event")
	}
}

type failingVolumes struct{}

func (failingVolumes) Setup(context.Context, *v1.Pod, string) (map[string]string, time.Time, error) {
	return nil, time.Time{}, errors.New("disk on fire")
}
func (failingVolumes) Teardown(types.UID, string) error { return nil }

// Issue 11, bug 2: a new defaulted field (an API or client upgrade) must
// not replace running containers, not even with restartPolicy Never; an
// image change does; a container made by an agent before the v2 hash is
// adopted.
func TestContainerHashIgnoresDefaultedFields(t *testing.T) {
	c := ctr("c")
	h := containerHash(&c)
	defaulted := c
	defaulted.TerminationMessagePolicy = v1.TerminationMessageFallbackToLogsOnError
	defaulted.Resources.Requests = v1.ResourceList{}
	defaulted.StartupProbe = &v1.Probe{}
	if containerHash(&defaulted) != h {
		t.Error("a defaulted field changed the container hash")
	}
	image := c
	image.Image = "busybox:other"
	if containerHash(&image) == h {
		t.Error("an image change kept the container hash")
	}

	e := newWorkerEnv(t)
	pod := testPod("web", v1.RestartPolicyNever, c)
	w := e.worker(pod, kubetypes.SourceAPI)
	e.settle(w)
	id := e.rt.running()["c"].ID
	upgraded := pod.DeepCopy()
	upgraded.Spec.Containers[0] = defaulted
	w.update(upgraded)
	e.settle(w)
	if got := e.rt.running()["c"]; got.ID != id {
		t.Errorf("a defaulted field replaced the container (%s → %s)", id, got.ID)
	}

	legacy := testPod("legacy", v1.RestartPolicyAlways, c)
	ref := runtime.PodRef{UID: legacy.UID, Name: legacy.Name, Namespace: legacy.Namespace}
	lid, _ := e.rt.CreateContainer(context.Background(), runtime.ContainerSpec{Pod: ref, Name: "c", Labels: map[string]string{labelLegacyContainerHash: "whole-spec-hash"}})
	_ = e.rt.StartContainer(context.Background(), lid)
	e.settle(e.worker(legacy, kubetypes.SourceAPI))
	if _, ok := e.rt.cs[lid]; !ok || e.rt.cs[lid].State != runtime.StateRunning {
		t.Error("a container of an older agent was replaced")
	}

	ch := e.worker(testPod("img", v1.RestartPolicyAlways, c), kubetypes.SourceAPI)
	e.settle(ch)
	before := len(e.rt.specs)
	newImage := ch.pod().DeepCopy()
	newImage.Spec.Containers[0].Image = "busybox:other"
	ch.update(newImage)
	e.settle(ch)
	if len(e.rt.specs) != before+1 {
		t.Error("an image change did not replace the container")
	}
}

// The node API reads the pods through GetPods and GetPodByName: the pods
// with workers (not orphans, not removed ones), the running one first when
// a deleted one of that name is still stopping.
func TestManagerGetPods(t *testing.T) {
	e := newWorkerEnv(t)
	m := e.manager(Options{})
	add := func(w testWorker) { adopt(m, w) }
	old := testPod("web", v1.RestartPolicyAlways, ctr("c"))
	old.UID = "old"
	old.DeletionTimestamp = &metav1.Time{Time: e.clk.Now()}
	add(e.worker(old, kubetypes.SourceAPI))
	cur := testPod("web", v1.RestartPolicyAlways, ctr("c"))
	add(e.worker(cur, kubetypes.SourceAPI))
	gone := e.worker(testPod("gone", v1.RestartPolicyAlways, ctr("c")), kubetypes.SourceAPI)
	gone.remove()
	add(gone)
	orphan := newOrphanWorker(e.deps, runtime.PodRef{UID: "orphan", Name: "orphan", Namespace: "default"}, testlog.New(t))
	add(testWorker{worker: orphan.sync.(*worker), pw: orphan})

	if pods := m.GetPods(); len(pods) != 2 {
		t.Errorf("GetPods: %d pods, want the two named web", len(pods))
	}
	p, ok := m.GetPodByName("default", "web")
	if !ok || p.UID != cur.UID {
		t.Errorf("GetPodByName = %v %v, want the pod not being deleted", p, ok)
	}
	if _, ok := m.GetPodByName("default", "gone"); ok {
		t.Error("a removed pod was found")
	}
}

type fakeNetwork struct {
	notReady error
	setups   int
	torn     []types.UID
}

func (n *fakeNetwork) Status() error { return n.notReady }
func (n *fakeNetwork) SetUp(_ context.Context, p network.PodRef, _ string, _ network.Options) (network.Result, error) {
	n.setups++
	return network.Result{IPs: []net.IP{net.ParseIP("10.244.1.7"), net.ParseIP("fd00::7")}}, nil
}
func (n *fakeNetwork) TearDown(_ context.Context, p network.PodRef, _ string) error {
	n.torn = append(n.torn, p.UID)
	return nil
}

// With a pod network, a pod waits (NetworkNotReady, retried) until it is
// ready, gets the network's addresses in status.podIPs, and is detached
// before its network namespace is removed; hostNetwork pods skip it.
func TestWorkerPodNetwork(t *testing.T) {
	e := newWorkerEnv(t)
	pn := &fakeNetwork{notReady: errors.New("cni plugin not initialized")}
	e.deps.net = pn
	pod := testPod("web", v1.RestartPolicyAlways, ctr("c"))
	w := e.worker(pod, kubetypes.SourceAPI)
	if next, _ := e.sync(w); next != time.Second || len(e.rt.specs) != 0 || !e.rec.has("NetworkNotReady") || e.rec.has("FailedCreatePodSandBox") {
		t.Fatalf("network not ready: next %v, containers %d, events %v", next, len(e.rt.specs), e.rec.reasons)
	}
	pn.notReady = nil
	e.settle(w)
	st := e.lastStatus(pod.UID)
	if st.PodIP != "10.244.1.7" || len(st.PodIPs) != 2 || st.PodIPs[1].IP != "fd00::7" {
		t.Errorf("podIP %q podIPs %v", st.PodIP, st.PodIPs)
	}
	w.remove()
	if _, done := e.settle(w); !done || len(pn.torn) != 1 || len(e.netns.removed) != 1 {
		t.Errorf("done %v, torn down %v, netns removed %v", done, pn.torn, e.netns.removed)
	}

	host := testPod("host", v1.RestartPolicyAlways, ctr("c"))
	host.Spec.HostNetwork = true
	before := pn.setups
	e.settle(e.worker(host, kubetypes.SourceAPI))
	if pn.setups != before || e.lastStatus(host.UID).PodIP != "192.0.2.1" {
		t.Errorf("hostNetwork pod: %d setups, podIP %q", pn.setups-before, e.lastStatus(host.UID).PodIP)
	}
}

// An agent killed between creating and starting a container leaves it
// created, without a task; after the restart its pod, removed meanwhile,
// is stopped once and cleaned up, not stopped at every sync.
func TestWorkerOrphanWithCreatedContainer(t *testing.T) {
	e := newWorkerEnv(t)
	ref := runtime.PodRef{UID: "gone", Name: "gone", Namespace: "default"}
	_, _ = e.rt.CreateContainer(context.Background(), runtime.ContainerSpec{Pod: ref, Name: "never-started"})
	w := newOrphanWorker(e.deps, ref, testlog.New(t))
	if _, done := e.settle(w); !done {
		t.Fatal("orphan worker did not end")
	}
	if len(e.rt.stops) != 1 || len(e.rt.cs) != 0 || len(e.netns.removed) != 1 {
		t.Errorf("stops %v, containers left %d, netns removed %v", e.rt.stops, len(e.rt.cs), e.netns.removed)
	}
	for _, ty := range e.pleg.expected {
		if ty == pleg.ContainerDied {
			t.Error("expected a ContainerDied event from a container that never ran")
		}
	}
}

// A status-only update (the agent's own write coming back) never wakes a
// worker: not a failing one waiting out its back-off, nor a healthy one. A
// spec or metadata change does, and so does a change of a condition named
// by a readiness gate (it changes Ready).
func TestWorkerIgnoresStatusOnlyUpdates(t *testing.T) {
	e := newWorkerEnv(t)
	e.deps.volumes = failingVolumes{}
	pod := testPod("web", v1.RestartPolicyAlways, ctr("c"))
	pod.Spec.ReadinessGates = []v1.PodReadinessGate{{ConditionType: "example.com/lb"}}
	pod.ResourceVersion = "1"
	w := e.worker(pod, kubetypes.SourceAPI)
	if next, _ := e.sync(w); next != time.Second {
		t.Fatalf("retry in %v", next)
	}
	woken := func() bool {
		select {
		case <-w.wake:
			return true
		default:
			return false
		}
	}
	st := pod.DeepCopy()
	st.ResourceVersion = "2"
	st.Status.Phase = v1.PodPending
	w.update(st)
	if woken() {
		t.Error("a status-only update cut the back-off short")
	}
	ann := st.DeepCopy()
	ann.ResourceVersion = "3"
	ann.Annotations["x"] = "y"
	w.update(ann)
	if !woken() {
		t.Error("an annotation change did not wake the failing worker")
	}

	// A healthy worker is not woken by its status either.
	e.deps.volumes = e.vols
	e.settle(w)
	again := ann.DeepCopy()
	again.ResourceVersion = "4"
	again.Status.Phase = v1.PodRunning
	again.Status.Conditions = []v1.PodCondition{{Type: v1.PodReady, Status: v1.ConditionFalse}}
	w.update(again)
	if woken() {
		t.Error("a status-only update woke a healthy worker")
	}
	gate := again.DeepCopy()
	gate.ResourceVersion = "5"
	gate.Status.Conditions = append(gate.Status.Conditions, v1.PodCondition{Type: "example.com/lb", Status: v1.ConditionFalse})
	w.update(gate)
	if !woken() {
		t.Error("a readiness gate's condition appearing did not wake the worker")
	}
	flip := gate.DeepCopy()
	flip.ResourceVersion = "6"
	flip.Status.Conditions[1].Status = v1.ConditionTrue
	w.update(flip)
	if !woken() {
		t.Error("a readiness gate's condition turning True did not wake the worker")
	}
	same := flip.DeepCopy()
	same.ResourceVersion = "7"
	same.Status.Conditions[1].LastProbeTime = metav1.Now()
	w.update(same)
	if woken() {
		t.Error("an unchanged readiness gate condition woke the worker")
	}
}

// The worker's log paths are kubelet's podLogsDir layout, as the node API
// and the runtime's symlinks name them (crilog).
func TestWorkerLogPathIsKubeletLayout(t *testing.T) {
	e := newWorkerEnv(t)
	pod := testPod("web", v1.RestartPolicyAlways)
	if got, want := containerLogPath(e.deps.podLogsDir, pod, "app", 2), crilog.ContainerLogPath(e.deps.podLogsDir, "default", "web", "uid-web", "app", 2); got != want {
		t.Fatalf("containerLogPath = %q, want %q", got, want)
	}
}

// The worker says once, at INFO, how a pod finished: its phase and each
// container's exit code and reason (the journal of a node is kept at
// INFO; issue 27's guest had no trace of why a pod was Failed).
func TestWorkerLogsHowAPodFinished(t *testing.T) {
	e := newWorkerEnv(t)
	var buf testlog.Buffer
	pod := testPod("once", v1.RestartPolicyNever, ctr("c"))
	pw := newPodWorkerPair(e.deps, pod, kubetypes.SourceAPI, slog.New(slog.NewTextHandler(&buf, nil)))
	w := testWorker{worker: pw.sync.(*worker), pw: pw}
	e.settle(w)
	for id, c := range e.rt.cs {
		if c.Pod.UID == pod.UID && c.State == runtime.StateRunning {
			e.rt.exit(id, 3)
		}
	}
	e.settle(w)
	w.poke()
	e.settle(w)
	if n := strings.Count(buf.String(), `msg="pod finished"`); n != 1 {
		t.Fatalf("%d \"pod finished\" lines, want 1; log:\n%s", n, buf.String())
	}
	if !buf.Contains(`msg="pod finished" pod=default/once podUID=uid-once phase=Failed reason="" containers="[c=3/Error]"`) {
		t.Errorf("no phase and container end in the log:\n%s", buf.String())
	}
}
