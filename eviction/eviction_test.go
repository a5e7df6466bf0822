package eviction

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	testingclock "k8s.io/utils/clock/testing"

	sig "github.com/nodeagent/nodeagent/internal/evictionapi"
	"github.com/nodeagent/nodeagent/kubetypes"
)

const mi = 1 << 20

// pod makes a pod with one container "c"; req and lim are memory/
// ephemeral-storage requests and limits ("" for none).
func pod(name string, prio int32, requests, limits v1.ResourceList) *v1.Pod {
	p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID(name)}}
	p.Spec.Priority = &prio
	p.Spec.Containers = []v1.Container{{Name: "c", Resources: v1.ResourceRequirements{Requests: requests, Limits: limits}}}
	return p
}

func mem(q string) v1.ResourceList { return v1.ResourceList{v1.ResourceMemory: resource.MustParse(q)} }
func disk(q string) v1.ResourceList {
	return v1.ResourceList{v1.ResourceEphemeralStorage: resource.MustParse(q)}
}

func names(ps []*v1.Pod) []string {
	var out []string
	for _, p := range ps {
		out = append(out, p.Name)
	}
	return out
}

// podLevel gives p pod-level requests.
func podLevel(p *v1.Pod, requests v1.ResourceList) *v1.Pod {
	p.Spec.Resources = &v1.ResourceRequirements{Requests: requests}
	return p
}

func usageMap(m map[string]PodUsage) UsageFunc {
	return func(p *v1.Pod) (PodUsage, bool) { u, ok := m[p.Name]; return u, ok }
}

func TestRank(t *testing.T) {
	for _, tc := range []struct {
		desc   string
		signal string
		pods   []*v1.Pod
		usage  map[string]PodUsage
		want   []string
	}{
		{
			desc:   "memory: over requests first, whatever the priority",
			signal: sig.SignalMemoryAvailable,
			pods:   []*v1.Pod{pod("under-low", 0, mem("100Mi"), nil), pod("over-high", 1000, mem("10Mi"), nil)},
			usage:  map[string]PodUsage{"under-low": {Memory: 50 * mi}, "over-high": {Memory: 20 * mi}},
			want:   []string{"over-high", "under-low"},
		},
		{
			desc:   "memory: a pod-level request replaces the containers'",
			signal: sig.SignalMemoryAvailable,
			pods:   []*v1.Pod{podLevel(pod("pod-level", 0, mem("10Mi"), nil), mem("100Mi")), pod("container", 0, mem("10Mi"), nil)},
			usage:  map[string]PodUsage{"pod-level": {Memory: 50 * mi}, "container": {Memory: 20 * mi}},
			want:   []string{"container", "pod-level"},
		},
		{
			desc:   "disk: with pod-level resources the containers' ephemeral-storage requests do not count",
			signal: sig.SignalNodeFsAvailable,
			pods:   []*v1.Pod{podLevel(pod("pod-level", 0, disk("1Gi"), nil), mem("1Mi")), pod("container", 0, disk("1Gi"), nil)},
			usage:  map[string]PodUsage{"pod-level": {Disk: 10 * mi}, "container": {Disk: 20 * mi}},
			want:   []string{"pod-level", "container"},
		},
		{
			desc:   "memory: then lower priority first",
			signal: sig.SignalMemoryAvailable,
			pods:   []*v1.Pod{pod("high", 10, nil, nil), pod("low", 1, nil, nil)},
			usage:  map[string]PodUsage{"high": {Memory: 500 * mi}, "low": {Memory: 5 * mi}},
			want:   []string{"low", "high"},
		},
		{
			desc:   "memory: then more usage above the request first",
			signal: sig.SignalMemoryAvailable,
			pods:   []*v1.Pod{pod("a", 0, mem("100Mi"), nil), pod("b", 0, nil, nil), pod("c", 0, mem("10Mi"), nil)},
			usage:  map[string]PodUsage{"a": {Memory: 150 * mi}, "b": {Memory: 40 * mi}, "c": {Memory: 80 * mi}},
			want:   []string{"c", "a", "b"},
		},
		{
			desc:   "memory: BestEffort before a Guaranteed pod within its limit",
			signal: sig.SignalMemoryAvailable,
			pods:   []*v1.Pod{pod("guaranteed", 0, mem("64Mi"), mem("64Mi")), pod("besteffort", 0, nil, nil)},
			usage:  map[string]PodUsage{"guaranteed": {Memory: 60 * mi}, "besteffort": {Memory: 1 * mi}},
			want:   []string{"besteffort", "guaranteed"},
		},
		{
			desc:   "pods without figures first",
			signal: sig.SignalMemoryAvailable,
			pods:   []*v1.Pod{pod("measured", 0, nil, nil), pod("unknown", 100, nil, nil)},
			usage:  map[string]PodUsage{"measured": {Memory: 500 * mi}},
			want:   []string{"unknown", "measured"},
		},
		{
			desc:   "disk: over the ephemeral-storage request, then usage",
			signal: sig.SignalNodeFsAvailable,
			pods:   []*v1.Pod{pod("quiet", 0, nil, nil), pod("within", 0, disk("1Gi"), nil), pod("filler", 0, nil, nil)},
			usage:  map[string]PodUsage{"quiet": {Disk: 4096}, "within": {Disk: 500 * mi}, "filler": {Disk: 100 * mi}},
			want:   []string{"filler", "quiet", "within"},
		},
		{
			desc:   "inodes: by inode count",
			signal: sig.SignalNodeFsInodesFree,
			pods:   []*v1.Pod{pod("few", 0, nil, nil), pod("many", 0, nil, nil)},
			usage:  map[string]PodUsage{"few": {Inodes: 3}, "many": {Inodes: 3000}},
			want:   []string{"many", "few"},
		},
		{
			desc:   "pids: priority, then more processes",
			signal: sig.SignalPIDAvailable,
			pods:   []*v1.Pod{pod("forky-high", 5, nil, nil), pod("calm", 0, nil, nil), pod("forky", 0, nil, nil)},
			usage:  map[string]PodUsage{"forky-high": {Processes: 900}, "calm": {Processes: 2}, "forky": {Processes: 500}},
			want:   []string{"forky", "calm", "forky-high"},
		},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			ps := slices.Clone(tc.pods)
			Rank(tc.signal, ps, usageMap(tc.usage))
			if got := names(ps); !slices.Equal(got, tc.want) {
				t.Errorf("ranked %v, want %v", got, tc.want)
			}
		})
	}
}

