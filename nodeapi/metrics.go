package nodeapi

import (
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
	layout, fr := newCgroupLayout(s.cgroupMounts()), &fileReader{}
	scrapeErr := 0
	help := func(name, typ, text string) {
		fmt.Fprintf(&b, "# HELP %s %s\n# TYPE %s %s\n", name, text, name, typ)
	}
	node, err := layout.read(fr, "/")
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
		u, err := layout.read(fr, cg)
		if err != nil {
			continue // exited in between
		}
		containers = append(containers, entry{fmt.Sprintf(`container=%q,namespace=%q,pod=%q`, c.Name, c.Pod.Namespace, c.Pod.Name), u, c.StartedAt})
		podKey := string(c.Pod.UID)
		if seenPod[podKey] {
			continue
		}
		seenPod[podKey] = true
		if pu, err := layout.read(fr, filepath.Dir(cg)); err == nil {
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
