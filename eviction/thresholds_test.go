package eviction

import (
	"context"
	"slices"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	sig "github.com/nodeagent/nodeagent/internal/evictionapi"
)

// obsOf builds an observation of signal -> Observed.
func obsOf(m map[string]sig.Observed) sig.Observation { return sig.Observation{Signals: m} }

func memObs(available, hard, soft, minReclaim int64) sig.Observation {
	return obsOf(map[string]sig.Observed{sig.SignalMemoryAvailable: {
		Available: available, Capacity: 1 << 40, Threshold: hard, ThresholdText: "hard", Soft: soft, SoftText: "soft", MinReclaim: minReclaim,
	}})
}

// TestDecideThresholds drives kubelet's threshold bookkeeping through a
// sequence of passes on a fake clock: hard thresholds act at once, soft
// ones after being met continuously for their grace period, and a
// threshold acted on stays met until its signal is above threshold +
// minimum reclaim.
func TestDecideThresholds(t *testing.T) {
	hard := threshold{sig.SignalMemoryAvailable, false}
	soft := threshold{sig.SignalMemoryAvailable, true}
	nodefsHard := threshold{sig.SignalNodeFsAvailable, false}
	type pass struct {
		after time.Duration // since the previous pass
		obs   sig.Observation
		want  []threshold
	}
	grace := map[string]time.Duration{sig.SignalMemoryAvailable: 30 * time.Second}
	for _, tc := range []struct {
		name   string
		grace  map[string]time.Duration
		passes []pass
	}{
		{"hard: at once", grace, []pass{
			{0, memObs(90, 100, 0, 0), []threshold{hard}},
			{10 * time.Second, memObs(110, 100, 0, 0), nil},
		}},
		{"soft: after its grace period", grace, []pass{
			{0, memObs(90, 0, 100, 0), nil},
			{20 * time.Second, memObs(90, 0, 100, 0), nil},
			{9 * time.Second, memObs(90, 0, 100, 0), nil},
			{time.Second, memObs(90, 0, 100, 0), []threshold{soft}},
			{10 * time.Second, memObs(90, 0, 100, 0), []threshold{soft}},
		}},
		{"soft: the grace period restarts when the signal recovers", grace, []pass{
			{0, memObs(90, 0, 100, 0), nil},
			{20 * time.Second, memObs(110, 0, 100, 0), nil},
			{5 * time.Second, memObs(90, 0, 100, 0), nil},
			{20 * time.Second, memObs(90, 0, 100, 0), nil}, // 45s after the first crossing, 20s after the second
			{10 * time.Second, memObs(90, 0, 100, 0), []threshold{soft}},
		}},
		{"soft with grace period 0: at once (kubelet treats it as hard)", map[string]time.Duration{sig.SignalMemoryAvailable: 0}, []pass{
			{0, memObs(90, 0, 100, 0), []threshold{soft}},
		}},
		{"hard and soft met: hard first", grace, []pass{
			{0, memObs(50, 60, 100, 0), []threshold{hard}},
			{30 * time.Second, memObs(50, 60, 100, 0), []threshold{hard, soft}},
		}},
		{"memory before nodefs", grace, []pass{
			{0, obsOf(map[string]sig.Observed{
				sig.SignalNodeFsAvailable: {Available: 1, Threshold: 10},
				sig.SignalMemoryAvailable: {Available: 1, Threshold: 10},
			}), []threshold{hard, nodefsHard}},
		}},
		{"minimum reclaim: met until above threshold + minimum", grace, []pass{
			{0, memObs(90, 100, 0, 50), []threshold{hard}},
			{10 * time.Second, memObs(120, 100, 0, 50), []threshold{hard}},
			{10 * time.Second, memObs(149, 100, 0, 50), []threshold{hard}},
			{10 * time.Second, memObs(150, 100, 0, 50), nil},
			{10 * time.Second, memObs(120, 100, 0, 50), nil}, // not acted on: the threshold alone counts
		}},
		{"minimum reclaim: a soft threshold keeps its first crossing", grace, []pass{
			{0, memObs(90, 0, 100, 50), nil},
			{30 * time.Second, memObs(90, 0, 100, 50), []threshold{soft}},
			{10 * time.Second, memObs(120, 0, 100, 50), []threshold{soft}},
			{10 * time.Second, memObs(160, 0, 100, 50), nil},
		}},
		{"minimum reclaim does not extend a soft threshold before its grace", grace, []pass{
			{0, memObs(90, 0, 100, 50), nil},
			{20 * time.Second, memObs(120, 0, 100, 50), nil},
			{10 * time.Second, memObs(90, 0, 100, 50), nil}, // restarted
		}},
		{"no observation: nothing", grace, []pass{
			{0, obsOf(nil), nil},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			now := time.Unix(1e9, 0)
			var st thresholdState
			for i, p := range tc.passes {
				now = now.Add(p.after)
				var got []threshold
				got, st = decideThresholds(now, p.obs, tc.grace, st)
				if !slices.Equal(got, p.want) {
					t.Errorf("pass %d (+%v): acted on %v, want %v", i, p.after, got, p.want)
				}
			}
		})
	}
}

