package nodestatus

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/nodeagent/nodeagent/internal/testing/backofftest"
)

const testNode = "node-a"

type testEnv struct {
	t      *testing.T
	host   *fakeHost
	client *fake.Clientset
	clock  *testingclock.FakeClock
	m      *Manager

	mu          sync.Mutex
	images      []Image
	versionErr  error
	versionHang chan struct{} // when non-nil, RuntimeVersion blocks until closed
}

func newTestEnv(t *testing.T, mutate func(*Options), objects ...runtime.Object) *testEnv {
	t.Helper()
	e := &testEnv{t: t, host: newFakeHost(t), client: fake.NewClientset(objects...),
		clock: testingclock.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))}
	e.images = []Image{
		{ID: "sha256:small", Names: []string{"docker.io/library/busybox:1.36"}, SizeBytes: 2 << 20},
		{ID: "sha256:big", Names: []string{"registry.k8s.io/pause@sha256:abc", "registry.k8s.io/pause:3.10"}, SizeBytes: 300 << 20},
	}
	o := Options{
		NodeName:     testNode,
		Nodes:        e.client.CoreV1().Nodes(),
		Clock:        e.clock,
		Logger:       slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug})),
		AgentVersion: "v0.1.0",
		Labels:       map[string]string{"node.kubernetes.io/pool": "a", "team": "infra"},
		Taints:       []v1.Taint{{Key: "example.com/new", Effect: v1.TaintEffectNoSchedule}},
		ProviderID:   "local://node-a",
		Host:         e.host.Host,
		Rand:         func() float64 { return 0.5 }, // no jitter
		RuntimeVersion: func(ctx context.Context) (string, string, error) {
			e.mu.Lock()
			hang, err := e.versionHang, e.versionErr
			e.mu.Unlock()
			if hang != nil {
				select {
				case <-hang:
				case <-ctx.Done():
					return "", "", ctx.Err()
				}
			}
			return "containerd", "1.7.35", err
		},
		ListImages: func(context.Context) ([]Image, error) {
			e.mu.Lock()
			defer e.mu.Unlock()
			return append([]Image(nil), e.images...), nil
		},
		RuntimeHealthy: func() error { return nil },
		PLEGHealthy:    func() error { return nil },
	}
	if mutate != nil {
		mutate(&o)
	}
	m, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	e.m = m
	return e
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// statusPatches returns the bodies of the status patches sent so far.
func (e *testEnv) statusPatches() []string {
	var out []string
	for _, a := range e.client.Actions() {
		if p, ok := a.(clienttesting.PatchAction); ok && a.GetSubresource() == "status" {
			out = append(out, string(p.GetPatch()))
		}
	}
	return out
}

func (e *testEnv) count(verb, subresource string) int {
	n := 0
	for _, a := range e.client.Actions() {
		if a.GetVerb() == verb && a.GetSubresource() == subresource && a.GetResource().Resource == "nodes" {
			n++
		}
	}
	return n
}

func (e *testEnv) node() *v1.Node {
	e.t.Helper()
	n, err := e.client.Tracker().Get(schema.GroupVersionResource{Version: "v1", Resource: "nodes"}, "", testNode)
	if err != nil {
		e.t.Fatal(err)
	}
	return n.(*v1.Node)
}

func (e *testEnv) sync() {
	e.t.Helper()
	if err := e.m.SyncOnce(context.Background()); err != nil {
		e.t.Fatal(err)
	}
}

func condition(n *v1.Node, typ v1.NodeConditionType) v1.NodeCondition {
	for _, c := range n.Status.Conditions {
		if c.Type == typ {
			return c
		}
	}
	return v1.NodeCondition{}
}

