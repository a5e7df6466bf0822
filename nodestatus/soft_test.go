package nodestatus

import (
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/nodeagent/nodeagent/internal/evictionapi"
)

// A soft threshold sets its pressure condition at the first sync that sees
// it met, whatever its grace period (kubelet's nodeConditions are taken
// from the thresholds met before the grace periods are applied); the
// observation carries the soft threshold and the minimum reclaim for the
// eviction manager; allocatable is reduced by hard thresholds only.
func TestSoftThresholdSetsPressure(t *testing.T) {
	e := newTestEnv(t, func(o *Options) {
		o.EvictionHard = map[string]string{"memory.available": "1Gi"}
		o.EvictionSoft = map[string]string{"memory.available": "6Gi", "nodefs.available": "20%"}
		o.EvictionMinimumReclaim = map[string]string{"memory.available": "512Mi", "nodefs.available": "5%"}
		o.EvictionPressureTransitionPeriod = 30 * time.Second
	})
	e.sync()
	// newTestEnv's host: 5Gi of memory available of 8Gi, nodefs 100Gi.
	if c := condition(e.node(), v1.NodeMemoryPressure); c.Status != v1.ConditionTrue {
		t.Errorf("MemoryPressure %s with memory.available 5Gi below the soft 6Gi, want True", c.Status)
	}
	obs := e.m.Signals(10 * time.Second)
	mem := obs.Signals[evictionapi.SignalMemoryAvailable]
	if mem.Threshold != 1<<30 || mem.Soft != 6<<30 || mem.SoftText != "6Gi" || mem.MinReclaim != 512<<20 {
		t.Errorf("memory.available %+v, want hard 1Gi, soft 6Gi, minimum reclaim 512Mi", mem)
	}
	if mem.Met() || !mem.SoftMet() || !mem.Unresolved(true) || mem.Unresolved(false) {
		t.Errorf("memory.available %+v: want only the soft threshold met", mem)
	}
	nodefs := obs.Signals[evictionapi.SignalNodeFsAvailable]
	if nodefs.Threshold != 0 || nodefs.Soft != 20<<30 || nodefs.SoftText != "20Gi" || nodefs.MinReclaim != 5<<30 {
		t.Errorf("nodefs.available %+v, want soft 20Gi (20%% of 100Gi) and minimum reclaim 5Gi", nodefs)
	}
	n := e.node()
	if got := n.Status.Allocatable[v1.ResourceMemory]; got.Value() != n.Status.Capacity.Memory().Value()-1<<30 {
		t.Errorf("allocatable memory %s of capacity %s, want capacity less the hard 1Gi only", got.String(), n.Status.Capacity.Memory().String())
	}
	if got := n.Status.Allocatable[v1.ResourceEphemeralStorage]; got.Value() != n.Status.Capacity.StorageEphemeral().Value() {
		t.Errorf("allocatable ephemeral-storage %s, want the whole capacity (no hard nodefs threshold)", got.String())
	}

	// Memory back above the soft threshold: the condition holds for the
	// transition period, then clears.
	e.host.setMem(8<<30, 7<<30, 0)
	e.clock.Step(31 * time.Second)
	e.sync()
	if c := condition(e.node(), v1.NodeMemoryPressure); c.Status != v1.ConditionFalse {
		t.Errorf("MemoryPressure %s after the transition period, want False", c.Status)
	}
}

func TestParseMinReclaims(t *testing.T) {
	for _, tc := range []struct {
		in      map[string]string
		wantErr bool
	}{
		{in: map[string]string{"memory.available": "0"}},
		{in: map[string]string{"nodefs.available": "5%"}},
		{in: map[string]string{"nodefs.available": "0%"}, wantErr: true},
		{in: map[string]string{"memory.available": "-1Mi"}, wantErr: true},
		{in: map[string]string{"disk.available": "1Gi"}, wantErr: true},
	} {
		_, err := parseMinReclaims(tc.in)
		if (err != nil) != tc.wantErr {
			t.Errorf("parseMinReclaims(%v) error %v, want error %v", tc.in, err, tc.wantErr)
		}
	}
}
