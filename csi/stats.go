package csi

import (
	"context"
	"fmt"
	"io"
	"os"
	"sort"
	"syscall"
	"time"

	csipb "github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/prometheus/client_golang/prometheus"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
	"k8s.io/utils/clock"
)

// DefaultStatsPeriod is how long a volume's stats are reused (kubelet's
// volumeStatsAggPeriod default: its volume stat calculator measures each
// pod's volumes once a minute); Mounter.StatsPeriod sets it.
const DefaultStatsPeriod = time.Minute

// statsPeriod is Mounter.StatsPeriod with its default; negative: volume
// stats are off.
func (m *Mounter) statsPeriod() time.Duration {
	if m.StatsPeriod == 0 {
		return DefaultStatsPeriod
	}
	return m.StatsPeriod
}

// statsTimeout bounds a volume's measurement: it is made while
// /stats/summary or /metrics is being answered (kubelet measures in the
// background, with its 2-minute CSI timeout); a driver slower than this
// leaves the volume out until the next request.
const statsTimeout = 10 * time.Second

// setUpVolume is a volume the Mounter set up for a pod and still has:
// what its stats are read from.
type setUpVolume struct {
	name      string // the pod's volume name
	namespace string // the pod's
	podName   string
	podUID    types.UID
	claim     string // the claim's name; "" for an inline csi volume
	// A CSI volume: driver, handle and the path NodeGetVolumeStats gets
	// (a filesystem volume's publish target; a block volume's bind of the
	// device at <globalMapPath>/<pod UID>, as kubelet's csiBlockMapper);
	// a local PV: its directory, or, of volumeMode Block, the bind of its
	// device.
	driver, handle, target string
	localDir               string
	localDevice            string

	at    time.Time // when stats was measured
	stats *statsapi.VolumeStats
}

// noteSetUp records the pod's volume v as set up (replacing what a
// previous sync recorded, keeping its measured stats).
func (m *Mounter) noteSetUp(podUID string, sv *setUpVolume) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.setUp == nil {
		m.setUp = map[string]map[string]*setUpVolume{}
	}
	if m.setUp[podUID] == nil {
		m.setUp[podUID] = map[string]*setUpVolume{}
	}
	if old := m.setUp[podUID][sv.name]; old != nil && old.sameVolume(sv) {
		sv.at, sv.stats = old.at, old.stats
	}
	m.setUp[podUID][sv.name] = sv
}

func (sv *setUpVolume) sameVolume(o *setUpVolume) bool {
	return sv.target == o.target && sv.localDir == o.localDir && sv.localDevice == o.localDevice
}

// forgetPod drops the pod's set-up volumes (its teardown finished).
func (m *Mounter) forgetPod(podUID string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.setUp, podUID)
}

func (m *Mounter) clock() clock.Clock {
	if m.Clock != nil {
		return m.Clock
	}
	return clock.RealClock{}
}

// PodVolumeStats are the stats of the pod's persistentVolumeClaim,
// generic ephemeral and csi volumes, as kubelet's volume stat calculator
// gives them in /stats/summary: named after the pod's volume, with a
// pvcRef for a claim; a CSI volume's from the driver's NodeGetVolumeStats
// (left out when the driver lacks GET_VOLUME_STATS, is not registered or
// fails), a local PV's from statfs of its directory (kubelet's
// MetricsStatFS); each measured at most once per volumeStatsAggPeriod.
// Raw block volumes too, as kubelet lists its block volumes beside the
// mounted ones: a CSI one's NodeGetVolumeStats gets the pod's bind of the
// device (<globalMapPath>/<pod UID>), a local one's is the size of its
// device (kubelet's MetricsBlock: the capacity alone, the other figures
// zero).
// hostPath PVs have none (kubelet's hostPath plugin reports none either).
// A negative StatsPeriod leaves every volume out, as kubelet's negative
// volumeStatsAggPeriod disables volume calculations.
func (m *Mounter) PodVolumeStats(ctx context.Context, podUID string) []statsapi.VolumeStats {
	period := m.statsPeriod()
	if period < 0 {
		return nil
	}
	m.mu.Lock()
	vols := make([]setUpVolume, 0, len(m.setUp[podUID]))
	for _, sv := range m.setUp[podUID] {
		vols = append(vols, *sv)
	}
	m.mu.Unlock()
	sort.Slice(vols, func(i, j int) bool { return vols[i].name < vols[j].name })
	now := m.clock().Now()
	var out []statsapi.VolumeStats
	for _, sv := range vols {
		if sv.stats != nil && now.Sub(sv.at) < period && !now.Before(sv.at) {
			out = append(out, *sv.stats)
			continue
		}
		vs := m.measure(ctx, &sv, now)
		if vs == nil {
			continue
		}
		m.mu.Lock()
		if cur := m.setUp[podUID][sv.name]; cur != nil && cur.sameVolume(&sv) {
			cur.at, cur.stats = now, vs
		}
		m.mu.Unlock()
		out = append(out, *vs)
	}
	return out
}

