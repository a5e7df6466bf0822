package cpumanager

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/cpuset"

	"github.com/nodeagent/nodeagent/cm/cpumanager/state"
)

// dualSocketHT: 2 sockets × 2 cores × 2 threads, numbered as Linux
// numbers them (a core's threads are N and N+4).
var dualSocketHT = Topology{
	0: {0, 0, 0}, 4: {0, 0, 0}, 1: {0, 1, 0}, 5: {0, 1, 0},
	2: {1, 2, 1}, 6: {1, 2, 1}, 3: {1, 3, 1}, 7: {1, 3, 1},
}

func TestTakeByTopology(t *testing.T) {
	all := dualSocketHT.CPUs()
	for _, tc := range []struct {
		desc      string
		available cpuset.CPUSet
		n         int
		want      string
		err       string
	}{
		{desc: "one thread: the lowest", available: all, n: 1, want: "0"},
		{desc: "a core's worth: a whole core", available: all, n: 2, want: "0,4"},
		{desc: "a socket's worth: a whole socket", available: all, n: 4, want: "0-1,4-5"},
		{desc: "a thread fills a partly used core first", available: all.Difference(cpuset.New(0)), n: 1, want: "4"},
		{desc: "whole cores skip a partly used one", available: all.Difference(cpuset.New(0)), n: 2, want: "1,5"},
		{desc: "the fuller socket first", available: cpuset.New(1, 5, 2, 6, 3, 7), n: 2, want: "1,5"},
		{desc: "a socket and a core", available: all, n: 6, want: "0-2,4-6"},
		{desc: "not enough", available: cpuset.New(1), n: 2,
			err: "not enough cpus available to satisfy request: requested=2, available=1"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			got, err := takeByTopology(dualSocketHT, tc.available, tc.n)
			if tc.err != "" {
				if err == nil || err.Error() != tc.err {
					t.Fatalf("error %v, want %s", err, tc.err)
				}
				return
			}
			if err != nil || got.String() != tc.want {
				t.Fatalf("got %q (%v), want %q", got.String(), err, tc.want)
			}
		})
	}
}

func TestDiscover(t *testing.T) {
	root := t.TempDir()
	write := func(p, s string) {
		p = filepath.Join(root, p)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(s+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("online", "0-3")
	// Two sockets whose cores have the same core_id: kubelet's unique
	// core IDs (the lowest thread) tell them apart.
	for cpu, sc := range map[string][2]string{"0": {"0", "0"}, "1": {"1", "0"}, "2": {"0", "0"}, "3": {"1", "0"}} {
		write("cpu"+cpu+"/topology/physical_package_id", sc[0])
		write("cpu"+cpu+"/topology/core_id", sc[1])
		if err := os.MkdirAll(filepath.Join(root, "cpu"+cpu, "node"+sc[0]), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	topo, err := Discover(root)
	if err != nil {
		t.Fatal(err)
	}
	want := Topology{0: {0, 0, 0}, 2: {0, 0, 0}, 1: {1, 1, 1}, 3: {1, 1, 1}}
	for id, info := range want {
		if topo[id] != info {
			t.Errorf("cpu %d: %+v, want %+v", id, topo[id], info)
		}
	}
	if topo.CPUsPerCore() != 2 {
		t.Errorf("CPUsPerCore %d", topo.CPUsPerCore())
	}
}

func cpuReq(cpu, mem string) v1.ResourceRequirements {
	l := v1.ResourceList{v1.ResourceCPU: resource.MustParse(cpu), v1.ResourceMemory: resource.MustParse(mem)}
	return v1.ResourceRequirements{Requests: l, Limits: l}
}

func pod(uid string, init []v1.Container, cs ...v1.Container) *v1.Pod {
	return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: uid, Namespace: "ns", UID: types.UID(uid)},
		Spec: v1.PodSpec{InitContainers: init, Containers: cs}}
}

type fakeRuntime struct {
	mu      sync.Mutex
	running []Container
	updates []string
	cpusets map[string]string
}

func (f *fakeRuntime) RunningContainers(context.Context) ([]Container, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]Container(nil), f.running...), nil
}

func (f *fakeRuntime) UpdateContainerCPUSet(_ context.Context, id, cpus string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.updates = append(f.updates, id+"="+cpus)
	f.cpusets[id] = cpus
	return nil
}

