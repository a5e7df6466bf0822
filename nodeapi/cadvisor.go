package nodeapi

import (
	"cmp"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/nodeagent/nodeagent/internal/mountinfo"
	"github.com/nodeagent/nodeagent/runtime"
)

// cadvisorSeries is one cgroup as /metrics/cadvisor shows it: the root
// ("/"), a pod's cgroup (container "") or a container's, with kubelet's
// labels (container, id, image, name, namespace, pod).
type cadvisorSeries struct {
	container, id, image, name, namespace, pod string
	// labels is the rendered label set in three parts, so that an extra
	// label sorts into its place: [0:split1] is container="...",
	// [split1:split2] id and image, [split2:] name, namespace and pod.
	labels         []byte
	split1, split2 int

	st    cgroupStats
	start time.Time
	net   []netDev  // the root and pods: their network namespace's interfaces
	fs    *fsSeries // the root only
}

// fsSeries is one filesystem's usage and size (container_fs_*).
type fsSeries struct {
	device       string
	usage, limit uint64
}

func (c *cadvisorSeries) render() {
	b := make([]byte, 0, 64+len(c.id)+len(c.image)+len(c.name)+len(c.namespace)+len(c.pod)+len(c.container))
	b = appendLabel(b, "container", c.container)
	c.split1 = len(b)
	b = append(b, ',')
	b = appendLabel(b, "id", c.id)
	b = append(b, ',')
	b = appendLabel(b, "image", c.image)
	c.split2 = len(b)
	b = append(b, ',')
	b = appendLabel(b, "name", c.name)
	b = append(b, ',')
	b = appendLabel(b, "namespace", c.namespace)
	b = append(b, ',')
	b = appendLabel(b, "pod", c.pod)
	c.labels = b
}

// appendLabel appends name="value" with the text format's escaping.
func appendLabel(b []byte, name, value string) []byte {
	b = append(b, name...)
	b = append(b, '=', '"')
	for i := 0; i < len(value); i++ {
		switch c := value[i]; c {
		case '\\':
			b = append(b, '\\', '\\')
		case '"':
			b = append(b, '\\', '"')
		case '\n':
			b = append(b, '\\', 'n')
		default:
			b = append(b, c)
		}
	}
	return append(b, '"')
}

// cadvisorFamily is one metric family of /metrics/cadvisor, with
// cAdvisor's name, help, type and which cgroups have it.
type cadvisorFamily struct {
	name, help, typ string
	// stamped families carry the sample time, as cAdvisor's statistics
	// do (its spec and start-time families do not).
	stamped bool
	has     func(*cadvisorSeries) bool
	value   func(*cadvisorSeries) float64
	// cpuTotal adds cpu="total" (kubelet's cAdvisor has no per-CPU usage).
	cpuTotal bool
	// netValue makes a family per interface (label interface).
	netValue func(*netDev) uint64
	// fsValue makes a family per filesystem (label device).
	fsValue func(*fsSeries) uint64
}

func hasCPU(c *cadvisorSeries) bool   { return c.st.hasCPU }
func hasMem(c *cadvisorSeries) bool   { return c.st.hasMem }
func hasQuota(c *cadvisorSeries) bool { return c.st.hasCPU && c.st.cpuQuota != 0 }
func hasNet(c *cadvisorSeries) bool   { return len(c.net) > 0 }
func hasFs(c *cadvisorSeries) bool    { return c.fs != nil }
func always(*cadvisorSeries) bool     { return true }
func nanos(n uint64) float64          { return float64(n) / 1e9 }
func hasPSI(c *cadvisorSeries) bool   { return c.st.psiRead }
func micros(n uint64) float64         { return float64(n) / 1e6 }