func TestRegisterCreatesCompleteNode(t *testing.T) {
	e := newTestEnv(t, nil)
	if _, err := e.m.Register(context.Background()); err != nil {
		t.Fatal(err)
	}
	n := e.node()
	wantLabels := map[string]string{"kubernetes.io/hostname": testNode, "kubernetes.io/os": "linux", "kubernetes.io/arch": n.Status.NodeInfo.Architecture,
		"node.kubernetes.io/pool": "a", "team": "infra"}
	if len(n.Labels) != len(wantLabels) {
		t.Errorf("labels %v, want %v", n.Labels, wantLabels)
	}
	for k, v := range wantLabels {
		if n.Labels[k] != v {
			t.Errorf("label %s=%q, want %q", k, n.Labels[k], v)
		}
	}
	if n.Annotations[ControllerManagedAttachAnnotation] != "true" {
		t.Errorf("annotations %v, want kubelet's controller-managed attach-detach", n.Annotations)
	}
	if len(n.Spec.Taints) != 1 || n.Spec.Taints[0].Key != "example.com/new" || n.Spec.ProviderID != "local://node-a" {
		t.Errorf("spec %+v", n.Spec)
	}
	s := n.Status
	if len(s.Addresses) != 2 || s.Addresses[0].Address != "10.1.2.3" || s.Addresses[1].Address != testNode {
		t.Errorf("addresses %v", s.Addresses)
	}
	for r, want := range map[v1.ResourceName]string{"cpu": "4", "memory": "8Gi", "pods": "110", "ephemeral-storage": "100Gi",
		"hugepages-2Mi": "0", "hugepages-1Gi": "0"} {
		if got := s.Capacity[r]; got.String() != want {
			t.Errorf("capacity %s = %s, want %s", r, got.String(), want)
		}
	}
	if got := s.Allocatable[v1.ResourceMemory]; got.String() != "8092Mi" {
		t.Errorf("allocatable memory %s", got.String())
	}
	if got := s.Allocatable[v1.ResourceEphemeralStorage]; got.Value() != 100<<30-int64(float64(100<<30)*0.1) {
		t.Errorf("allocatable ephemeral-storage %s", got.String())
	}
	ni := s.NodeInfo
	if ni.MachineID == "" || ni.SystemUUID == "" || ni.BootID == "" || ni.KernelVersion != "6.1.0-test-amd64" ||
		ni.OSImage != "Debian GNU/Linux 12 (bookworm)" || ni.ContainerRuntimeVersion != "containerd://1.7.35" ||
		ni.KubeletVersion != "v1.34.4+nodeagent.0.1.0" || ni.OperatingSystem != "linux" {
		t.Errorf("nodeInfo %+v", ni)
	}
	if len(s.Images) != 2 || s.Images[0].SizeBytes != 300<<20 {
		t.Errorf("images %v", s.Images)
	}
	if len(s.Conditions) != 4 {
		t.Errorf("conditions %v", s.Conditions)
	}
	for typ, reason := range map[v1.NodeConditionType]string{v1.NodeMemoryPressure: "KubeletHasSufficientMemory",
		v1.NodeDiskPressure: "KubeletHasNoDiskPressure", v1.NodePIDPressure: "KubeletHasSufficientPID", v1.NodeReady: "KubeletReady"} {
		if c := condition(n, typ); c.Reason != reason {
			t.Errorf("%s: %+v", typ, c)
		}
	}
	if s.Conditions[3].Type != v1.NodeReady {
		t.Error("Ready must be the last condition")
	}
	if e.m.LastReport().IsZero() {
		t.Error("creating the Node with its status is a report")
	}
	// Nothing changed: the next sync does not write.
	e.clock.Step(10 * time.Second)
	e.sync()
	if p := e.statusPatches(); len(p) != 0 {
		t.Errorf("unexpected patches %v", p)
	}
}

func TestRegisterReconcilesExistingNode(t *testing.T) {
	existing := &v1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: testNode, Labels: map[string]string{
			"kubernetes.io/hostname": "old", "kubernetes.io/os": "linux", "admin": "keep"}},
		Spec: v1.NodeSpec{Taints: []v1.Taint{{Key: "admin/taint", Effect: v1.TaintEffectNoExecute}}},
	}
	e := newTestEnv(t, nil, existing)
	if _, err := e.m.Register(context.Background()); err != nil {
		t.Fatal(err)
	}
	var patch string
	for _, a := range e.client.Actions() {
		if p, ok := a.(clienttesting.PatchAction); ok {
			patch = string(p.GetPatch())
		}
	}
	var body struct {
		Metadata struct{ Labels, Annotations map[string]string } `json:"metadata"`
	}
	if err := json.Unmarshal([]byte(patch), &body); err != nil {
		t.Fatalf("patch %q: %v", patch, err)
	}
	if len(body.Metadata.Labels) != 4 || body.Metadata.Labels["kubernetes.io/hostname"] != testNode {
		t.Errorf("label patch must hold exactly the changed labels: %s", patch)
	}
	if len(body.Metadata.Annotations) != 1 || body.Metadata.Annotations[ControllerManagedAttachAnnotation] != "true" {
		t.Errorf("the patch must add kubelet's controller-managed attach-detach annotation: %s", patch)
	}
	n := e.node()
	if n.Labels["admin"] != "keep" || n.Labels["team"] != "infra" || len(n.Spec.Taints) != 1 || n.Spec.Taints[0].Key != "admin/taint" {
		t.Errorf("node %+v", n.ObjectMeta.Labels)
	}
	if !e.m.LastReport().IsZero() {
		t.Error("reconciling is not a status report")
	}
	// Always once after start.
	e.sync()
	if len(e.statusPatches()) != 1 || condition(e.node(), v1.NodeReady).Status != v1.ConditionTrue {
		t.Errorf("first sync after start must report: %v", e.statusPatches())
	}
}