func TestMessage(t *testing.T) {
	p := pod("p", 0, mem("10Mi"), nil)
	p.Spec.Containers = append(p.Spec.Containers, v1.Container{Name: "small"})
	o := sig.Observed{Available: 90 * mi, Capacity: 1 << 30, Threshold: 100 * mi, ThresholdText: "100Mi"}
	msg, ann := Message(sig.SignalMemoryAvailable, o, p, PodUsage{Containers: []ContainerUsage{{Name: "c", Memory: 200 * mi}, {Name: "small", Memory: 0}}}, true)
	want := "The node was low on resource: memory. Threshold quantity: 100Mi, available: 90Mi. Container c was using 200Mi, request is 10Mi, has larger consumption of memory. "
	if msg != want {
		t.Errorf("message\n%q, want\n%q", msg, want)
	}
	if ann[AnnotationOffending] != "c" || ann[AnnotationOffendingUsage] != "200Mi" || ann[AnnotationStarvedResource] != "memory" {
		t.Errorf("annotations %v", ann)
	}
	msg, _ = Message(sig.SignalNodeFsAvailable, sig.Observed{Available: 30 * mi, ThresholdText: "40Mi"}, pod("q", 0, nil, nil),
		PodUsage{Containers: []ContainerUsage{{Name: "c", Disk: 4096}}}, true)
	if want := "The node was low on resource: ephemeral-storage. Threshold quantity: 40Mi, available: 30Mi. Container c was using 4Ki, request is 0, has larger consumption of ephemeral-storage. "; msg != want {
		t.Errorf("message\n%q, want\n%q", msg, want)
	}
	msg, _ = Message(sig.SignalPIDAvailable, sig.Observed{Available: 1200, ThresholdText: "1500"}, pod("q", 0, nil, nil), PodUsage{}, false)
	if want := "The node was low on resource: pids. Threshold quantity: 1500, available: 1200. "; msg != want {
		t.Errorf("message\n%q, want\n%q", msg, want)
	}
}