type fixture struct {
	m      *Manager
	rt     *fakeRuntime
	clock  *clocktesting.FakeClock
	mu     sync.Mutex
	active []*v1.Pod
	dir    string
}

func (f *fixture) activePods() []*v1.Pod {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]*v1.Pod(nil), f.active...)
}

func newFixture(t *testing.T, dir string, reserved cpuset.CPUSet) *fixture {
	t.Helper()
	f := &fixture{rt: &fakeRuntime{cpusets: map[string]string{}}, dir: dir}
	f.clock = clocktesting.NewFakeClock(time.Unix(0, 0))
	m, err := New(Options{Policy: PolicyStatic, ReconcilePeriod: 10 * time.Second, Topology: dualSocketHT,
		ReservedCPUs: reserved, Reserved: *resource.NewQuantity(int64(reserved.Size()), resource.DecimalSI),
		StateDir: dir, Clock: f.clock})
	if err != nil {
		t.Fatal(err)
	}
	f.m = m
	if err := m.Restore(); err != nil {
		t.Fatal(err)
	}
	// A cancelled context: Run sets its sources and returns; tests call
	// Reconcile themselves.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	m.Run(ctx, f.rt, Pods{Active: f.activePods, Ready: func() bool { return true }})
	return f
}

func (f *fixture) admit(t *testing.T, p *v1.Pod) error {
	t.Helper()
	err := f.m.Allocate(p, f.active)
	if err == nil {
		f.active = append(f.active, p)
	}
	return err
}

func TestStaticAllocation(t *testing.T) {
	f := newFixture(t, t.TempDir(), cpuset.New(0))
	g := pod("g", nil, v1.Container{Name: "app", Resources: cpuReq("2", "1Gi")})
	if err := f.admit(t, g); err != nil {
		t.Fatal(err)
	}
	// Core 0 holds the reserved CPU 0: the whole free core 1 is taken.
	if got := f.m.CPUSet(g, &g.Spec.Containers[0]); got != "1,5" {
		t.Errorf("exclusive cpuset %q, want 1,5", got)
	}
	for _, tc := range []struct {
		desc string
		p    *v1.Pod
	}{
		{"burstable", pod("b", nil, v1.Container{Name: "c", Resources: v1.ResourceRequirements{Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("1")}}})},
		{"best effort", pod("be", nil, v1.Container{Name: "c"})},
		{"guaranteed, fractional cpu", pod("frac", nil, v1.Container{Name: "c", Resources: cpuReq("1500m", "1Gi")})},
	} {
		if err := f.admit(t, tc.p); err != nil {
			t.Fatal(err)
		}
		// The shared pool keeps the reserved CPU.
		if got := f.m.CPUSet(tc.p, &tc.p.Spec.Containers[0]); got != "0,2-4,6-7" {
			t.Errorf("%s: cpuset %q, want the shared pool 0,2-4,6-7", tc.desc, got)
		}
	}
	// The reserved CPU is never given: 5 CPUs are left for exclusive use.
	big := pod("big", nil, v1.Container{Name: "c", Resources: cpuReq("6", "1Gi")})
	err := f.m.Allocate(big, f.active)
	if want := "not enough cpus available to satisfy request: requested=6, available=5"; err == nil || err.Error() != want {
		t.Fatalf("Allocate: %v, want %s", err, want)
	}
	if got := f.m.Allocatable().String(); got != "1-7" {
		t.Errorf("allocatable %q, want all but the reserved CPU", got)
	}
	st, err := state.Read(f.dir)
	if err != nil {
		t.Fatal(err)
	}
	if st.Policy != "static" || st.Default.String() != "0,2-4,6-7" || st.Assign["g"]["app"].String() != "1,5" {
		t.Errorf("checkpoint %+v", st)
	}
}