func TestPodGracePeriod(t *testing.T) {
	secs := func(v int64) *int64 { return &v }
	hard := threshold{sig.SignalMemoryAvailable, false}
	soft := threshold{sig.SignalMemoryAvailable, true}
	grace := map[string]time.Duration{sig.SignalMemoryAvailable: time.Minute}
	for _, tc := range []struct {
		name  string
		t     threshold
		grace map[string]time.Duration
		max   int64
		tgps  *int64
		want  time.Duration
	}{
		{"hard: kubelet's immediate 1s", hard, grace, 60, secs(30), time.Second},
		{"soft: evictionMaxPodGracePeriod below the pod's", soft, grace, 5, secs(30), 5 * time.Second},
		{"soft: the pod's below evictionMaxPodGracePeriod", soft, grace, 60, secs(2), 2 * time.Second},
		{"soft: no terminationGracePeriodSeconds", soft, grace, 10, nil, 10 * time.Second},
		{"soft: evictionMaxPodGracePeriod 0 (default) gives 1s", soft, grace, 0, secs(30), time.Second},
		{"soft: negative evictionMaxPodGracePeriod gives 1s, as kubelet's code", soft, grace, -1, secs(30), time.Second},
		{"soft: terminationGracePeriodSeconds 0 gives 1s", soft, grace, 60, secs(0), time.Second},
		{"soft with grace period 0: treated as hard", soft, map[string]time.Duration{sig.SignalMemoryAvailable: 0}, 60, secs(30), time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := pod("p", 0, nil, nil)
			p.Spec.TerminationGracePeriodSeconds = tc.tgps
			if got := podGracePeriod(tc.t, tc.grace, tc.max, p); got != tc.want {
				t.Errorf("podGracePeriod = %v, want %v", got, tc.want)
			}
		})
	}
}

// The manager on a fake clock: a soft threshold met is not acted on (no
// event, no eviction) until its grace period has passed; the pod then
// goes with min(evictionMaxPodGracePeriod, its terminationGracePeriodSeconds)
// and a message naming the soft threshold; with a minimum reclaim a
// second pod goes while the signal is above the threshold but not above
// threshold + minimum.
func TestSynchronizeSoftAndMinimumReclaim(t *testing.T) {
	ctx := context.Background()
	a, b := pod("a", 0, nil, nil), pod("b", 0, nil, nil)
	thirty := int64(30)
	a.Spec.TerminationGracePeriodSeconds, b.Spec.TerminationGracePeriodSeconds = &thirty, &thirty
	usage := map[string]PodUsage{"a": {Memory: 900 * mi}, "b": {Memory: 800 * mi}}
	soft := func(available int64) sig.Observation {
		return obsOf(map[string]sig.Observed{sig.SignalMemoryAvailable: {
			Available: available, Capacity: 1 << 40, Soft: 100 * mi, SoftText: "100Mi", MinReclaim: 50 * mi,
		}})
	}
	f := newFixture(t, []*v1.Pod{a, b}, usage, soft(60*mi), soft(60*mi), soft(120*mi), soft(160*mi))
	f.m.o.SoftGracePeriods = map[string]time.Duration{sig.SignalMemoryAvailable: 30 * time.Second}
	f.m.o.MaxPodGracePeriodSeconds = 5

	if p, _ := f.m.Synchronize(ctx); p != nil || len(f.rec.events) != 0 {
		t.Fatalf("evicted %v, events %v at the first crossing of a soft threshold with a 30s grace period", p, f.rec.events)
	}
	f.clk.Step(30 * time.Second)
	p, _ := f.m.Synchronize(ctx)
	if p == nil || p.Name != "a" {
		t.Fatalf("evicted %v after the grace period, want a", p)
	}
	if f.grace[0] != 5*time.Second {
		t.Errorf("grace %v, want min(evictionMaxPodGracePeriod 5s, terminationGracePeriodSeconds 30s)", f.grace[0])
	}
	if want := "The node was low on resource: memory. Threshold quantity: 100Mi, available: 60Mi. "; f.msgs[0][:len(want)] != want {
		t.Errorf("message %q, want it to start with %q", f.msgs[0], want)
	}
	f.pods = []*v1.Pod{b}
	// 120Mi: above the threshold, below threshold + minimum reclaim.
	if p, _ := f.m.Synchronize(ctx); p == nil || p.Name != "b" {
		t.Fatalf("evicted %v at 120Mi (threshold 100Mi, minimum reclaim 50Mi), want b", p)
	}
	f.pods = []*v1.Pod{pod("c", 0, nil, nil)}
	if p, _ := f.m.Synchronize(ctx); p != nil {
		t.Errorf("evicted %v at 160Mi, above threshold + minimum reclaim", p)
	}
}

// After node-level reclaim for a disk signal, pods are evicted unless
// the signal is above its threshold plus its minimum reclaim.
func TestReclaimMustMeetMinimumReclaim(t *testing.T) {
	ctx := context.Background()
	nodefs := func(available int64) sig.Observation {
		return obsOf(map[string]sig.Observed{sig.SignalNodeFsAvailable: {
			Available: available, Capacity: 1 << 40, Threshold: 40 * mi, ThresholdText: "40Mi", MinReclaim: 20 * mi,
		}})
	}
	for _, tc := range []struct {
		after     int64
		wantEvict bool
	}{{50 * mi, true}, {61 * mi, false}} {
		f := newFixture(t, []*v1.Pod{pod("a", 0, nil, nil)}, map[string]PodUsage{"a": {Disk: mi}}, nodefs(30*mi), nodefs(tc.after))
		p, _ := f.m.Synchronize(ctx)
		if f.reclaims != 1 || (p != nil) != tc.wantEvict {
			t.Errorf("available %dMi after reclaim (threshold 40Mi, minimum reclaim 20Mi): evicted %v after %d reclaims, want eviction %v",
				tc.after/mi, p, f.reclaims, tc.wantEvict)
		}
	}
}