// A pod with a pod-level memory request is named first, with its usage
// and that request, as kubelet's message with PodLevelResources.
func TestMessagePodLevel(t *testing.T) {
	p := pod("p", 0, nil, nil)
	p.Spec.Resources = &v1.ResourceRequirements{Requests: v1.ResourceList{v1.ResourceMemory: resource.MustParse("64Mi")}}
	o := sig.Observed{Available: 90 * mi, Capacity: 1 << 30, Threshold: 100 * mi, ThresholdText: "100Mi"}
	msg, ann := Message(sig.SignalMemoryAvailable, o, p, PodUsage{Memory: 300 * mi, Containers: []ContainerUsage{{Name: "c", Memory: 200 * mi}}}, true)
	want := "The node was low on resource: memory. Threshold quantity: 100Mi, available: 90Mi. " +
		"Pod p was using 300Mi, request is 64Mi, has larger consumption of memory. " +
		"Container c was using 200Mi, request is 0, has larger consumption of memory. "
	if msg != want {
		t.Errorf("message\n%q, want\n%q", msg, want)
	}
	if ann[AnnotationOffendingPod] != "p" || ann[AnnotationOffendingPodUsage] != "300Mi" || ann[AnnotationOffending] != "c" {
		t.Errorf("annotations %v", ann)
	}
	// Not for disk: pod-level resources have no ephemeral storage.
	msg, ann = Message(sig.SignalNodeFsAvailable, sig.Observed{Available: 30 * mi, ThresholdText: "40Mi"}, p, PodUsage{Memory: 300 * mi}, true)
	if _, ok := ann[AnnotationOffendingPod]; ok || strings.Contains(msg, "Pod p") {
		t.Errorf("disk message names the pod: %q %v", msg, ann)
	}
}

func TestAdmit(t *testing.T) {
	be := pod("be", 0, nil, nil)
	burst := pod("burst", 0, mem("10Mi"), nil)
	tolerating := pod("tol", 0, nil, nil)
	tolerating.Spec.Tolerations = []v1.Toleration{{Key: v1.TaintNodeMemoryPressure, Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoSchedule}}
	static := pod("static", 0, nil, nil)
	static.Annotations = map[string]string{kubetypes.AnnotationConfigSource: kubetypes.SourceFile}
	critical := pod("crit", 2000001000, nil, nil)
	memP := map[v1.NodeConditionType]bool{v1.NodeMemoryPressure: true}
	diskP := map[v1.NodeConditionType]bool{v1.NodeDiskPressure: true}
	both := map[v1.NodeConditionType]bool{v1.NodeMemoryPressure: true, v1.NodeDiskPressure: true}
	for _, tc := range []struct {
		desc     string
		pod      *v1.Pod
		pressure map[v1.NodeConditionType]bool
		wantMsg  string // "" admits
	}{
		{"no pressure", be, nil, ""},
		{"memory pressure refuses BestEffort", be, memP, "The node had condition: [MemoryPressure]. "},
		{"memory pressure admits Burstable", burst, memP, ""},
		{"memory pressure admits a tolerating BestEffort", tolerating, memP, ""},
		{"disk pressure refuses every pod", burst, diskP, "The node had condition: [DiskPressure]. "},
		{"two conditions refuse a tolerating BestEffort", tolerating, both, "The node had condition: [MemoryPressure DiskPressure]. "},
		{"static pods are critical", static, both, ""},
		{"system-critical priority", critical, diskP, ""},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			ok, reason, msg := Admit(tc.pod, tc.pressure)
			if ok != (tc.wantMsg == "") || msg != tc.wantMsg || (!ok && reason != "Evicted") {
				t.Errorf("Admit = %v %q %q, want message %q", ok, reason, msg, tc.wantMsg)
			}
		})
	}
}

type event struct{ obj, typ, reason, msg string }

type recorder struct{ events []event }

func (r *recorder) Eventf(o k8sruntime.Object, typ, reason, f string, args ...any) {
	r.AnnotatedEventf(o, nil, typ, reason, f, args...)
}

func (r *recorder) AnnotatedEventf(o k8sruntime.Object, _ map[string]string, typ, reason, f string, args ...any) {
	name := "node"
	if p, ok := o.(*v1.Pod); ok {
		name = p.Name
	}
	r.events = append(r.events, event{name, typ, reason, fmt.Sprintf(f, args...)})
}

type fixture struct {
	clk      *testingclock.FakeClock
	obs      []sig.Observation // successive measurements; the last repeats
	maxAges  []time.Duration
	passes   atomic.Int32 // Observe calls (read by Run tests while Run runs)
	pods     []*v1.Pod
	usage    map[string]PodUsage
	reclaims int
	evicted  []string
	grace    []time.Duration
	msgs     []string
	rec      recorder
	m        *Manager
}