// cadvisorFamilies are the families served, sorted by name as a
// Prometheus registry gathers them. Help texts are cAdvisor's (v0.52, the
// version kubelet 1.34 embeds).
var cadvisorFamilies = func() []cadvisorFamily {
	fs := []cadvisorFamily{
		{name: "container_cpu_cfs_periods_total", help: "Number of elapsed enforcement period intervals.", typ: "counter", stamped: true, has: hasQuota,
			value: func(c *cadvisorSeries) float64 { return float64(c.st.periods) }},
		{name: "container_cpu_cfs_throttled_periods_total", help: "Number of throttled period intervals.", typ: "counter", stamped: true, has: hasQuota,
			value: func(c *cadvisorSeries) float64 { return float64(c.st.throttledPeriods) }},
		{name: "container_cpu_cfs_throttled_seconds_total", help: "Total time duration the container has been throttled.", typ: "counter", stamped: true, has: hasQuota,
			value: func(c *cadvisorSeries) float64 { return nanos(c.st.throttledNanos) }},
		{name: "container_cpu_system_seconds_total", help: "Cumulative system cpu time consumed in seconds.", typ: "counter", stamped: true, has: hasCPU,
			value: func(c *cadvisorSeries) float64 { return nanos(c.st.systemNanos) }},
		{name: "container_cpu_usage_seconds_total", help: "Cumulative cpu time consumed in seconds.", typ: "counter", stamped: true, cpuTotal: true,
			has:   func(c *cadvisorSeries) bool { return c.st.hasCPU && c.st.cpuNanos > 0 },
			value: func(c *cadvisorSeries) float64 { return nanos(c.st.cpuNanos) }},
		{name: "container_cpu_user_seconds_total", help: "Cumulative user cpu time consumed in seconds.", typ: "counter", stamped: true, has: hasCPU,
			value: func(c *cadvisorSeries) float64 { return nanos(c.st.userNanos) }},
		{name: "container_fs_limit_bytes", help: "Number of bytes that can be consumed by the container on this filesystem.", typ: "gauge", stamped: true, has: hasFs,
			fsValue: func(f *fsSeries) uint64 { return f.limit }},
		{name: "container_fs_usage_bytes", help: "Number of bytes that are consumed by the container on this filesystem.", typ: "gauge", stamped: true, has: hasFs,
			fsValue: func(f *fsSeries) uint64 { return f.usage }},
		{name: "container_memory_cache", help: "Number of bytes of page cache memory.", typ: "gauge", stamped: true, has: hasMem,
			value: func(c *cadvisorSeries) float64 { return float64(c.st.cache) }},
		{name: "container_memory_failcnt", help: "Number of memory usage hits limits", typ: "counter", stamped: true, has: hasMem,
			value: func(c *cadvisorSeries) float64 { return float64(c.st.failcnt) }},
		{name: "container_memory_max_usage_bytes", help: "Maximum memory usage recorded in bytes", typ: "gauge", stamped: true, has: hasMem,
			value: func(c *cadvisorSeries) float64 { return float64(c.st.maxUsage) }},
		{name: "container_memory_rss", help: "Size of RSS in bytes.", typ: "gauge", stamped: true, has: hasMem,
			value: func(c *cadvisorSeries) float64 { return float64(c.st.rss) }},
		{name: "container_memory_swap", help: "Container swap usage in bytes.", typ: "gauge", stamped: true, has: hasMem,
			value: func(c *cadvisorSeries) float64 { return float64(c.st.swap) }},
		{name: "container_memory_usage_bytes", help: "Current memory usage in bytes, including all memory regardless of when it was accessed", typ: "gauge", stamped: true, has: hasMem,
			value: func(c *cadvisorSeries) float64 { return float64(c.st.memUsage) }},
		{name: "container_memory_working_set_bytes", help: "Current working set in bytes.", typ: "gauge", stamped: true, has: hasMem,
			value: func(c *cadvisorSeries) float64 { return float64(c.st.workingSet) }},
		{name: "container_network_receive_bytes_total", help: "Cumulative count of bytes received", typ: "counter", stamped: true, has: hasNet,
			netValue: func(d *netDev) uint64 { return d.rxBytes }},
		{name: "container_network_receive_errors_total", help: "Cumulative count of errors encountered while receiving", typ: "counter", stamped: true, has: hasNet,
			netValue: func(d *netDev) uint64 { return d.rxErrors }},
		{name: "container_network_receive_packets_dropped_total", help: "Cumulative count of packets dropped while receiving", typ: "counter", stamped: true, has: hasNet,
			netValue: func(d *netDev) uint64 { return d.rxDropped }},
		{name: "container_network_receive_packets_total", help: "Cumulative count of packets received", typ: "counter", stamped: true, has: hasNet,
			netValue: func(d *netDev) uint64 { return d.rxPackets }},
		{name: "container_network_transmit_bytes_total", help: "Cumulative count of bytes transmitted", typ: "counter", stamped: true, has: hasNet,
			netValue: func(d *netDev) uint64 { return d.txBytes }},
		{name: "container_network_transmit_errors_total", help: "Cumulative count of errors encountered while transmitting", typ: "counter", stamped: true, has: hasNet,
			netValue: func(d *netDev) uint64 { return d.txErrors }},
		{name: "container_network_transmit_packets_dropped_total", help: "Cumulative count of packets dropped while transmitting", typ: "counter", stamped: true, has: hasNet,
			netValue: func(d *netDev) uint64 { return d.txDropped }},
		{name: "container_network_transmit_packets_total", help: "Cumulative count of packets transmitted", typ: "counter", stamped: true, has: hasNet,
			netValue: func(d *netDev) uint64 { return d.txPackets }},
		{name: "container_oom_events_total", help: "Count of out of memory events observed for the container", typ: "counter", stamped: true, has: hasMem,
			value: func(c *cadvisorSeries) float64 { return float64(c.st.oomKills) }},
		// cAdvisor's pressure metrics (kubelet includes them with
		// KubeletPSI), from the pressure files' totals in microseconds.
		{name: "container_pressure_cpu_stalled_seconds_total", help: "Total time duration no tasks in the container could make progress due to CPU congestion.", typ: "counter", stamped: true, has: hasPSI,
			value: func(c *cadvisorSeries) float64 { return micros(c.st.psiCPU.full.total) }},
		{name: "container_pressure_cpu_waiting_seconds_total", help: "Total time duration tasks in the container have waited due to CPU congestion.", typ: "counter", stamped: true, has: hasPSI,
			value: func(c *cadvisorSeries) float64 { return micros(c.st.psiCPU.some.total) }},
		{name: "container_pressure_memory_stalled_seconds_total", help: "Total time duration no tasks in the container could make progress due to memory congestion.", typ: "counter", stamped: true, has: hasPSI,
			value: func(c *cadvisorSeries) float64 { return micros(c.st.psiMemory.full.total) }},
		{name: "container_pressure_memory_waiting_seconds_total", help: "Total time duration tasks in the container have waited due to memory congestion.", typ: "counter", stamped: true, has: hasPSI,
			value: func(c *cadvisorSeries) float64 { return micros(c.st.psiMemory.some.total) }},
		{name: "container_pressure_io_stalled_seconds_total", help: "Total time duration no tasks in the container could make progress due to IO congestion.", typ: "counter", stamped: true, has: hasPSI,
			value: func(c *cadvisorSeries) float64 { return micros(c.st.psiIO.full.total) }},
		{name: "container_pressure_io_waiting_seconds_total", help: "Total time duration tasks in the container have waited due to IO congestion.", typ: "counter", stamped: true, has: hasPSI,
			value: func(c *cadvisorSeries) float64 { return micros(c.st.psiIO.some.total) }},
		{name: "container_spec_cpu_period", help: "CPU period of the container.", typ: "gauge",
			has:   func(c *cadvisorSeries) bool { return c.st.hasCPUSpec },
			value: func(c *cadvisorSeries) float64 { return float64(c.st.cpuPeriod) }},
		{name: "container_spec_cpu_quota", help: "CPU quota of the container.", typ: "gauge",
			has:   func(c *cadvisorSeries) bool { return c.st.hasCPUSpec && c.st.cpuQuota != 0 },
			value: func(c *cadvisorSeries) float64 { return float64(c.st.cpuQuota) }},
		{name: "container_spec_cpu_shares", help: "CPU share of the container.", typ: "gauge",
			has:   func(c *cadvisorSeries) bool { return c.st.hasCPUSpec },
			value: func(c *cadvisorSeries) float64 { return float64(c.st.cpuShares) }},
		{name: "container_spec_memory_limit_bytes", help: "Memory limit for the container.", typ: "gauge",
			has:   func(c *cadvisorSeries) bool { return c.st.hasMemSpec },
			value: func(c *cadvisorSeries) float64 { return float64(c.st.memLimit) }},
		{name: "container_start_time_seconds", help: "Start time of the container since unix epoch in seconds.", typ: "gauge", has: always,
			value: func(c *cadvisorSeries) float64 { return float64(c.start.Unix()) }},
	}
	slices.SortFunc(fs, func(a, b cadvisorFamily) int { return strings.Compare(a.name, b.name) })
	return fs
}()

