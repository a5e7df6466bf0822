package csi

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	clocktesting "k8s.io/utils/clock/testing"
)

// A CSI volume's stats come from the driver's NodeGetVolumeStats, named
// after the pod's volume with the claim as pvcRef, measured once per
// volumeStatsAggPeriod; the collector gives kubelet's
// kubelet_volume_stats_* for the claim; a driver without
// GET_VOLUME_STATS has none; the teardown forgets the pod.
func TestPodVolumeStats(t *testing.T) {
	ctx := context.Background()
	pvc, pv := boundClaim("claim", "pv-1", "pvc-uid")
	rig := newRealRig(t, pvc, pv, csiDriverObj(false))
	m := rig.start(t)
	clk := clocktesting.NewFakeClock(time.Unix(5000, 0))
	m.Clock = clk
	pod := claimPod("uid-a", "claim", false)
	if _, err := m.SetUp(ctx, pod, rig.podDir("uid-a"), &pod.Spec.Volumes[0]); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(rig.target("uid-a"), "f"), []byte(strings.Repeat("x", 5000)), 0o644); err != nil {
		t.Fatal(err)
	}
	got := m.PodVolumeStats(ctx, "uid-a")
	if len(got) != 1 {
		t.Fatalf("stats %+v, want the claim's volume", got)
	}
	vs := got[0]
	if vs.Name != "data" || vs.PVCRef == nil || vs.PVCRef.Name != "claim" || vs.PVCRef.Namespace != "ns" ||
		*vs.UsedBytes != 5000 || *vs.InodesUsed != 2 || *vs.CapacityBytes == 0 || *vs.AvailableBytes == 0 || *vs.Inodes == 0 || !vs.Time.Time.Equal(clk.Now()) {
		t.Errorf("stats %+v %+v", vs, vs.FsStats)
	}

	// Within the period the same figures; after it, measured again.
	if err := os.WriteFile(filepath.Join(rig.target("uid-a"), "g"), []byte("yy"), 0o644); err != nil {
		t.Fatal(err)
	}
	if again := m.PodVolumeStats(ctx, "uid-a"); *again[0].UsedBytes != 5000 {
		t.Errorf("re-measured within the period: %d", *again[0].UsedBytes)
	}
	clk.Step(volumeStatsAggPeriod)
	if again := m.PodVolumeStats(ctx, "uid-a"); *again[0].UsedBytes != 5002 || *again[0].InodesUsed != 3 {
		t.Errorf("after the period: %d bytes, %d inodes", *again[0].UsedBytes, *again[0].InodesUsed)
	}

	// kubelet's gauges, one series per claim.
	reg := prometheus.NewRegistry()
	reg.MustRegister(VolumeStatsCollector{M: m})
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]float64{}
	for _, mf := range mfs {
		for _, mt := range mf.Metric {
			labels := map[string]string{}
			for _, l := range mt.Label {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["namespace"] != "ns" || labels["persistentvolumeclaim"] != "claim" || len(labels) != 2 {
				t.Errorf("%s labels %v", mf.GetName(), labels)
			}
			seen[mf.GetName()] = mt.GetGauge().GetValue()
		}
	}
	for _, n := range []string{"capacity_bytes", "available_bytes", "used_bytes", "inodes", "inodes_free", "inodes_used"} {
		if _, ok := seen["kubelet_volume_stats_"+n]; !ok {
			t.Errorf("no kubelet_volume_stats_%s in %v", n, seen)
		}
	}
	if seen["kubelet_volume_stats_used_bytes"] != 5002 {
		t.Errorf("kubelet_volume_stats_used_bytes %v", seen["kubelet_volume_stats_used_bytes"])
	}

	if err := m.TearDown(ctx, rig.podDir("uid-a")); err != nil {
		t.Fatal(err)
	}
	if got := m.PodVolumeStats(ctx, "uid-a"); len(got) != 0 {
		t.Errorf("stats %+v after the teardown", got)
	}
	if n, _ := testutilCount(reg); n != 0 {
		t.Errorf("%d series after the teardown", n)
	}
}

func testutilCount(reg *prometheus.Registry) (int, error) {
	mfs, err := reg.Gather()
	n := 0
	for _, mf := range mfs {
		n += len(mf.Metric)
	}
	return n, err
}

// Without GET_VOLUME_STATS (the fake driver stages only) a CSI volume has
// no stats, as kubelet skips a volume whose metrics are not supported.
func TestPodVolumeStatsNotSupported(t *testing.T) {
	ctx := context.Background()
	pvc, pv := boundClaim("claim", "pv-1", "pvc-uid")
	rig := newMounterRig(t, pvc, pv, csiDriverObj(false))
	pod := claimPod("uid-1", "claim", false)
	if _, err := rig.m.SetUp(ctx, pod, rig.podDir("uid-1"), &pod.Spec.Volumes[0]); err != nil {
		t.Fatal(err)
	}
	if got := rig.m.PodVolumeStats(ctx, "uid-1"); len(got) != 0 {
		t.Errorf("stats %+v from a driver without GET_VOLUME_STATS", got)
	}
}
