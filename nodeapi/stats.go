package nodeapi

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"

	"github.com/nodeagent/nodeagent/runtime"
)

// cpuSample is a cgroup's CPU time at a moment, kept to compute the next
// request's usage rate.
type cpuSample struct {
	at    time.Time
	nanos uint64
}

// rateWindow is the shortest interval a CPU rate is computed over: a
// cgroup seen for the first time is sampled again after it.
const rateWindow = 100 * time.Millisecond

// cpuRates remembers the last CPU sample of each cgroup.
type cpuRates struct {
	mu   sync.Mutex
	last map[string]cpuSample
}

// rate returns the usage in nanocores since the previous sample of key,
// and records now's; ok is false without a usable previous sample.
func (c *cpuRates) rate(key string, now time.Time, nanos uint64) (uint64, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.last == nil {
		c.last = map[string]cpuSample{}
	}
	prev, ok := c.last[key]
	c.last[key] = cpuSample{now, nanos}
	if !ok || !now.After(prev.at) || nanos < prev.nanos {
		return 0, false
	}
	return CPURate(prev.nanos, nanos, now.Sub(prev.at)), true
}

// keep forgets the samples of cgroups not in keys (containers gone).
func (c *cpuRates) keep(keys map[string]cgroupUsage) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for k := range c.last {
		if _, ok := keys[k]; !ok {
			delete(c.last, k)
		}
	}
}

// CPURate is the CPU usage in nanocores between two cumulative readings
// taken d apart.
func CPURate(before, after uint64, d time.Duration) uint64 {
	if d <= 0 || after < before {
		return 0
	}
	return uint64(float64(after-before) / d.Seconds())
}