func newFixture(t *testing.T, pods []*v1.Pod, usage map[string]PodUsage, obs ...sig.Observation) *fixture {
	f := &fixture{clk: testingclock.NewFakeClock(time.Unix(1e9, 0)), obs: obs, pods: pods, usage: usage}
	m, err := New(Options{
		Observe: func(maxAge time.Duration) sig.Observation {
			f.maxAges = append(f.maxAges, maxAge)
			f.passes.Add(1)
			o := f.obs[0]
			if len(f.obs) > 1 {
				f.obs = f.obs[1:]
			}
			return o
		},
		ActivePods: func() []*v1.Pod { return slices.Clone(f.pods) },
		Usage: func(context.Context, []*v1.Pod) map[string]PodUsage {
			out := map[string]PodUsage{}
			for k, v := range f.usage {
				out[k] = v
			}
			return out
		},
		Reclaim: []func(context.Context) error{func(context.Context) error { f.reclaims++; return nil }},
		Evict: func(_ context.Context, p *v1.Pod, grace time.Duration, msg string) error {
			f.evicted = append(f.evicted, p.Name)
			f.grace = append(f.grace, grace)
			f.msgs = append(f.msgs, msg)
			f.clk.Step(2 * time.Second)
			return nil
		},
		Recorder: &f.rec,
		Node:     &v1.Node{},
		Clock:    f.clk,
	})
	if err != nil {
		t.Fatal(err)
	}
	f.m = m
	return f
}

func observation(signal string, available, threshold int64) sig.Observation {
	return sig.Observation{Signals: map[string]sig.Observed{
		signal: {Available: available, Capacity: 1 << 40, Threshold: threshold, ThresholdText: resource.NewQuantity(threshold, resource.BinarySI).String()},
	}}
}

func TestSynchronize(t *testing.T) {
	ctx := context.Background()
	be := pod("besteffort", 0, nil, nil)
	g := pod("guaranteed", 0, mem("64Mi"), mem("64Mi"))
	static := pod("static", 0, nil, nil)
	static.Annotations = map[string]string{kubetypes.AnnotationConfigSource: kubetypes.SourceFile}
	usage := map[string]PodUsage{
		"besteffort": {Memory: 900 * mi, Disk: 90 * mi, Containers: []ContainerUsage{{Name: "c", Memory: 900 * mi}}},
		"guaranteed": {Memory: 10 * mi, Disk: 0},
		"static":     {Memory: 2000 * mi, Disk: 500 * mi},
	}

	t.Run("below no threshold: nothing", func(t *testing.T) {
		f := newFixture(t, []*v1.Pod{be, g}, usage, observation(sig.SignalMemoryAvailable, 200*mi, 100*mi))
		if p, err := f.m.Synchronize(ctx); p != nil || err != nil || len(f.rec.events) != 0 {
			t.Errorf("Synchronize = %v, %v; events %v", p, err, f.rec.events)
		}
		if f.maxAges[0] != MonitoringInterval {
			t.Errorf("observation max age %v, want the interval (the status sync's is shared)", f.maxAges[0])
		}
	})

	t.Run("memory: evicts the BestEffort pod, never the static one", func(t *testing.T) {
		f := newFixture(t, []*v1.Pod{static, g, be}, usage, observation(sig.SignalMemoryAvailable, 50*mi, 100*mi))
		p, err := f.m.Synchronize(ctx)
		if err != nil || p == nil || p.Name != "besteffort" {
			t.Fatalf("Synchronize = %v, %v; want besteffort evicted", p, err)
		}
		if f.reclaims != 0 {
			t.Errorf("node-level reclaim for memory")
		}
		if f.grace[0] != time.Second {
			t.Errorf("grace %v, want kubelet's 1s for hard thresholds", f.grace[0])
		}
		want := "The node was low on resource: memory. Threshold quantity: 100Mi, available: 50Mi. Container c was using 900Mi, request is 0, has larger consumption of memory. "
		// The pod's status message and its DisruptionTarget's (pods.Evict).
		if got := f.msgs[0]; got != want {
			t.Errorf("eviction message %q, want %q", got, want)
		}
		wantEvents := []event{
			{"node", v1.EventTypeWarning, "EvictionThresholdMet", "Attempting to reclaim memory"},
			{"besteffort", v1.EventTypeWarning, "Evicted", want},
		}
		if !slices.Equal(f.rec.events, wantEvents) {
			t.Errorf("events %v, want %v", f.rec.events, wantEvents)
		}
		// Right after an eviction the next pass measures afresh.
		f.m.Synchronize(ctx)
		if got := f.maxAges[len(f.maxAges)-1]; got != 0 {
			t.Errorf("observation max age %v after an eviction, want 0 (fresh)", got)
		}
	})

	t.Run("only critical pods: none evicted", func(t *testing.T) {
		f := newFixture(t, []*v1.Pod{static}, usage, observation(sig.SignalMemoryAvailable, 50*mi, 100*mi))
		if p, _ := f.m.Synchronize(ctx); p != nil || len(f.evicted) != 0 {
			t.Errorf("evicted %v", f.evicted)
		}
	})

	t.Run("disk: reclaim relieves the pressure, no eviction", func(t *testing.T) {
		f := newFixture(t, []*v1.Pod{be, g}, usage,
			observation(sig.SignalNodeFsAvailable, 30*mi, 40*mi),
			observation(sig.SignalNodeFsAvailable, 60*mi, 40*mi))
		if p, _ := f.m.Synchronize(ctx); p != nil || f.reclaims != 1 {
			t.Errorf("evicted %v after %d reclaims, want none after 1", p, f.reclaims)
		}
		if f.maxAges[1] != 0 {
			t.Errorf("re-check after reclaim with max age %v, want a fresh measurement", f.maxAges[1])
		}
	})

	t.Run("disk: reclaim is not enough, the largest user goes", func(t *testing.T) {
		f := newFixture(t, []*v1.Pod{g, be}, usage,
			observation(sig.SignalNodeFsAvailable, 30*mi, 40*mi),
			observation(sig.SignalNodeFsAvailable, 31*mi, 40*mi))
		p, _ := f.m.Synchronize(ctx)
		if p == nil || p.Name != "besteffort" || f.reclaims != 1 {
			t.Fatalf("evicted %v after %d reclaims, want besteffort after 1", p, f.reclaims)
		}
		if !slices.Contains(f.rec.events, event{"node", v1.EventTypeWarning, "EvictionThresholdMet", "Attempting to reclaim ephemeral-storage"}) {
			t.Errorf("events %v", f.rec.events)
		}
	})

	t.Run("memory before disk", func(t *testing.T) {
		o := observation(sig.SignalNodeFsAvailable, 30*mi, 40*mi)
		o.Signals[sig.SignalMemoryAvailable] = sig.Observed{Available: 1, Threshold: 100 * mi, ThresholdText: "100Mi"}
		f := newFixture(t, []*v1.Pod{be}, usage, o)
		f.m.Synchronize(ctx)
		if f.reclaims != 0 || len(f.rec.events) == 0 || f.rec.events[0].msg != "Attempting to reclaim memory" {
			t.Errorf("reclaims %d, events %v: want memory handled first", f.reclaims, f.rec.events)
		}
	})
}

