package nodeapi

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
)

// DefaultVolumeStatsAggPeriod is how long a volume's measured usage is
// reused (kubelet's volumeStatsAggPeriod default; Options sets it):
// measuring walks the volume.
const DefaultVolumeStatsAggPeriod = time.Minute

// duEntry is one directory's measured usage.
type duEntry struct {
	at            time.Time
	bytes, inodes uint64
}

// duCache remembers the usage of volume directories for a period
// (volumeStatsAggPeriod).
type duCache struct {
	mu sync.Mutex
	m  map[string]duEntry
}

// usage returns dir's usage, measured at most period ago. The walk runs
// outside the lock; two requests may both measure.
func (c *duCache) usage(dir string, now time.Time, period time.Duration) (bytes, inodes uint64, err error) {
	c.mu.Lock()
	e, ok := c.m[dir]
	c.mu.Unlock()
	if ok && now.Sub(e.at) < period && !now.Before(e.at) {
		return e.bytes, e.inodes, nil
	}
	b, n, err := diskUsage(dir)
	if err != nil {
		return 0, 0, err
	}
	c.mu.Lock()
	if c.m == nil {
		c.m = map[string]duEntry{}
	}
	c.m[dir] = duEntry{at: now, bytes: b, inodes: n}
	c.mu.Unlock()
	return b, n, nil
}

// keep forgets directories not in dirs (volumes gone).
func (c *duCache) keep(dirs map[string]bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for d := range c.m {
		if !dirs[d] {
			delete(c.m, d)
		}
	}
}

// diskUsage is what kubelet's MetricsDu measures (du -x): the blocks
// allocated to the files and directories under dir, each inode once, on
// dir's filesystem only, and the number of those inodes. Symbolic links
// are counted, not followed (a secret's ..data).
func diskUsage(dir string) (bytes, inodes uint64, err error) {
	var root syscall.Stat_t
	if err := syscall.Lstat(dir, &root); err != nil {
		return 0, 0, err
	}
	type ino struct{ dev, ino uint64 }
	seen := map[ino]bool{}
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if os.IsNotExist(err) {
				return nil // removed while walking
			}
			return err
		}
		var st syscall.Stat_t
		if err := syscall.Lstat(p, &st); err != nil {
			return nil
		}
		if uint64(st.Dev) != uint64(root.Dev) {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		k := ino{uint64(st.Dev), uint64(st.Ino)}
		if seen[k] {
			return nil
		}
		seen[k] = true
		bytes += uint64(st.Blocks) * 512
		inodes++
		return nil
	})
	return bytes, inodes, err
}

// podVolumes are the stats of the pod's volumes the agent keeps in the
// pod's directory (<podsDir>/<uid>/volumes/<plugin>/<name>: emptyDir,
// configMap, secret, downwardAPI, projected): the usage of the volume's
// directory and its filesystem's size, as kubelet's MetricsDu gives them;
// then those of PodVolumeStats (CSI and local PVs, which kubelet does not
// measure with du either). seen collects the directories measured. A
// negative volumeStatsAggPeriod disables volume stats, as in kubelet.
func (s *Server) podVolumes(ctx context.Context, uid string, t metav1.Time, seen map[string]bool) []statsapi.VolumeStats {
	period := s.opts.VolumeStatsAggPeriod
	if period < 0 {
		return nil
	}
	if period == 0 {
		period = DefaultVolumeStatsAggPeriod
	}
	var out []statsapi.VolumeStats
	var dirs []string
	if s.opts.PodsDir != "" {
		dirs, _ = filepath.Glob(filepath.Join(s.opts.PodsDir, uid, "volumes", "*", "*"))
	}
	for _, dir := range dirs {
		if p := filepath.Base(filepath.Dir(dir)); p == "kubernetes.io~csi" || p == "kubernetes.io~local-volume" {
			continue
		}
		fst := fsStats(dir, t)
		if fst == nil {
			continue
		}
		used, inodes, err := s.du.usage(dir, t.Time, period)
		if err != nil {
			continue
		}
		seen[dir] = true
		fst.UsedBytes, fst.InodesUsed = ptr(used), ptr(inodes)
		out = append(out, statsapi.VolumeStats{FsStats: *fst, Name: filepath.Base(dir)})
	}
	if s.opts.PodVolumeStats != nil {
		out = append(out, s.opts.PodVolumeStats(ctx, uid)...)
	}
	return out
}

// networkStats converts net/dev counters to the summary's NetworkStats:
// every interface, and eth0's counters (kubelet's default interface) at
// the top level.
func networkStats(devs []netDev, t metav1.Time) *statsapi.NetworkStats {
	if devs == nil {
		return nil
	}
	ns := &statsapi.NetworkStats{Time: t, Interfaces: []statsapi.InterfaceStats{}}
	for _, d := range devs {
		is := statsapi.InterfaceStats{Name: d.name, RxBytes: ptr(d.rxBytes), RxErrors: ptr(d.rxErrors), TxBytes: ptr(d.txBytes), TxErrors: ptr(d.txErrors)}
		if d.name == "eth0" {
			ns.InterfaceStats = is
		}
		ns.Interfaces = append(ns.Interfaces, is)
	}
	return ns
}
