package csi

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	csipb "github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sys/unix"
	"k8s.io/client-go/tools/record"
	clocktesting "k8s.io/utils/clock/testing"
)

// A CSI volume's stats come from the driver's NodeGetVolumeStats, named
// after the pod's volume with the claim as pvcRef, measured once per
// StatsPeriod (volumeStatsAggPeriod, 10s here); the collector gives kubelet's
// kubelet_volume_stats_* for the claim; a driver without
// GET_VOLUME_STATS has none; the teardown forgets the pod.
func TestPodVolumeStats(t *testing.T) {
	ctx := context.Background()
	pvc, pv := boundClaim("claim", "pv-1", "pvc-uid")
	rig := newRealRig(t, pvc, pv, csiDriverObj(false))
	m := rig.start(t)
	clk := clocktesting.NewFakeClock(time.Unix(5000, 0))
	m.Clock = clk
	m.StatsPeriod = 10 * time.Second
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
	clk.Step(10 * time.Second)
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
	if _, ok := seen["kubelet_volume_stats_health_status_abnormal"]; ok {
		t.Error("kubelet_volume_stats_health_status_abnormal without the CSIVolumeHealth gate")
	}
	if vs.VolumeHealthStats != nil {
		t.Errorf("volumeHealthStats %+v without the CSIVolumeHealth gate", vs.VolumeHealthStats)
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

// gauges returns the collector's series of name by claim.
func gauges(t *testing.T, m *Mounter, name string) map[string]float64 {
	t.Helper()
	reg := prometheus.NewRegistry()
	reg.MustRegister(VolumeStatsCollector{M: m})
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, mt := range mf.Metric {
			labels := map[string]string{}
			for _, l := range mt.Label {
				labels[l.GetName()] = l.GetValue()
			}
			out[labels["namespace"]+"/"+labels["persistentvolumeclaim"]] = mt.GetGauge().GetValue()
		}
	}
	return out
}

// With kubelet's CSIVolumeHealth gate the volume condition of a driver
// with VOLUME_CONDITION (the stand-in: abnormal when the path is not a
// mount point) is the volume's volumeHealthStats and
// kubelet_volume_stats_health_status_abnormal, and an abnormal one is
// kubelet's VolumeConditionAbnormal Event on the pod at each measurement;
// without the gate neither.
func TestPodVolumeHealth(t *testing.T) {
	ctx := context.Background()
	pvc, pv := boundClaim("claim", "pv-1", "pvc-uid")
	rig := newRealRig(t, pvc, pv, csiDriverObj(false))
	m := rig.start(t)
	clk := clocktesting.NewFakeClock(time.Unix(5000, 0))
	rec := record.NewFakeRecorder(10)
	m.Clock, m.Recorder, m.VolumeHealth = clk, rec, true
	pod := claimPod("uid-a", "claim", false)
	if _, err := m.SetUp(ctx, pod, rig.podDir("uid-a"), &pod.Spec.Volumes[0]); err != nil {
		t.Fatal(err)
	}
	got := m.PodVolumeStats(ctx, "uid-a")
	if len(got) != 1 || got[0].VolumeHealthStats == nil || got[0].VolumeHealthStats.Abnormal || *got[0].CapacityBytes == 0 {
		t.Fatalf("stats %+v, want the usage and a normal volumeHealthStats", got)
	}
	if g := gauges(t, m, "kubelet_volume_stats_health_status_abnormal"); len(g) != 1 || g["ns/claim"] != 0 {
		t.Errorf("kubelet_volume_stats_health_status_abnormal %v, want ns/claim 0", g)
	}
	if len(rec.Events) != 0 {
		t.Errorf("event %s for a normal volume", <-rec.Events)
	}

	// The publish target unmounted behind the driver's back: abnormal at
	// the next measurement.
	if err := unix.Unmount(rig.target("uid-a"), 0); err != nil {
		t.Fatal(err)
	}
	clk.Step(DefaultStatsPeriod)
	got = m.PodVolumeStats(ctx, "uid-a")
	if len(got) != 1 || got[0].VolumeHealthStats == nil || !got[0].VolumeHealthStats.Abnormal {
		t.Fatalf("stats %+v, want an abnormal volumeHealthStats", got)
	}
	if g := gauges(t, m, "kubelet_volume_stats_health_status_abnormal"); g["ns/claim"] != 1 {
		t.Errorf("kubelet_volume_stats_health_status_abnormal %v, want ns/claim 1", g)
	}
	select {
	case e := <-rec.Events:
		if want := "Warning VolumeConditionAbnormal Volume data: volume path is not mounted"; e != want {
			t.Errorf("event %q, want %q", e, want)
		}
	default:
		t.Error("no VolumeConditionAbnormal event")
	}
	// Measured once per period: no second event within it.
	m.PodVolumeStats(ctx, "uid-a")
	if len(rec.Events) != 0 {
		t.Errorf("a second event within the period: %s", <-rec.Events)
	}

	// The gate off: no condition, no gauge, no event.
	m.VolumeHealth = false
	clk.Step(DefaultStatsPeriod)
	got = m.PodVolumeStats(ctx, "uid-a")
	if len(got) != 1 || got[0].VolumeHealthStats != nil {
		t.Errorf("stats %+v without the gate", got)
	}
	if g := gauges(t, m, "kubelet_volume_stats_health_status_abnormal"); len(g) != 0 {
		t.Errorf("kubelet_volume_stats_health_status_abnormal %v without the gate", g)
	}
	if len(rec.Events) != 0 {
		t.Errorf("event %s without the gate", <-rec.Events)
	}
	if err := m.TearDown(ctx, rig.podDir("uid-a")); err != nil {
		t.Fatal(err)
	}
}

// The condition counts only from a driver with VOLUME_CONDITION; from one
// with it an answer without usage is stats of zeros with the condition
// (kubelet's csiDriverClient), from one without it no stats.
func TestPodVolumeHealthCapability(t *testing.T) {
	ctx := context.Background()
	pvc, pv := boundClaim("claim", "pv-1", "pvc-uid")
	rig := newMounterRig(t, pvc, pv, csiDriverObj(false))
	rig.m.VolumeHealth = true
	rig.f.caps = append(rig.f.caps, csipb.NodeServiceCapability_RPC_GET_VOLUME_STATS)
	rig.f.usage = []*csipb.VolumeUsage{{Unit: csipb.VolumeUsage_BYTES, Total: 100, Available: 60, Used: 40}}
	rig.f.condition = &csipb.VolumeCondition{Abnormal: true, Message: "disk on fire"}
	clk := clocktesting.NewFakeClock(time.Unix(5000, 0))
	rig.m.Clock = clk
	pod := claimPod("uid-1", "claim", false)
	if _, err := rig.m.SetUp(ctx, pod, rig.podDir("uid-1"), &pod.Spec.Volumes[0]); err != nil {
		t.Fatal(err)
	}
	if got := rig.m.PodVolumeStats(ctx, "uid-1"); len(got) != 1 || got[0].VolumeHealthStats != nil || *got[0].UsedBytes != 40 {
		t.Errorf("stats %+v from a driver without VOLUME_CONDITION, want the usage and no condition", got)
	}
	rig.f.caps = append(rig.f.caps, csipb.NodeServiceCapability_RPC_VOLUME_CONDITION)
	rig.f.usage = nil
	clk.Step(DefaultStatsPeriod)
	got := rig.m.PodVolumeStats(ctx, "uid-1")
	if len(got) != 1 || got[0].VolumeHealthStats == nil || !got[0].VolumeHealthStats.Abnormal || *got[0].UsedBytes != 0 || *got[0].CapacityBytes != 0 {
		t.Errorf("stats %+v, want zeros and the abnormal condition", got)
	}
	rig.m.VolumeHealth = false
	clk.Step(DefaultStatsPeriod)
	if got := rig.m.PodVolumeStats(ctx, "uid-1"); len(got) != 0 {
		t.Errorf("stats %+v without usage and without the gate, want none (kubelet's error)", got)
	}
}

// With the gate on, volumes are measured in the background every
// DefaultStatsPeriod, as kubelet's volume stat calculators: an abnormal
// volume is an Event though nobody asks for stats.
func TestRunVolumeHealth(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	pvc, pv := boundClaim("claim", "pv-1", "pvc-uid")
	rig := newRealRig(t, pvc, pv, csiDriverObj(false))
	m := rig.start(t)
	clk := clocktesting.NewFakeClock(time.Unix(5000, 0))
	rec := record.NewFakeRecorder(10)
	m.Clock, m.Recorder, m.VolumeHealth = clk, rec, true
	pod := claimPod("uid-a", "claim", false)
	if _, err := m.SetUp(ctx, pod, rig.podDir("uid-a"), &pod.Spec.Volumes[0]); err != nil {
		t.Fatal(err)
	}
	if err := unix.Unmount(rig.target("uid-a"), 0); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { m.RunVolumeHealth(ctx); close(done) }()
	for i := 0; i < 2; i++ {
		deadline := time.Now().Add(10 * time.Second)
		for !clk.HasWaiters() {
			if time.Now().After(deadline) {
				t.Fatal("RunVolumeHealth does not wait on the clock")
			}
			time.Sleep(time.Millisecond)
		}
		clk.Step(DefaultStatsPeriod)
		select {
		case e := <-rec.Events:
			if !strings.HasPrefix(e, "Warning VolumeConditionAbnormal Volume data: ") {
				t.Errorf("event %q", e)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("period %d: no VolumeConditionAbnormal event", i+1)
		}
	}
	cancel()
	<-done
	if err := m.TearDown(context.Background(), rig.podDir("uid-a")); err != nil {
		t.Fatal(err)
	}
}

// A negative StatsPeriod (volumeStatsAggPeriod) disables volume stats and
// the health loop, as kubelet's disables its volume calculations.
func TestVolumeStatsDisabled(t *testing.T) {
	ctx := context.Background()
	pvc, pv := boundClaim("claim", "pv-1", "pvc-uid")
	rig := newRealRig(t, pvc, pv, csiDriverObj(false))
	m := rig.start(t)
	m.Clock, m.VolumeHealth, m.StatsPeriod = clocktesting.NewFakeClock(time.Unix(5000, 0)), true, -time.Second
	pod := claimPod("uid-a", "claim", false)
	if _, err := m.SetUp(ctx, pod, rig.podDir("uid-a"), &pod.Spec.Volumes[0]); err != nil {
		t.Fatal(err)
	}
	if got := m.PodVolumeStats(ctx, "uid-a"); got != nil {
		t.Errorf("stats %+v, want none", got)
	}
	done := make(chan struct{})
	go func() { m.RunVolumeHealth(ctx); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("RunVolumeHealth runs with volume stats disabled")
	}
}
