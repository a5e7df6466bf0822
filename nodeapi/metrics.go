package nodeapi

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/nodeagent/nodeagent/internal/mountinfo"
	"github.com/nodeagent/nodeagent/runtime"
)

// cgroupUsage is what /metrics/resource reports of one cgroup.
type cgroupUsage struct {
	cpuNanos   uint64 // cumulative CPU time
	memUsage   uint64 // memory usage
	workingSet uint64 // memory usage less inactive file pages
	rss        uint64 // anonymous memory (v1 total_rss, v2 anon)
	hasMem     bool
}

// readCgroup reads a cgroup's CPU time and memory working set from
// whichever mounted hierarchy has them: cgroup v2 (cpu.stat usage_usec,
// memory.current) or v1 (cpuacct.usage, memory.usage_in_bytes), so pure v2
// and hybrid hosts both work. path is the cgroupfs path ("/nodeagent/<uid>").
func readCgroup(mounts []string, path string) (cgroupUsage, error) {
	var u cgroupUsage
	var haveCPU, haveMem bool
	for _, m := range mounts {
		dir := filepath.Join(m, path)
		if !haveCPU {
			if b, err := os.ReadFile(filepath.Join(dir, "cpuacct.usage")); err == nil {
				if n, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64); err == nil {
					u.cpuNanos, haveCPU = n, true
				}
			} else if st, err := readKV(filepath.Join(dir, "cpu.stat")); err == nil {
				if n, ok := st["usage_usec"]; ok {
					u.cpuNanos, haveCPU = n*1000, true
				}
			}
		}
		if !haveMem {
			usage, inactive := uint64(0), uint64(0)
			if b, err := os.ReadFile(filepath.Join(dir, "memory.usage_in_bytes")); err == nil {
				usage, _ = strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
				if st, err := readKV(filepath.Join(dir, "memory.stat")); err == nil {
					inactive, u.rss = st["total_inactive_file"], st["total_rss"]
				}
				haveMem = true
			} else if b, err := os.ReadFile(filepath.Join(dir, "memory.current")); err == nil {
				usage, _ = strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
				if st, err := readKV(filepath.Join(dir, "memory.stat")); err == nil {
					inactive, u.rss = st["inactive_file"], st["anon"]
				}
				haveMem = true
			} else if st, err := readKV(filepath.Join(dir, "memory.stat")); err == nil && path == "/" {
				// The cgroup v2 root has memory.stat but no memory.current:
				// usage is anon + file, as runc's root statistics (what
				// cadvisor, and so kubelet, report for the node on v2), not
				// MemTotal - MemAvailable.
				if anon, ok := st["anon"]; ok {
					usage, inactive, u.rss = anon+st["file"], st["inactive_file"], anon
					haveMem = true
				}
			}
			u.memUsage, u.hasMem = usage, haveMem
			if haveMem && usage > inactive {
				u.workingSet = usage - inactive
			}
		}
	}
	if !haveCPU && !haveMem {
		return u, fmt.Errorf("cgroup %s: no cpu or memory statistics", path)
	}
	return u, nil
}

// readKV reads a "key value" per line file (cpu.stat, memory.stat).
func readKV(p string) (map[string]uint64, error) {
	b, err := os.ReadFile(p)
	if err != nil {
		return nil, err
	}
	out := map[string]uint64{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), " ")
		if !ok {
			continue
		}
		if n, err := strconv.ParseUint(strings.TrimSpace(v), 10, 64); err == nil {
			out[k] = n
		}
	}
	return out, nil
}

// nodeMemoryWorkingSet is MemTotal - MemAvailable, for hosts whose root
// cgroup has no memory statistics at all (neither v1's memory.usage_in_bytes
// nor v2's root memory.stat: no memory controller mounted).
func nodeMemoryWorkingSet(meminfo string) (uint64, error) {
	b, err := os.ReadFile(meminfo)
	if err != nil {
		return 0, err
	}
	vals := map[string]uint64{}
	for _, l := range strings.Split(string(b), "\n") {
		k, v, ok := strings.Cut(l, ":")
		if !ok {
			continue
		}
		f := strings.Fields(v)
		if len(f) == 0 {
			continue
		}
		if n, err := strconv.ParseUint(f[0], 10, 64); err == nil {
			vals[k] = n * 1024
		}
	}
	total, avail := vals["MemTotal"], vals["MemAvailable"]
	if total == 0 || avail > total {
		return 0, errors.New("meminfo: no MemTotal/MemAvailable")
	}
	return total - avail, nil
}