// Run waits an interval between passes on the injected clock; with an
// Updated channel (the status sync measuring for both) a quarter interval
// more, so its timer does not race the sync.
func TestRunWaitsTheInterval(t *testing.T) {
	for _, tc := range []struct {
		name    string
		updated chan struct{}
		wait    time.Duration
	}{
		{"alone", nil, MonitoringInterval},
		{"fed by the status sync", make(chan struct{}), MonitoringInterval * 5 / 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, nil, nil, observation(sig.SignalMemoryAvailable, 200*mi, 100*mi))
			if tc.updated != nil {
				f.m.o.Updated = tc.updated
			}
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan struct{})
			go func() { defer close(done); f.m.Run(ctx) }()
			defer func() { cancel(); <-done }()
			waitFor := func(cond func() bool) bool {
				for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
					if cond() {
						return true
					}
				}
				return false
			}
			if !waitFor(func() bool { return f.passes.Load() == 1 && f.clk.HasWaiters() }) {
				t.Fatalf("no first pass")
			}
			f.clk.Step(tc.wait - time.Millisecond)
			time.Sleep(20 * time.Millisecond)
			if n := f.passes.Load(); n != 1 {
				t.Fatalf("%d passes before %v passed, want 1", n, tc.wait)
			}
			f.clk.Step(time.Millisecond)
			if !waitFor(func() bool { return f.passes.Load() == 2 }) {
				t.Errorf("%d passes after %v, want 2", f.passes.Load(), tc.wait)
			}
		})
	}
}

// A published observation wakes Run between intervals.
func TestRunWakesOnUpdate(t *testing.T) {
	f := newFixture(t, nil, nil, observation(sig.SignalMemoryAvailable, 200*mi, 100*mi))
	updated := make(chan struct{}, 1)
	f.m.o.Updated = updated
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); f.m.Run(ctx) }()
	for !f.clk.HasWaiters() {
		time.Sleep(time.Millisecond)
	}
	updated <- struct{}{}
	deadline := time.Now().Add(5 * time.Second)
	for f.passes.Load() < 2 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	cancel()
	<-done
	if n := f.passes.Load(); n != 2 {
		t.Errorf("%d passes, want 2 (start, update)", n)
	}
}