// machineInfo is what machine_* report, read once (cAdvisor's cached
// MachineInfo, which kubelet serves).
type machineInfo struct {
	cores                      int
	memory                     uint64
	bootID, machineID, sysUUID string
	at                         time.Time
	err                        error
}

func readMachineInfo(procDir string, now time.Time) machineInfo {
	m := machineInfo{at: now}
	if b, err := os.ReadFile(filepath.Join(procDir, "cpuinfo")); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if k, _, ok := strings.Cut(l, ":"); ok && strings.TrimSpace(k) == "processor" {
				m.cores++
			}
		}
	} else {
		m.err = err
	}
	if b, err := os.ReadFile(filepath.Join(procDir, "meminfo")); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(l, "MemTotal:"); ok {
				if f := strings.Fields(v); len(f) > 0 {
					n, _ := strconv.ParseUint(f[0], 10, 64)
					m.memory = n * 1024
				}
			}
		}
	} else {
		m.err = err
	}
	read := func(p string) string {
		b, _ := os.ReadFile(p)
		return strings.TrimSpace(string(b))
	}
	m.bootID = read(filepath.Join(procDir, "sys/kernel/random/boot_id"))
	m.machineID = read("/etc/machine-id")
	if m.machineID == "" {
		m.machineID = read("/var/lib/dbus/machine-id")
	}
	m.sysUUID = read("/sys/class/dmi/id/product_uuid")
	return m
}