// statsSummary serves kubelet's /stats/summary (the
// k8s.io/kubelet/pkg/apis/stats/v1alpha1 Summary): CPU and memory of the
// node, each pod and each running container from cgroups, the node's
// filesystem (rootDir's) and each container's log usage.
func (s *Server) statsSummary(w http.ResponseWriter, r *http.Request) {
	layout, fr := newCgroupLayout(s.cgroupMounts()), &fileReader{}
	layout.psi = s.opts.PSI
	var cs []runtime.Container
	if s.opts.Containers != nil {
		var err error
		if cs, err = s.opts.Containers.ListContainers(r.Context()); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
	}
	type target struct{ key, path string }
	targets := []target{{"node", "/"}}
	for _, c := range cs {
		if c.State == runtime.StateRunning && c.CgroupsPath != "" {
			cg := runtime.CgroupfsPath(c.CgroupsPath) // the pod's cgroup is its parent with either driver
			targets = append(targets, target{c.ID, cg}, target{"pod/" + string(c.Pod.UID), filepath.Dir(cg)})
		}
	}
	// Cgroups seen for the first time get a second sample after
	// rateWindow, so that every CPU figure has a rate.
	read := func() map[string]cgroupUsage {
		out := map[string]cgroupUsage{}
		for _, t := range targets {
			if _, ok := out[t.key]; ok {
				continue
			}
			if u, err := layout.read(fr, t.path); err == nil {
				out[t.key] = u
			}
		}
		return out
	}
	usage := read()
	now := s.opts.Clock.Now()
	rates := map[string]uint64{}
	missing := false
	for k, u := range usage {
		if r, ok := s.rates.rate(k, now, u.cpuNanos); ok {
			rates[k] = r
		} else {
			missing = true
		}
	}
	if missing {
		time.Sleep(rateWindow)
		usage = read()
		now = s.opts.Clock.Now()
		for k, u := range usage {
			if r, ok := s.rates.rate(k, now, u.cpuNanos); ok {
				rates[k] = r
			}
		}
	}
	s.rates.keep(usage)
	t := metav1.NewTime(now)
	cpu := func(k string) *statsapi.CPUStats {
		u, ok := usage[k]
		if !ok {
			return nil
		}
		st := &statsapi.CPUStats{Time: t, UsageCoreNanoSeconds: ptr(u.cpuNanos)}
		if r, ok := rates[k]; ok {
			st.UsageNanoCores = ptr(r)
		}
		if u.psiRead {
			st.PSI = u.psiCPU.api()
		}
		return st
	}
	mem := func(k string) *statsapi.MemoryStats {
		u, ok := usage[k]
		if !ok || !u.hasMem {
			return nil
		}
		st := &statsapi.MemoryStats{Time: t, UsageBytes: ptr(u.memUsage), WorkingSetBytes: ptr(u.workingSet), RSSBytes: ptr(u.rss)}
		if u.psiRead {
			st.PSI = u.psiMemory.api()
		}
		return st
	}
	// io: kubelet's IOStats, which hold only the io pressure (KubeletPSI).
	io := func(k string) *statsapi.IOStats {
		u, ok := usage[k]
		if !ok || !u.psiRead {
			return nil
		}
		return &statsapi.IOStats{Time: t, PSI: u.psiIO.api()}
	}

	sum := statsapi.Summary{Node: statsapi.NodeStats{NodeName: s.opts.NodeName, StartTime: metav1.NewTime(bootTime(now)), CPU: cpu("node"), IO: io("node")}}
	nodeMem := mem("node")
	if nodeMem == nil || *nodeMem.WorkingSetBytes == 0 {
		if ws, err := nodeMemoryWorkingSet("/proc/meminfo"); err == nil {
			nodeMem = &statsapi.MemoryStats{Time: t, WorkingSetBytes: ptr(ws)}
		}
	}
	if total := memTotal(); nodeMem != nil && total > *nodeMem.WorkingSetBytes {
		nodeMem.AvailableBytes = ptr(total - *nodeMem.WorkingSetBytes)
	}
	sum.Node.Memory = nodeMem
	if s.opts.StatsFsDir != "" {
		sum.Node.Fs = fsStats(s.opts.StatsFsDir, t)
	}
	procDir := s.procDir()
	if b, err := fr.read(procDir, "/1/net/dev", ""); err == nil {
		if devs, err := parseNetDev(b, []netDev{}); err == nil {
			sum.Node.Network = networkStats(devs, t)
		}
	}
	if s.opts.ImageFs != nil {
		if dir, used, err := s.opts.ImageFs(r.Context()); err == nil {
			if fst := fsStats(dir, t); fst != nil {
				// The images' bytes; the inodes they use are not known.
				fst.UsedBytes, fst.InodesUsed = ptr(used), nil
				cfs := *fst
				sum.Node.Runtime = &statsapi.RuntimeStats{ImageFs: fst, ContainerFs: &cfs}
			}
		} else {
			s.log.Debug("node API: /stats/summary: image filesystem", "err", err)
		}
	}
	volumes := map[string]bool{}
	pods := map[string]*statsapi.PodStats{}
	var order []string
	for _, c := range cs {
		if c.State != runtime.StateRunning {
			continue
		}
		uid := string(c.Pod.UID)
		ps, ok := pods[uid]
		if !ok {
			ps = &statsapi.PodStats{
				PodRef:      statsapi.PodReference{Name: c.Pod.Name, Namespace: c.Pod.Namespace, UID: uid},
				StartTime:   metav1.NewTime(c.CreatedAt),
				CPU:         cpu("pod/" + uid),
				Memory:      mem("pod/" + uid),
				IO:          io("pod/" + uid),
				VolumeStats: s.podVolumes(r.Context(), uid, t, volumes),
			}
			pods[uid] = ps
			order = append(order, uid)
		}
		if ps.Network == nil && c.Pid > 0 {
			// The pod's network namespace, through a process in it.
			if b, err := fr.read(procDir, "/"+strconv.FormatUint(uint64(c.Pid), 10), "/net/dev"); err == nil {
				if devs, err := parseNetDev(b, []netDev{}); err == nil {
					ps.Network = networkStats(devs, t)
				}
			}
		}
		if c.CreatedAt.Before(ps.StartTime.Time) {
			ps.StartTime = metav1.NewTime(c.CreatedAt)
		}
		cst := statsapi.ContainerStats{Name: c.Name, StartTime: metav1.NewTime(c.StartedAt), CPU: cpu(c.ID), Memory: mem(c.ID), IO: io(c.ID)}
		if c.LogPath != "" {
			cst.Logs = logUsage(filepath.Dir(c.LogPath), t)
		}
		ps.Containers = append(ps.Containers, cst)
	}
	s.du.keep(volumes)
	sum.Pods = []statsapi.PodStats{}
	for _, uid := range order {
		sum.Pods = append(sum.Pods, *pods[uid])
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(&sum)
}

func ptr(v uint64) *uint64 { return &v }

// api is the summary API's form of one pressure file.
func (p psiStats) api() *statsapi.PSIStats {
	d := func(x psiData) statsapi.PSIData {
		return statsapi.PSIData{Total: x.total, Avg10: x.avg10, Avg60: x.avg60, Avg300: x.avg300}
	}
	return &statsapi.PSIStats{Full: d(p.full), Some: d(p.some)}
}

// fsStats is the filesystem holding dir.
func fsStats(dir string, t metav1.Time) *statsapi.FsStats {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return nil
	}
	bs := uint64(st.Bsize)
	return &statsapi.FsStats{
		Time: t, CapacityBytes: ptr(st.Blocks * bs), AvailableBytes: ptr(st.Bavail * bs),
		UsedBytes: ptr((st.Blocks - st.Bfree) * bs), Inodes: ptr(st.Files), InodesFree: ptr(st.Ffree),
		InodesUsed: ptr(st.Files - st.Ffree),
	}
}

// logUsage is the filesystem of a container's log directory, with the
// bytes its files use.
func logUsage(dir string, t metav1.Time) *statsapi.FsStats {
	fs := fsStats(dir, t)
	if fs == nil {
		return nil
	}
	var used, files uint64
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if info, err := e.Info(); err == nil && info.Mode().IsRegular() {
			used += uint64(info.Size())
			files++
		}
	}
	fs.UsedBytes, fs.InodesUsed = ptr(used), ptr(files)
	return fs
}

// memTotal is the host's memory in bytes (0 if unknown).
func memTotal() uint64 {
	var info syscall.Sysinfo_t
	if syscall.Sysinfo(&info) != nil {
		return 0
	}
	return uint64(info.Totalram) * uint64(info.Unit)
}

// bootTime is when the host booted (the node's StartTime).
func bootTime(now time.Time) time.Time {
	var info syscall.Sysinfo_t
	if syscall.Sysinfo(&info) != nil {
		return now
	}
	return now.Add(-time.Duration(info.Uptime) * time.Second)
}