// The CPUs of an init container are given again to the app containers
// that follow it; a sidecar's are not.
func TestInitContainerReuse(t *testing.T) {
	f := newFixture(t, t.TempDir(), cpuset.New(0))
	always := v1.ContainerRestartPolicyAlways
	p := pod("p", []v1.Container{{Name: "init", Resources: cpuReq("2", "1Gi")}},
		v1.Container{Name: "app", Resources: cpuReq("2", "1Gi")})
	if err := f.admit(t, p); err != nil {
		t.Fatal(err)
	}
	if i, a := f.m.CPUSet(p, &p.Spec.InitContainers[0]), f.m.CPUSet(p, &p.Spec.Containers[0]); i != a || i != "1,5" {
		t.Errorf("init %q, app %q: want both 1,5", i, a)
	}
	s := pod("s", []v1.Container{{Name: "sidecar", RestartPolicy: &always, Resources: cpuReq("2", "1Gi")}},
		v1.Container{Name: "app", Resources: cpuReq("2", "1Gi")})
	if err := f.admit(t, s); err != nil {
		t.Fatal(err)
	}
	if i, a := f.m.CPUSet(s, &s.Spec.InitContainers[0]), f.m.CPUSet(s, &s.Spec.Containers[0]); i == a {
		t.Errorf("sidecar and app share %q", i)
	}
	// Releasing the init container keeps the CPUs the app container
	// still holds out of the shared pool.
	p2 := p.DeepCopy()
	p2.Spec.InitContainers = nil
	f.active = []*v1.Pod{p2, s}
	f.m.Reconcile(context.Background())
	if got := f.m.CPUSet(p, &p.Spec.Containers[0]); got != "1,5" {
		t.Errorf("app after the init container's release: %q", got)
	}
	if strings.Contains(f.m.CPUSet(s, &v1.Container{Name: "shared"}), "1") {
		t.Errorf("shared pool %q has the app's CPUs", f.m.CPUSet(s, &v1.Container{Name: "shared"}))
	}
}

// Reconcile pushes the shared pool to running shared containers when it
// changes, and releases the CPUs of pods no longer active.
func TestReconcile(t *testing.T) {
	f := newFixture(t, t.TempDir(), cpuset.New(0))
	be := pod("be", nil, v1.Container{Name: "c"})
	if err := f.admit(t, be); err != nil {
		t.Fatal(err)
	}
	f.rt.running = []Container{{PodUID: "be", Name: "c", ID: "be-c"}}
	f.m.Reconcile(context.Background())
	if got := f.rt.cpusets["be-c"]; got != "0-7" {
		t.Fatalf("best-effort container %q, want 0-7", got)
	}
	g := pod("g", nil, v1.Container{Name: "app", Resources: cpuReq("1", "1Gi")})
	if err := f.admit(t, g); err != nil {
		t.Fatal(err)
	}
	f.rt.running = append(f.rt.running, Container{PodUID: "g", Name: "app", ID: "g-app"})
	f.m.Reconcile(context.Background())
	if be, g := f.rt.cpusets["be-c"], f.rt.cpusets["g-app"]; be != "0-3,5-7" || g != "4" {
		t.Fatalf("after admission: best effort %q, guaranteed %q", be, g)
	}
	n := len(f.rt.updates)
	f.m.Reconcile(context.Background())
	if len(f.rt.updates) != n {
		t.Errorf("unchanged cpusets pushed again: %v", f.rt.updates[n:])
	}
	// The guaranteed pod ends: its CPU returns to the shared pool.
	f.active = []*v1.Pod{be}
	f.rt.running = f.rt.running[:1]
	f.m.Reconcile(context.Background())
	if got := f.rt.cpusets["be-c"]; got != "0-7" {
		t.Errorf("after the guaranteed pod ended: %q, want 0-7", got)
	}
	if st, _ := state.Read(f.dir); len(st.Assign) != 0 || st.Default.String() != "0-7" {
		t.Errorf("checkpoint %+v", st)
	}
}