// cadvisorState is what /metrics/cadvisor keeps between scrapes.
type cadvisorState struct {
	machineOnce sync.Once
	machine     machineInfo
	// buf is the last scrape's text, reused by the next (a sync.Pool
	// would lose it at every garbage collection, which a scrape of 100
	// pods triggers); a concurrent scrape allocates its own.
	bufMu sync.Mutex
	buf   []byte
}

// collectCadvisor reads the series of one scrape: the root, then each pod
// with a running container and its running containers. scrapeErr is set
// when the containers or the root cgroup could not be read.
func (s *Server) collectCadvisor(cs []runtime.Container, now time.Time) (series []cadvisorSeries, scrapeErr bool) {
	var ms []mountinfo.Mount
	mounts := s.opts.CgroupMounts
	if mounts == nil || s.opts.StatsFsDir != "" {
		ms, _ = mountinfo.Read()
	}
	if mounts == nil {
		mounts = mountinfo.CgroupMountPoints(ms)
	}
	layout, fr := newCgroupLayout(mounts), &fileReader{}
	layout.psi = s.opts.PSI
	procDir := s.procDir()

	root := cadvisorSeries{id: "/", start: bootTime(now)}
	st, err := layout.read(fr, "/")
	if err != nil {
		scrapeErr = true
	}
	root.st = st
	if b, err := fr.read(procDir, "/1/net/dev", ""); err == nil {
		root.net, _ = parseNetDev(b, nil)
		sortNetDevs(root.net)
	}
	if s.opts.StatsFsDir != "" {
		var sfs syscall.Statfs_t
		if syscall.Statfs(s.opts.StatsFsDir, &sfs) == nil {
			dev := s.opts.StatsFsDir
			if m, ok := mountinfo.Containing(ms, s.opts.StatsFsDir); ok && m.Source != "" {
				dev = m.Source
			}
			bs := uint64(sfs.Bsize)
			root.fs = &fsSeries{device: dev, usage: (sfs.Blocks - sfs.Bfree) * bs, limit: sfs.Blocks * bs}
		}
	}
	series = make([]cadvisorSeries, 0, 1+len(cs)+len(cs)/2)
	series = append(series, root)

	podIdx := make(map[string]int, len(cs))
	for i := range cs {
		c := &cs[i]
		if c.State != runtime.StateRunning || c.CgroupsPath == "" {
			continue
		}
		cg := runtime.CgroupfsPath(c.CgroupsPath)
		st, err := layout.read(fr, cg)
		if err != nil {
			continue // exited in between
		}
		uid := string(c.Pod.UID)
		pi, ok := podIdx[uid]
		if !ok {
			// The pod's cgroup is the container's parent with either driver.
			pcg := filepath.Dir(cg)
			pst, err := layout.read(fr, pcg)
			if err == nil {
				p := cadvisorSeries{id: pcg, namespace: c.Pod.Namespace, pod: c.Pod.Name, st: pst, start: c.CreatedAt}
				series = append(series, p)
				pi = len(series) - 1
			} else {
				pi = -1
			}
			podIdx[uid] = pi
		}
		if pi >= 0 {
			p := &series[pi]
			if c.CreatedAt.Before(p.start) {
				p.start = c.CreatedAt
			}
			// The pod's network namespace, through a process in it: every
			// container of a pod shares its sandbox's.
			if p.net == nil && c.Pid > 0 {
				if b, err := fr.read(procDir, "/"+strconv.FormatUint(uint64(c.Pid), 10), "/net/dev"); err == nil {
					p.net, _ = parseNetDev(b, make([]netDev, 0, 2))
					sortNetDevs(p.net)
				}
			}
		}
		series = append(series, cadvisorSeries{container: c.Name, id: cg, image: c.Image, name: c.ID,
			namespace: c.Pod.Namespace, pod: c.Pod.Name, st: st, start: c.CreatedAt})
	}
	slices.SortFunc(series, func(a, b cadvisorSeries) int {
		return cmp.Or(strings.Compare(a.container, b.container), strings.Compare(a.id, b.id))
	})
	for i := range series {
		series[i].render()
	}
	return series, scrapeErr
}