func (m *Mounter) measure(ctx context.Context, sv *setUpVolume, now time.Time) *statsapi.VolumeStats {
	vs := &statsapi.VolumeStats{Name: sv.name}
	if sv.claim != "" {
		vs.PVCRef = &statsapi.PVCReference{Name: sv.claim, Namespace: sv.namespace}
	}
	t := metav1.NewTime(now)
	if sv.localDevice != "" {
		size, err := deviceSize(sv.localDevice)
		if err != nil {
			return nil
		}
		vs.FsStats = statsapi.FsStats{Time: t, CapacityBytes: ptr(size), AvailableBytes: ptr(0), UsedBytes: ptr(0),
			Inodes: ptr(0), InodesFree: ptr(0), InodesUsed: ptr(0)}
		return vs
	}
	if sv.localDir != "" {
		var st syscall.Statfs_t
		if err := syscall.Statfs(sv.localDir, &st); err != nil {
			return nil
		}
		bs := uint64(st.Bsize)
		vs.FsStats = statsapi.FsStats{Time: t, CapacityBytes: ptr(st.Blocks * bs), AvailableBytes: ptr(st.Bavail * bs),
			UsedBytes: ptr((st.Blocks - st.Bfree) * bs), Inodes: ptr(st.Files), InodesFree: ptr(st.Ffree), InodesUsed: ptr(st.Files - st.Ffree)}
		return vs
	}
	d, ok := m.Drivers.Driver(sv.driver)
	if !ok {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, statsTimeout)
	defer cancel()
	caps, err := nodeCapabilities(ctx, d)
	if err != nil || !caps[csipb.NodeServiceCapability_RPC_GET_VOLUME_STATS] {
		return nil
	}
	// kubelet's CSIVolumeHealth: the driver's volume condition, when it
	// has VOLUME_CONDITION (and then an answer without usage is stats of
	// zeros with the condition, as kubelet's client takes it).
	health := m.VolumeHealth && caps[csipb.NodeServiceCapability_RPC_VOLUME_CONDITION]
	resp, err := d.Node.NodeGetVolumeStats(ctx, &csipb.NodeGetVolumeStatsRequest{VolumeId: sv.handle, VolumePath: sv.target})
	if err != nil || (!health && resp.GetUsage() == nil) {
		return nil
	}
	// kubelet's csiDriverClient.NodeGetVolumeStats: zeros for a unit the
	// driver does not report.
	fs := statsapi.FsStats{Time: t, CapacityBytes: ptr(0), AvailableBytes: ptr(0), UsedBytes: ptr(0), Inodes: ptr(0), InodesFree: ptr(0), InodesUsed: ptr(0)}
	for _, u := range resp.GetUsage() {
		switch u.GetUnit() {
		case csipb.VolumeUsage_BYTES:
			fs.AvailableBytes, fs.CapacityBytes, fs.UsedBytes = nonNeg(u.GetAvailable()), nonNeg(u.GetTotal()), nonNeg(u.GetUsed())
		case csipb.VolumeUsage_INODES:
			fs.InodesFree, fs.Inodes, fs.InodesUsed = nonNeg(u.GetAvailable()), nonNeg(u.GetTotal()), nonNeg(u.GetUsed())
		}
	}
	vs.FsStats = fs
	if health {
		c := resp.GetVolumeCondition()
		vs.VolumeHealthStats = &statsapi.VolumeHealthStats{Abnormal: c.GetAbnormal()}
		if c.GetAbnormal() {
			// kubelet's volume stat calculator, at each measurement.
			m.event(&v1.ObjectReference{APIVersion: "v1", Kind: "Pod", Namespace: sv.namespace, Name: sv.podName, UID: sv.podUID},
				v1.EventTypeWarning, "VolumeConditionAbnormal", fmt.Sprintf("Volume %s: %s", sv.name, c.GetMessage()))
		}
	}
	return vs
}