// Assignments survive a restart; a checkpoint of another policy, or one
// that does not match the node's CPUs, refuses the start.
func TestRestart(t *testing.T) {
	dir := t.TempDir()
	f := newFixture(t, dir, cpuset.New(0))
	g := pod("g", nil, v1.Container{Name: "app", Resources: cpuReq("2", "1Gi")})
	if err := f.admit(t, g); err != nil {
		t.Fatal(err)
	}
	f2 := newFixture(t, dir, cpuset.New(0))
	if got := f2.m.CPUSet(g, &g.Spec.Containers[0]); got != "1,5" {
		t.Fatalf("after restart: %q, want 1,5", got)
	}
	// Admitted again after the restart, the pod keeps its CPUs.
	if err := f2.admit(t, g); err != nil || f2.m.CPUSet(g, &g.Spec.Containers[0]) != "1,5" {
		t.Fatalf("re-admission: %v, %q", err, f2.m.CPUSet(g, &g.Spec.Containers[0]))
	}

	none, err := New(Options{Policy: PolicyNone, StateDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	want := `could not restore state from checkpoint: configured policy "none" differs from state checkpoint policy "static", please drain this node and delete the CPU manager checkpoint file "` + filepath.Join(dir, "cpu_manager_state") + `" before restarting Kubelet`
	if err := none.Restore(); err == nil || err.Error() != want {
		t.Errorf("none over a static checkpoint: %v\nwant %s", err, want)
	}

	// A reservation that grew past the shared pool.
	m, err := New(Options{Policy: PolicyStatic, Topology: dualSocketHT, ReservedCPUs: cpuset.New(0, 1),
		Reserved: resource.MustParse("2"), StateDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Restore(); err == nil || !strings.Contains(err.Error(), `not all reserved cpus: "0-1" are present in defaultCpuSet: "0,2-4,6-7"`) {
		t.Errorf("grown reservation: %v", err)
	}
}

func TestNewStatic(t *testing.T) {
	for _, tc := range []struct {
		desc     string
		reserved string
		set      cpuset.CPUSet
		want     string // reserved CPUs or the error
	}{
		{desc: "no reservation", reserved: "0", want: "[cpumanager] the static policy requires systemreserved.cpu + kubereserved.cpu to be greater than zero"},
		{desc: "fraction rounded up, lowest core first", reserved: "1500m", want: "0,4"},
		{desc: "explicit set", reserved: "2", set: cpuset.New(3, 7), want: "3,7"},
		{desc: "explicit set off the node", reserved: "1", set: cpuset.New(9), want: `[cpumanager] reserved cpus "9" are not all among the node's cpus "0-7"`},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			m, err := New(Options{Policy: PolicyStatic, Topology: dualSocketHT, Reserved: resource.MustParse(tc.reserved), ReservedCPUs: tc.set})
			got := ""
			if err != nil {
				got = err.Error()
			} else {
				got = m.Reserved().String()
			}
			if got != tc.want {
				t.Errorf("got %s, want %s", got, tc.want)
			}
		})
	}
}

// The loop reconciles once per period, and releases nothing until every
// pod source delivered its pods (after a restart the pods are admitted
// again one by one).
func TestRunLoop(t *testing.T) {
	dir := t.TempDir()
	f := newFixture(t, dir, cpuset.New(0))
	g := pod("g", nil, v1.Container{Name: "app", Resources: cpuReq("1", "1Gi")})
	if err := f.admit(t, g); err != nil {
		t.Fatal(err)
	}
	clk := clocktesting.NewFakeClock(time.Unix(0, 0))
	m, err := New(Options{Policy: PolicyStatic, ReconcilePeriod: 10 * time.Second, Topology: dualSocketHT,
		ReservedCPUs: cpuset.New(0), Reserved: resource.MustParse("1"), StateDir: dir, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Restore(); err != nil {
		t.Fatal(err)
	}
	rt := &fakeRuntime{cpusets: map[string]string{}, running: []Container{{PodUID: "be", Name: "c", ID: "be-c"}}}
	var mu sync.Mutex
	ready := false
	be := pod("be", nil, v1.Container{Name: "c"})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		m.Run(ctx, rt, Pods{Active: func() []*v1.Pod { return []*v1.Pod{be} },
			Ready: func() bool { mu.Lock(); defer mu.Unlock(); return ready }})
	}()
	defer func() { cancel(); <-done }()
	step := func() {
		t.Helper()
		for i := 0; i < 1000 && !clk.HasWaiters(); i++ {
			time.Sleep(time.Millisecond)
		}
		n := len(updates(rt))
		clk.Step(10 * time.Second)
		for i := 0; i < 1000 && len(updates(rt)) == n && !clk.HasWaiters(); i++ {
			time.Sleep(time.Millisecond)
		}
		for i := 0; i < 1000 && !clk.HasWaiters(); i++ {
			time.Sleep(time.Millisecond)
		}
	}
	step()
	if got := cpusetOf(rt, "be-c"); got != "0-3,5-7" {
		t.Fatalf("before sources are ready: %q, want the guaranteed pod's CPU kept out", got)
	}
	mu.Lock()
	ready = true
	mu.Unlock()
	step()
	if got := cpusetOf(rt, "be-c"); got != "0-7" {
		t.Fatalf("after sources are ready: %q, want 0-7", got)
	}
}

func updates(f *fakeRuntime) []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.updates...)
}

func cpusetOf(f *fakeRuntime, id string) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.cpusets[id]
}