func TestRegisterRetriesWithBackoff(t *testing.T) {
	// No runtime probes: their timeouts wait on the fake clock too, and
	// ExpectDelays needs the retry loop to be its only waiter.
	e := newTestEnv(t, func(o *Options) {
		o.RuntimeVersion, o.ListImages, o.RuntimeHealthy, o.PLEGHealthy = nil, nil, nil, nil
	})
	var calls atomic.Int32
	const fails = 10
	e.client.PrependReactor("create", "nodes", func(clienttesting.Action) (bool, runtime.Object, error) {
		if calls.Add(1) <= fails {
			return true, nil, apierrors.NewServiceUnavailable("apiserver starting")
		}
		return false, nil, nil
	})
	done := make(chan error, 1)
	go func() { _, err := e.m.Register(context.Background()); done <- err }()
	// kubelet's: 100ms doubling to 7s.
	ms := time.Millisecond
	backofftest.ExpectDelays(t, e.clock, func() int { return int(calls.Load()) },
		100*ms, 200*ms, 400*ms, 800*ms, 1600*ms, 3200*ms, 6400*ms, 7000*ms, 7000*ms, 7000*ms)
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Register did not return after the create succeeded")
	}
	if n := calls.Load(); n != fails+1 {
		t.Errorf("%d create calls, want %d", n, fails+1)
	}
}

func TestRegisterGivesUpWhenContextDone(t *testing.T) {
	e := newTestEnv(t, nil)
	e.client.PrependReactor("create", "nodes", func(clienttesting.Action) (bool, runtime.Object, error) {
		return true, nil, errors.New("boom")
	})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := e.m.Register(ctx); err == nil || !strings.Contains(err.Error(), "boom") {
		t.Errorf("got %v, want the context error with the last cause", err)
	}
}

func TestSyncReportsOnChangeOrAfterReportFrequency(t *testing.T) {
	e := newTestEnv(t, nil)
	if _, err := e.m.Register(context.Background()); err != nil {
		t.Fatal(err)
	}
	// 5 minutes of 10s periods with nothing changing: no write until the period passes.
	for i := 1; i < 30; i++ {
		e.clock.Step(10 * time.Second)
		e.sync()
	}
	if p := e.statusPatches(); len(p) != 0 {
		t.Fatalf("wrote before the report frequency: %v", p)
	}
	e.clock.Step(10 * time.Second)
	e.sync()
	p := e.statusPatches()
	if len(p) != 1 {
		t.Fatalf("want one write at the report frequency, got %v", p)
	}
	if strings.Contains(p[0], "images") || !strings.Contains(p[0], "lastHeartbeatTime") {
		t.Errorf("a heartbeat-only report must patch only the heartbeats: %s", p[0])
	}
	// A new image is a meaningful change: reported at the next period.
	e.mu.Lock()
	e.images = append(e.images, Image{ID: "sha256:new", Names: []string{"example.com/new:1"}, SizeBytes: 5 << 20})
	e.mu.Unlock()
	e.clock.Step(10 * time.Second)
	e.sync()
	p = e.statusPatches()
	if len(p) != 2 || !strings.Contains(p[1], "example.com/new:1") {
		t.Fatalf("image change not reported: %v", p)
	}
	if n := e.node(); len(n.Status.Images) != 3 {
		t.Errorf("images %v", n.Status.Images)
	}
}