// sortNetDevs orders interfaces by name, as a Prometheus registry orders
// a family's series.
func sortNetDevs(d []netDev) {
	slices.SortFunc(d, func(a, b netDev) int { return strings.Compare(a.name, b.name) })
}

// procDir is where /proc is (Options.ProcDir in tests).
func (s *Server) procDir() string {
	if s.opts.ProcDir != "" {
		return s.opts.ProcDir
	}
	return "/proc"
}

// metricsCadvisor serves kubelet's /metrics/cadvisor: cAdvisor's
// container_* families for the root cgroup, each pod's cgroup and each
// running container, and machine_*, read from the cgroups and the pods'
// network namespaces at the scrape, written as Prometheus text directly.
func (s *Server) metricsCadvisor(w http.ResponseWriter, r *http.Request) {
	var cs []runtime.Container
	listErr := false
	if s.opts.Containers != nil {
		var err error
		if cs, err = s.opts.Containers.ListContainers(r.Context()); err != nil {
			listErr = true
			s.log.Debug("node API: /metrics/cadvisor: listing containers", "err", err)
		}
	}
	now := s.opts.Clock.Now()
	series, scrapeErr := s.collectCadvisor(cs, now)
	s.cadvisor.machineOnce.Do(func() { s.cadvisor.machine = readMachineInfo(s.procDir(), now) })
	st := &s.cadvisor
	st.bufMu.Lock()
	buf := st.buf
	st.buf = nil
	st.bufMu.Unlock()
	buf = appendCadvisor(buf[:0], series, &st.machine, now, scrapeErr || listErr)
	w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
	_, _ = w.Write(buf)
	st.bufMu.Lock()
	st.buf = buf
	st.bufMu.Unlock()
}