// metricsResource serves kubelet's /metrics/resource, the cumulative CPU
// and memory working set that metrics-server (kubectl top) reads, for the
// node, each pod and each running container, from cgroups.
func (s *Server) metricsResource(w http.ResponseWriter, r *http.Request) {
	var b strings.Builder
	now := s.opts.Clock.Now()
	ts := now.UnixMilli()
	mounts := s.cgroupMounts()
	scrapeErr := 0
	help := func(name, typ, text string) {
		fmt.Fprintf(&b, "# HELP %s %s\n# TYPE %s %s\n", name, text, name, typ)
	}
	node, err := readCgroup(mounts, "/")
	if err != nil {
		scrapeErr = 1
	}
	if node.workingSet == 0 {
		if ws, err := nodeMemoryWorkingSet("/proc/meminfo"); err == nil {
			node.workingSet = ws
		}
	}
	var cs []runtime.Container
	if s.opts.Containers != nil {
		if cs, err = s.opts.Containers.ListContainers(r.Context()); err != nil {
			scrapeErr = 1
		}
	}
	type entry struct {
		labels string
		u      cgroupUsage
		start  time.Time
	}
	var containers, pods []entry
	seenPod := map[string]bool{}
	for _, c := range cs {
		if c.State != runtime.StateRunning || c.CgroupsPath == "" {
			continue
		}
		cg := runtime.CgroupfsPath(c.CgroupsPath)
		u, err := readCgroup(mounts, cg)
		if err != nil {
			continue // exited in between
		}
		containers = append(containers, entry{fmt.Sprintf(`container=%q,namespace=%q,pod=%q`, c.Name, c.Pod.Namespace, c.Pod.Name), u, c.StartedAt})
		podKey := string(c.Pod.UID)
		if seenPod[podKey] {
			continue
		}
		seenPod[podKey] = true
		if pu, err := readCgroup(mounts, filepath.Dir(cg)); err == nil {
			pods = append(pods, entry{labels: fmt.Sprintf(`namespace=%q,pod=%q`, c.Pod.Namespace, c.Pod.Name), u: pu})
		}
	}
	help("container_cpu_usage_seconds_total", "counter", "[STABLE] Cumulative cpu time consumed by the container in core-seconds")
	for _, e := range containers {
		fmt.Fprintf(&b, "container_cpu_usage_seconds_total{%s} %g %d\n", e.labels, float64(e.u.cpuNanos)/1e9, ts)
	}
	help("container_memory_working_set_bytes", "gauge", "[STABLE] Current working set of the container in bytes")
	for _, e := range containers {
		fmt.Fprintf(&b, "container_memory_working_set_bytes{%s} %d %d\n", e.labels, e.u.workingSet, ts)
	}
	help("container_start_time_seconds", "gauge", "[STABLE] Start time of the container since unix epoch in seconds")
	for _, e := range containers {
		fmt.Fprintf(&b, "container_start_time_seconds{%s} %g %d\n", e.labels, float64(e.start.UnixNano())/1e9, ts)
	}
	help("node_cpu_usage_seconds_total", "counter", "[STABLE] Cumulative cpu time consumed by the node in core-seconds")
	fmt.Fprintf(&b, "node_cpu_usage_seconds_total %g %d\n", float64(node.cpuNanos)/1e9, ts)
	help("node_memory_working_set_bytes", "gauge", "[STABLE] Current working set of the node in bytes")
	fmt.Fprintf(&b, "node_memory_working_set_bytes %d %d\n", node.workingSet, ts)
	help("pod_cpu_usage_seconds_total", "counter", "[STABLE] Cumulative cpu time consumed by the pod in core-seconds")
	for _, e := range pods {
		fmt.Fprintf(&b, "pod_cpu_usage_seconds_total{%s} %g %d\n", e.labels, float64(e.u.cpuNanos)/1e9, ts)
	}
	help("pod_memory_working_set_bytes", "gauge", "[STABLE] Current working set of the pod in bytes")
	for _, e := range pods {
		fmt.Fprintf(&b, "pod_memory_working_set_bytes{%s} %d %d\n", e.labels, e.u.workingSet, ts)
	}
	help("scrape_error", "gauge", "[ALPHA] 1 if there was an error while getting container metrics, 0 otherwise")
	fmt.Fprintf(&b, "scrape_error %d\n", scrapeErr)
	w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
	_, _ = w.Write([]byte(b.String()))
}

// cgroupMounts are the cgroup hierarchies to read (Options.CgroupMounts in
// tests, else the host's).
func (s *Server) cgroupMounts() []string {
	if s.opts.CgroupMounts != nil {
		return s.opts.CgroupMounts
	}
	ms, err := mountinfo.Read()
	if err != nil {
		return nil
	}
	return mountinfo.CgroupMountPoints(ms)
}
