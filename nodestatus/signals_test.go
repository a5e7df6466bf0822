package nodestatus

import (
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/nodeagent/nodeagent/internal/evictionapi"
)

// Signals shares the sync's measurement while it is fresh, measures anew
// otherwise, and a crossing it sees between syncs sets the condition at
// the next sync.
func TestSignalsSharedWithTheSync(t *testing.T) {
	e := newTestEnv(t, func(o *Options) {
		o.EvictionHard = map[string]string{"memory.available": "2Gi", "nodefs.available": "10%"}
		o.EvictionPressureTransitionPeriod = 30 * time.Second
	})
	e.sync()
	select {
	case <-e.m.SignalsUpdated():
	default:
		t.Fatal("a sync published no signals")
	}
	first := e.m.Signals(10 * time.Second)
	mem := first.Signals[evictionapi.SignalMemoryAvailable]
	if mem.Available != 5<<30 || mem.Threshold != 2<<30 || mem.ThresholdText != "2Gi" || mem.Met() {
		t.Errorf("memory.available %+v, want 5Gi available against 2Gi", mem)
	}
	nodefs := first.Signals[evictionapi.SignalNodeFsAvailable]
	if nodefs.Threshold != 10<<30 || nodefs.ThresholdText != "10Gi" {
		t.Errorf("nodefs.available %+v, want a 10Gi threshold (10%% of 100Gi)", nodefs)
	}

	// The host changes: a fresh-enough observation is the sync's...
	e.host.setMem(8<<30, 1<<30, 0)
	e.clock.Step(5 * time.Second)
	if got := e.m.Signals(10 * time.Second); !got.Time.Equal(first.Time) {
		t.Errorf("observation of %v, want the sync's of %v", got.Time, first.Time)
	}
	// ...an older one is measured again, without moving the condition.
	now := e.m.Signals(time.Second)
	if o := now.Signals[evictionapi.SignalMemoryAvailable]; !o.Met() || !now.Time.Equal(e.clock.Now()) {
		t.Errorf("fresh observation %+v at %v, want memory.available met now", o, now.Time)
	}
	if now.Pressure[v1.NodeMemoryPressure] {
		t.Errorf("MemoryPressure moved outside a sync")
	}
	// The memory comes back before the next sync: the crossing counts.
	e.host.setMem(8<<30, 5<<30, 0)
	e.clock.Step(5 * time.Second)
	e.sync()
	if c := condition(e.node(), v1.NodeMemoryPressure); c.Status != v1.ConditionTrue {
		t.Errorf("MemoryPressure %s after a crossing seen between syncs, want True", c.Status)
	}
	if !e.m.Signals(time.Second).Pressure[v1.NodeMemoryPressure] {
		t.Errorf("published pressure misses MemoryPressure")
	}
}