func TestSetFrequenciesTakesEffect(t *testing.T) {
	e := newTestEnv(t, nil)
	if _, err := e.m.Register(context.Background()); err != nil {
		t.Fatal(err)
	}
	e.m.SetFrequencies(10*time.Second, 10*time.Second) // the legacy behaviour
	for i := 0; i < 6; i++ {
		e.clock.Step(10 * time.Second)
		e.sync()
	}
	if n := len(e.statusPatches()); n != 6 {
		t.Errorf("%d writes in 60s with reportFrequency 10s, want 6", n)
	}
}

func TestSyncRetriesFromFreshGet(t *testing.T) {
	e := newTestEnv(t, nil)
	if _, err := e.m.Register(context.Background()); err != nil {
		t.Fatal(err)
	}
	var patches atomic.Int32
	e.client.PrependReactor("patch", "nodes", func(a clienttesting.Action) (bool, runtime.Object, error) {
		if patches.Add(1) <= 2 {
			return true, nil, apierrors.NewConflict(schema.GroupResource{Resource: "nodes"}, testNode, errors.New("conflict"))
		}
		return false, nil, nil
	})
	e.mu.Lock()
	e.images = e.images[:1]
	e.mu.Unlock()
	gets := e.count("get", "")
	e.sync()
	if patches.Load() != 3 {
		t.Errorf("%d patch tries, want 3", patches.Load())
	}
	if g := e.count("get", "") - gets; g != 2 {
		t.Errorf("%d GETs, want 2 (first try from cache, retries fresh)", g)
	}
	if len(e.node().Status.Images) != 1 {
		t.Error("status not written")
	}
}

func TestSyncGivesUpAfterFiveTries(t *testing.T) {
	e := newTestEnv(t, nil)
	if _, err := e.m.Register(context.Background()); err != nil {
		t.Fatal(err)
	}
	last := e.m.LastReport()
	var patches atomic.Int32
	e.client.PrependReactor("patch", "nodes", func(a clienttesting.Action) (bool, runtime.Object, error) {
		patches.Add(1)
		return true, nil, apierrors.NewInternalError(errors.New("etcd down"))
	})
	e.clock.Step(DefaultReportFrequency)
	if err := e.m.SyncOnce(context.Background()); err == nil {
		t.Error("want an error after 5 failed tries")
	}
	if patches.Load() != StatusUpdateRetries {
		t.Errorf("%d tries", patches.Load())
	}
	if !e.m.LastReport().Equal(last) {
		t.Error("a failed report must not count as a report")
	}
	// A failed post does not change the computed status: Ready stays True.
	e.client.ReactionChain = e.client.ReactionChain[1:]
	e.clock.Step(10 * time.Second)
	e.sync()
	if c := condition(e.node(), v1.NodeReady); c.Status != v1.ConditionTrue || !c.LastTransitionTime.Time.Equal(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)) {
		t.Errorf("Ready %+v", c)
	}
}