// RunVolumeHealth measures the volumes of every pod every StatsPeriod
// (volumeStatsAggPeriod) until ctx is done, as kubelet's volume stat
// calculators do in the background, so that an abnormal volume condition
// is a VolumeConditionAbnormal Event without anyone asking for stats.
// With VolumeHealth only (kubelet's CSIVolumeHealth gate): otherwise
// volumes are measured when /stats/summary or /metrics asks (at most once
// per StatsPeriod either way, PodVolumeStats). A negative StatsPeriod
// disables it, as it disables kubelet's calculators.
func (m *Mounter) RunVolumeHealth(ctx context.Context) {
	period := m.statsPeriod()
	if !m.VolumeHealth || period < 0 {
		return
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-m.clock().After(period):
		}
		m.mu.Lock()
		uids := make([]string, 0, len(m.setUp))
		for uid := range m.setUp {
			uids = append(uids, uid)
		}
		m.mu.Unlock()
		sort.Strings(uids)
		for _, uid := range uids {
			m.PodVolumeStats(ctx, uid)
		}
	}
}

// deviceSize is kubelet's metricsBlock: the device opened and sought to
// its end.
func deviceSize(path string) (uint64, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	end, err := f.Seek(0, io.SeekEnd)
	if err != nil {
		return 0, err
	}
	return uint64(end), nil
}

func ptr(v uint64) *uint64 { return &v }

func nonNeg(v int64) *uint64 {
	if v < 0 {
		v = 0
	}
	return ptr(uint64(v))
}

// kubelet's volume stats metrics (pkg/kubelet/metrics/collectors
// volume_stats.go), one series per claim.
var (
	volumeStatsCapacityBytes  = volumeStatsDesc("capacity_bytes", "Capacity in bytes of the volume")
	volumeStatsAvailableBytes = volumeStatsDesc("available_bytes", "Number of available bytes in the volume")
	volumeStatsUsedBytes      = volumeStatsDesc("used_bytes", "Number of used bytes in the volume")
	volumeStatsInodes         = volumeStatsDesc("inodes", "Maximum number of inodes in the volume")
	volumeStatsInodesFree     = volumeStatsDesc("inodes_free", "Number of free inodes in the volume")
	volumeStatsInodesUsed     = volumeStatsDesc("inodes_used", "Number of used inodes in the volume")
	// With CSIVolumeHealth, for a volume whose driver reports its condition.
	volumeStatsHealthAbnormal = volumeStatsDesc("health_status_abnormal", "Abnormal volume health status. The count is either 1 or 0. 1 indicates the volume is unhealthy, 0 indicates volume is healthy")
)

func volumeStatsDesc(name, help string) *prometheus.Desc {
	return prometheus.NewDesc("kubelet_volume_stats_"+name, "[ALPHA] "+help, []string{"namespace", "persistentvolumeclaim"}, nil)
}

// VolumeStatsCollector is kubelet's volume stats collector: the
// kubelet_volume_stats_* gauges of every claim a pod on the node has set
// up (PodVolumeStats of each pod; a claim used by two pods once).
type VolumeStatsCollector struct{ M *Mounter }

var _ prometheus.Collector = VolumeStatsCollector{}

func (VolumeStatsCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{volumeStatsCapacityBytes, volumeStatsAvailableBytes, volumeStatsUsedBytes, volumeStatsInodes, volumeStatsInodesFree, volumeStatsInodesUsed, volumeStatsHealthAbnormal} {
		ch <- d
	}
}

func (c VolumeStatsCollector) Collect(ch chan<- prometheus.Metric) {
	c.M.mu.Lock()
	uids := make([]string, 0, len(c.M.setUp))
	for uid := range c.M.setUp {
		uids = append(uids, uid)
	}
	c.M.mu.Unlock()
	sort.Strings(uids)
	seen := map[statsapi.PVCReference]bool{}
	for _, uid := range uids {
		for _, vs := range c.M.PodVolumeStats(context.Background(), uid) {
			if vs.PVCRef == nil || seen[*vs.PVCRef] {
				continue
			}
			seen[*vs.PVCRef] = true
			for _, g := range []struct {
				d *prometheus.Desc
				v *uint64
			}{
				{volumeStatsCapacityBytes, vs.CapacityBytes}, {volumeStatsAvailableBytes, vs.AvailableBytes}, {volumeStatsUsedBytes, vs.UsedBytes},
				{volumeStatsInodes, vs.Inodes}, {volumeStatsInodesFree, vs.InodesFree}, {volumeStatsInodesUsed, vs.InodesUsed},
			} {
				ch <- prometheus.MustNewConstMetric(g.d, prometheus.GaugeValue, float64(*g.v), vs.PVCRef.Namespace, vs.PVCRef.Name)
			}
			if h := vs.VolumeHealthStats; h != nil {
				abnormal := 0.0
				if h.Abnormal {
					abnormal = 1
				}
				ch <- prometheus.MustNewConstMetric(volumeStatsHealthAbnormal, prometheus.GaugeValue, abnormal, vs.PVCRef.Namespace, vs.PVCRef.Name)
			}
		}
	}
}