// appendCadvisor appends the families in the text exposition format.
func appendCadvisor(b []byte, series []cadvisorSeries, m *machineInfo, now time.Time, scrapeErr bool) []byte {
	ts := now.UnixMilli()
	header := func(name, help, typ string) {
		b = append(b, "# HELP "...)
		b = append(b, name...)
		b = append(b, ' ')
		b = append(b, help...)
		b = append(b, "\n# TYPE "...)
		b = append(b, name...)
		b = append(b, ' ')
		b = append(b, typ...)
		b = append(b, '\n')
	}
	sample := func(v float64, stamped bool) {
		b = append(b, '}', ' ')
		b = appendFloat(b, v)
		if stamped {
			b = append(b, ' ')
			b = strconv.AppendInt(b, ts, 10)
		}
		b = append(b, '\n')
	}
	lastSeen := cadvisorFamily{name: "container_last_seen", help: "Last time a container was seen by the exporter", typ: "gauge", stamped: true, has: always,
		value: func(*cadvisorSeries) float64 { return float64(now.Unix()) }}
	written, scrapeWritten := false, false
	scrapeError := func() {
		header("container_scrape_error", "1 if there was an error while getting container metrics, 0 otherwise", "gauge")
		b = append(b, "container_scrape_error "...)
		if scrapeErr {
			b = append(b, '1')
		} else {
			b = append(b, '0')
		}
		b = append(b, '\n')
		scrapeWritten = true
	}
	family := func(f *cadvisorFamily) {
		any := false
		for i := range series {
			if f.has(&series[i]) {
				any = true
				break
			}
		}
		if !any {
			return
		}
		header(f.name, f.help, f.typ)
		for i := range series {
			c := &series[i]
			if !f.has(c) {
				continue
			}
			switch {
			case f.netValue != nil:
				for j := range c.net {
					b = append(b, f.name...)
					b = append(b, '{')
					b = append(b, c.labels[:c.split2]...)
					b = append(b, ',')
					b = appendLabel(b, "interface", c.net[j].name)
					b = append(b, c.labels[c.split2:]...)
					sample(float64(f.netValue(&c.net[j])), f.stamped)
				}
			case f.fsValue != nil:
				b = append(b, f.name...)
				b = append(b, '{')
				b = append(b, c.labels[:c.split1]...)
				b = append(b, ',')
				b = appendLabel(b, "device", c.fs.device)
				b = append(b, c.labels[c.split1:]...)
				sample(float64(f.fsValue(c.fs)), f.stamped)
			default:
				b = append(b, f.name...)
				b = append(b, '{')
				if f.cpuTotal {
					b = append(b, c.labels[:c.split1]...)
					b = append(b, `,cpu="total"`...)
					b = append(b, c.labels[c.split1:]...)
				} else {
					b = append(b, c.labels...)
				}
				sample(f.value(c), f.stamped)
			}
		}
	}
	for i := range cadvisorFamilies {
		f := &cadvisorFamilies[i]
		if !written && f.name > lastSeen.name {
			family(&lastSeen)
			written = true
		}
		// container_scrape_error in its place in the name order (a
		// registry's Gather sorts families by name).
		if !scrapeWritten && f.name > "container_scrape_error" {
			scrapeError()
		}
		family(f)
	}
	if !scrapeWritten {
		scrapeError()
	}
	machineLabels := func() {
		b = append(b, '{')
		b = appendLabel(b, "boot_id", m.bootID)
		b = append(b, ',')
		b = appendLabel(b, "machine_id", m.machineID)
		b = append(b, ',')
		b = appendLabel(b, "system_uuid", m.sysUUID)
		b = append(b, '}', ' ')
	}
	mts := m.at.UnixMilli()
	header("machine_cpu_cores", "Number of logical CPU cores.", "gauge")
	b = append(b, "machine_cpu_cores"...)
	machineLabels()
	b = strconv.AppendInt(b, int64(m.cores), 10)
	b = append(b, ' ')
	b = strconv.AppendInt(b, mts, 10)
	b = append(b, '\n')
	header("machine_memory_bytes", "Amount of memory installed on the machine.", "gauge")
	b = append(b, "machine_memory_bytes"...)
	machineLabels()
	b = appendFloat(b, float64(m.memory))
	b = append(b, ' ')
	b = strconv.AppendInt(b, mts, 10)
	b = append(b, '\n')
	header("machine_scrape_error", "1 if there was an error while getting machine metrics, 0 otherwise.", "gauge")
	if m.err != nil {
		b = append(b, "machine_scrape_error 1\n"...)
	} else {
		b = append(b, "machine_scrape_error 0\n"...)
	}
	return b
}

// appendFloat formats v as the Prometheus text format does.
func appendFloat(b []byte, v float64) []byte {
	switch v {
	case 0:
		return append(b, '0')
	case 1:
		return append(b, '1')
	}
	return strconv.AppendFloat(b, v, 'g', -1, 64)
}