func TestNodeDeletedIsRegisteredAgain(t *testing.T) {
	e := newTestEnv(t, nil)
	if _, err := e.m.Register(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := e.client.CoreV1().Nodes().Delete(context.Background(), testNode, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	e.m.SetFrequencies(0, time.Second)
	e.clock.Step(10 * time.Second)
	e.sync()
	if n := e.node(); condition(n, v1.NodeReady).Status != v1.ConditionTrue || n.Labels["team"] != "infra" {
		t.Errorf("node not recreated: %+v", n)
	}
}

func TestMemoryPressureHysteresis(t *testing.T) {
	e := newTestEnv(t, func(o *Options) {
		o.EvictionHard = map[string]string{"memory.available": "1Gi"}
	})
	if _, err := e.m.Register(context.Background()); err != nil {
		t.Fatal(err)
	}
	step := func() v1.NodeCondition {
		t.Helper()
		e.clock.Step(10 * time.Second)
		e.sync()
		return condition(e.node(), v1.NodeMemoryPressure)
	}
	if c := condition(e.node(), v1.NodeMemoryPressure); c.Status != v1.ConditionFalse {
		t.Fatalf("%+v", c)
	}
	e.host.setMem(8<<30, 100<<20, 200<<20) // 300Mi available < 1Gi
	c := step()
	if c.Status != v1.ConditionTrue || c.Reason != "KubeletHasInsufficientMemory" || c.Message != "kubelet has insufficient memory available" {
		t.Fatalf("%+v", c)
	}
	flip := c.LastTransitionTime
	// The signal oscillates around the threshold: the condition stays True.
	for i := 0; i < 10; i++ {
		if i%2 == 0 {
			e.host.setMem(8<<30, 4<<30, 0)
		} else {
			e.host.setMem(8<<30, 100<<20, 0)
		}
		if c := step(); c.Status != v1.ConditionTrue || !c.LastTransitionTime.Equal(&flip) {
			t.Fatalf("flapped at %d: %+v", i, c)
		}
	}
	// Cleared for good: True for the transition period after the last crossing, then False.
	e.host.setMem(8<<30, 4<<30, 0)
	lastCrossing := e.clock.Now()
	for e.clock.Now().Sub(lastCrossing) < DefaultEvictionPressureTransition-10*time.Second {
		if c := step(); c.Status != v1.ConditionTrue {
			t.Fatalf("cleared after %v: %+v", e.clock.Now().Sub(lastCrossing), c)
		}
	}
	c = step()
	if c.Status != v1.ConditionFalse || c.Reason != "KubeletHasSufficientMemory" || !c.LastTransitionTime.Time.Equal(e.clock.Now()) {
		t.Fatalf("after the transition period: %+v", c)
	}
	if r := condition(e.node(), v1.NodeReady); r.Status != v1.ConditionTrue {
		t.Errorf("memory pressure must not make the node NotReady: %+v", r)
	}
}

func TestDiskAndPIDPressure(t *testing.T) {
	e := newTestEnv(t, func(o *Options) {
		o.EvictionHard = map[string]string{"nodefs.inodesFree": "5%", "imagefs.available": "15%", "pid.available": "1000"}
		o.ImageFSDir = "/var/lib/containerd"
	})
	e.host.fs["/var/lib/containerd"] = FSStats{CapacityBytes: 100, AvailableBytes: 10, Inodes: 100, InodesFree: 100}
	e.host.write("/proc/loadavg", "0.50 0.40 0.30 2/62000 12345\n")
	if _, err := e.m.Register(context.Background()); err != nil {
		t.Fatal(err)
	}
	n := e.node()
	if c := condition(n, v1.NodeDiskPressure); c.Status != v1.ConditionTrue || c.Reason != "KubeletHasDiskPressure" {
		t.Errorf("disk %+v", c)
	}
	if c := condition(n, v1.NodePIDPressure); c.Status != v1.ConditionTrue || c.Reason != "KubeletHasInsufficientPID" {
		t.Errorf("pid %+v", c)
	}
}

func TestReadyDoesNotFlapOnOneSlowRuntimeCall(t *testing.T) {
	e := newTestEnv(t, nil)
	if _, err := e.m.Register(context.Background()); err != nil {
		t.Fatal(err)
	}
	hang := make(chan struct{})
	e.mu.Lock()
	e.versionHang = hang
	e.mu.Unlock()
	e.clock.Step(10 * time.Second)
	done := make(chan error, 1)
	go func() { done <- e.m.SyncOnce(context.Background()) }()
	for !e.clock.HasWaiters() {
		time.Sleep(time.Millisecond)
	}
	e.clock.Step(DefaultRuntimeCallTimeout)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if len(e.statusPatches()) != 0 {
		t.Errorf("one slow call changed the status: %v", e.statusPatches())
	}
	// While the call hangs no second call starts and no sync waits for it
	// again; beyond the grace period the runtime is reported down.
	for e.clock.Now().Sub(e.m.LastReport()) < DefaultRuntimeGracePeriod+10*time.Second {
		e.clock.Step(10 * time.Second)
		e.sync()
	}
	c := condition(e.node(), v1.NodeReady)
	if c.Status != v1.ConditionFalse || c.Reason != "KubeletNotReady" || !strings.Contains(c.Message, "container runtime is down") {
		t.Fatalf("Ready %+v", c)
	}
	if v := e.node().Status.NodeInfo.ContainerRuntimeVersion; v != "containerd://1.7.35" {
		t.Errorf("the last known version must stay: %q", v)
	}
	close(hang)
	time.Sleep(10 * time.Millisecond)
	e.mu.Lock()
	e.versionHang = nil
	e.mu.Unlock()
	e.clock.Step(10 * time.Second)
	e.sync()
	if c := condition(e.node(), v1.NodeReady); c.Status != v1.ConditionTrue {
		t.Errorf("Ready after recovery %+v", c)
	}
}

func TestReadyFalseWhenRuntimeNeverAnswered(t *testing.T) {
	e := newTestEnv(t, func(o *Options) {
		o.PLEGHealthy = func() error { return errors.New("pleg was last seen active 3m0s ago; threshold is 3m0s") }
	})
	e.versionErr = errors.New("connection refused")
	if _, err := e.m.Register(context.Background()); err != nil {
		t.Fatal(err)
	}
	c := condition(e.node(), v1.NodeReady)
	if c.Status != v1.ConditionFalse || c.Message != "[container runtime is down: connection refused, PLEG is not healthy: pleg was last seen active 3m0s ago; threshold is 3m0s]" {
		t.Errorf("Ready %+v", c)
	}
}

func TestReadyFollowsNetwork(t *testing.T) {
	const notReady = "container runtime network not ready: NetworkReady=false reason:NetworkPluginNotReady message:Network plugin returns error: cni plugin not initialized"
	var netErr atomic.Pointer[error]
	e := newTestEnv(t, func(o *Options) {
		o.NetworkReady = func() error {
			if p := netErr.Load(); p != nil {
				return *p
			}
			return nil
		}
	})
	err := errors.New(notReady)
	netErr.Store(&err)
	if _, err := e.m.Register(context.Background()); err != nil {
		t.Fatal(err)
	}
	c := condition(e.node(), v1.NodeReady)
	if c.Status != v1.ConditionFalse || c.Reason != "KubeletNotReady" || c.Message != notReady {
		t.Fatalf("Ready without a network: %+v", c)
	}
	// Restored: Ready at the next computation, no grace period involved.
	netErr.Store(nil)
	e.clock.Step(10 * time.Second)
	e.sync()
	if c := condition(e.node(), v1.NodeReady); c.Status != v1.ConditionTrue {
		t.Fatalf("Ready after the network came up: %+v", c)
	}
	// Lost again: NotReady at once, after the runtime's causes.
	netErr.Store(&err)
	e.versionErr = errors.New("connection refused")
	e.clock.Step(time.Hour)
	e.sync()
	c = condition(e.node(), v1.NodeReady)
	if c.Status != v1.ConditionFalse || !strings.HasSuffix(c.Message, ", "+notReady+"]") {
		t.Fatalf("Ready with runtime and network down: %+v", c)
	}
}

func TestNoRuntimeConfigured(t *testing.T) {
	e := newTestEnv(t, func(o *Options) {
		o.RuntimeVersion, o.ListImages, o.RuntimeHealthy, o.PLEGHealthy = nil, nil, nil, nil
	})
	if _, err := e.m.Register(context.Background()); err != nil {
		t.Fatal(err)
	}
	n := e.node()
	if condition(n, v1.NodeReady).Status != v1.ConditionTrue || n.Status.NodeInfo.ContainerRuntimeVersion != "" || len(n.Status.Images) != 0 {
		t.Errorf("%+v", n.Status)
	}
}

func TestSeesChangesByOthers(t *testing.T) {
	// The node lifecycle controller sets Ready=Unknown when it missed
	// heartbeats; the agent must correct it at the next period, not after
	// the report frequency.
	e := newTestEnv(t, nil)
	if _, err := e.m.Register(context.Background()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	e.m.startInformer(ctx)
	for e.m.lister.Load() == nil {
		time.Sleep(time.Millisecond)
	}
	n := e.node().DeepCopy()
	for i := range n.Status.Conditions {
		if n.Status.Conditions[i].Type == v1.NodeReady {
			n.Status.Conditions[i].Status = v1.ConditionUnknown
			n.Status.Conditions[i].Reason = "NodeStatusUnknown"
		}
	}
	if _, err := e.client.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	for {
		got, err := (*e.m.lister.Load()).Get(testNode)
		if err == nil && condition(got, v1.NodeReady).Status == v1.ConditionUnknown {
			break
		}
		time.Sleep(time.Millisecond)
	}
	e.clock.Step(10 * time.Second)
	e.sync()
	if c := condition(e.node(), v1.NodeReady); c.Status != v1.ConditionTrue {
		t.Errorf("Ready %+v", c)
	}
}

func TestRunReportsAtOnceThenPeriodically(t *testing.T) {
	e := newTestEnv(t, nil)
	if _, err := e.m.Register(context.Background()); err != nil {
		t.Fatal(err)
	}
	e.m.lastReport.Store(0) // as after a restart against an existing Node
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan struct{})
	go func() { e.m.Run(ctx); close(stopped) }()
	deadline := time.Now().Add(5 * time.Second)
	for e.m.LastReport().IsZero() {
		if time.Now().After(deadline) {
			t.Fatal("no report after start")
		}
		time.Sleep(time.Millisecond)
	}
	e.m.SetFrequencies(time.Second, time.Second) // concurrently with Run
	for len(e.statusPatches()) < 3 {
		if time.Now().After(deadline) {
			t.Fatalf("%d reports", len(e.statusPatches()))
		}
		e.clock.Step(time.Second)
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
	<-stopped
}

func TestOptionsValidation(t *testing.T) {
	client := fake.NewClientset()
	for _, tc := range []struct {
		desc    string
		mutate  func(*Options)
		wantErr string
	}{
		{"ok", func(o *Options) {}, ""},
		{"no name", func(o *Options) { o.NodeName = "" }, "nodeName: required"},
		{"bad name", func(o *Options) { o.NodeName = "Node_A" }, "nodeName"},
		{"no client", func(o *Options) { o.Nodes = nil }, "nodes: required"},
		{"negative frequency", func(o *Options) { o.UpdateFrequency = -time.Second }, "nodeStatusUpdateFrequency"},
		{"bad node ip", func(o *Options) { o.NodeIP = "10.0.0" }, "not an IP"},
		{"loopback node ip", func(o *Options) { o.NodeIP = "127.0.0.1" }, "loopback"},
		{"bad reserved", func(o *Options) { o.SystemReserved = map[string]string{"memory": "lots"} }, "systemReserved[memory]"},
		{"negative reserved", func(o *Options) { o.KubeReserved = map[string]string{"cpu": "-1"} }, "kubeReserved[cpu]"},
		{"bad eviction", func(o *Options) { o.EvictionHard = map[string]string{"memory.available": "1.5Xi"} }, "evictionHard"},
		{"node-restriction label", func(o *Options) {
			o.Labels = map[string]string{"node-restriction.kubernetes.io/secure": "true"}
		}, "NodeRestriction"},
		{"kubernetes.io label", func(o *Options) { o.Labels = map[string]string{"kubernetes.io/role": "master"} }, "NodeRestriction"},
		{"allowed kubernetes.io labels", func(o *Options) {
			o.Labels = map[string]string{"node.kubernetes.io/pool": "a", "topology.kubernetes.io/zone": "z1", "kubelet.kubernetes.io/x": "y"}
		}, ""},
		{"bad label value", func(o *Options) { o.Labels = map[string]string{"a": "has space"} }, "value"},
		{"bad taint effect", func(o *Options) { o.Taints = []v1.Taint{{Key: "a", Effect: "Sometimes"}} }, "effect"},
		{"max images", func(o *Options) { o.MaxImages = -2 }, "nodeStatusMaxImages"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			o := Options{NodeName: "node-a", Nodes: client.CoreV1().Nodes()}
			tc.mutate(&o)
			_, err := New(o)
			if tc.wantErr == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("got %v, want error containing %q", err, tc.wantErr)
			}
		})
	}
}

// Before the Node informer synced (an agent restart, or no API server at
// all), NodeAnyway computes the node from the host: admission must see the
// same allocatable the registered Node will report, never an empty one.
func TestNodeAnywayBeforeTheInformerSynced(t *testing.T) {
	e := newTestEnv(t, func(o *Options) {
		o.SystemReserved = map[string]string{"cpu": "500m"}
	})
	if e.m.NodeSynced() || e.m.Node() != nil {
		t.Fatal("informer synced before Run")
	}
	local, err := e.m.NodeAnyway(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if local.Name != testNode || local.UID != "" {
		t.Errorf("local node %s uid %q", local.Name, local.UID)
	}
	registered, err := e.m.Register(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range []v1.ResourceName{v1.ResourceCPU, v1.ResourceMemory, v1.ResourcePods, v1.ResourceEphemeralStorage} {
		got, want := local.Status.Allocatable[r], registered.Status.Allocatable[r]
		if got.IsZero() || got.Cmp(want) != 0 {
			t.Errorf("allocatable %s: local %s, registered %s", r, got.String(), want.String())
		}
	}
	if cpu := local.Status.Allocatable[v1.ResourceCPU]; cpu.MilliValue() != 3500 {
		t.Errorf("allocatable cpu %s, want 3500m (4 cpus - 500m reserved)", cpu.String())
	}
	if len(local.Status.Addresses) == 0 {
		t.Error("no addresses")
	}

	// A host whose capacity cannot be read gives an error, not a node
	// with nothing allocatable.
	e.host.write("/sys/devices/system/cpu/online", "garbage\n")
	if n, err := e.m.NodeAnyway(context.Background()); err == nil {
		t.Errorf("unreadable capacity: node %+v, no error", n.Status.Allocatable)
	}
}

// A change of the volumes in use is computed and written at once when
// SyncSoon asks (the clock does not move: no period passes), and every
// computation tells VolumesReportedInUse what the Node lists — after a
// write the written list, with nothing to write the Node's own; a failed
// write tells nothing, so a volume it would have added is not reported.
func TestSyncSoonReportsVolumesInUseAtOnce(t *testing.T) {
	const vol = v1.UniqueVolumeName("kubernetes.io/csi/d^a")
	var mu sync.Mutex
	var inUse []v1.UniqueVolumeName
	marked := make(chan []v1.UniqueVolumeName, 20)
	e := newTestEnv(t, func(o *Options) {
		o.VolumesInUse = func() []v1.UniqueVolumeName {
			mu.Lock()
			defer mu.Unlock()
			return append([]v1.UniqueVolumeName(nil), inUse...)
		}
		o.VolumesReportedInUse = func(l []v1.UniqueVolumeName) { marked <- l }
	})
	if _, err := e.m.Register(context.Background()); err != nil {
		t.Fatal(err)
	}
	if len(marked) != 0 {
		t.Error("Register marked volumes (kubelet leaves it to the status sync)")
	}
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan struct{})
	go func() { e.m.Run(ctx); close(stopped) }()
	defer func() { cancel(); <-stopped }()
	next := func(what string) []v1.UniqueVolumeName {
		t.Helper()
		select {
		case l := <-marked:
			return l
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: no status computation", what)
			return nil
		}
	}
	// Run's first computation: nothing changed since the registration,
	// nothing written, the Node's (empty) list marked.
	if l := next("start"); len(l) != 0 {
		t.Errorf("marked %v at start", l)
	}
	writes := len(e.statusPatches())

	mu.Lock()
	inUse = []v1.UniqueVolumeName{vol}
	mu.Unlock()
	e.m.SyncSoon()
	if l := next("SyncSoon after a change"); !slices.Equal(l, []v1.UniqueVolumeName{vol}) {
		t.Errorf("marked %v, want %s", l, vol)
	}
	p := e.statusPatches()
	if len(p) != writes+1 || !strings.Contains(p[len(p)-1], `"volumesInUse":["kubernetes.io/csi/d^a"]`) {
		t.Fatalf("status writes %v, want one more with volumesInUse", p[writes:])
	}
	if n := e.node(); !slices.Equal(n.Status.VolumesInUse, []v1.UniqueVolumeName{vol}) {
		t.Errorf("Node volumesInUse %v", n.Status.VolumesInUse)
	}

	// No change: computed, not written, the Node's list marked again.
	e.m.SyncSoon()
	if l := next("SyncSoon without a change"); !slices.Equal(l, []v1.UniqueVolumeName{vol}) {
		t.Errorf("marked %v, want the Node's %s", l, vol)
	}
	if n := len(e.statusPatches()); n != writes+1 {
		t.Errorf("%d status writes after a computation with nothing changed, want %d", n, writes+1)
	}

	// A write that fails (every try) marks nothing.
	e.client.PrependReactor("patch", "nodes", func(clienttesting.Action) (bool, runtime.Object, error) {
		return true, nil, errors.New("API server down")
	})
	mu.Lock()
	inUse = []v1.UniqueVolumeName{vol, "kubernetes.io/csi/d^b"}
	mu.Unlock()
	e.m.SyncSoon()
	deadline := time.Now().Add(10 * time.Second)
	for e.count("patch", "status") < writes+1+StatusUpdateRetries {
		if time.Now().After(deadline) {
			t.Fatalf("%d status patches, want %d tries", e.count("patch", "status"), StatusUpdateRetries)
		}
		time.Sleep(time.Millisecond)
	}
	select {
	case l := <-marked:
		t.Errorf("a failed write marked %v", l)
	case <-time.After(200 * time.Millisecond):
	}
}
