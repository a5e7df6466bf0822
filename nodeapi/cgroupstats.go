package nodeapi

import (
	"bytes"
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"syscall"
	"unsafe"
)

// cgroupStats is one cgroup's statistics as /metrics/resource,
// /stats/summary and /metrics/cadvisor report them, with cAdvisor's
// meaning (runc's libcontainer statistics, as cAdvisor converts them).
type cgroupStats struct {
	hasCPU bool
	// cpuNanos is the cumulative CPU time; user and system too (v1:
	// cpuacct.stat in USER_HZ ticks, v2: cpu.stat user_usec/system_usec).
	cpuNanos, userNanos, systemNanos uint64
	// CFS bandwidth: nr_periods, nr_throttled, throttled time.
	periods, throttledPeriods, throttledNanos uint64

	hasMem     bool
	memUsage   uint64 // memory usage
	workingSet uint64 // memory usage less inactive file pages (floored at 0)
	rss        uint64 // anonymous memory (v1 total_rss, v2 anon)
	cache      uint64 // page cache (v1 total_cache, v2 file)
	swap       uint64 // v1 total_swap, v2 memory.swap.current
	failcnt    uint64 // v1 memory.failcnt; 0 on v2, as runc
	maxUsage   uint64 // v1 memory.max_usage_in_bytes, v2 memory.peak
	oomKills   uint64 // v1 memory.oom_control oom_kill, v2 memory.events oom_kill

	// The cgroup's limits, as cAdvisor's ContainerSpec: shares (v2: the
	// weight converted back to shares), CFS quota (0: none) and period in
	// microseconds, the memory limit (0: none, as cAdvisor shows a limit
	// above 2^62).
	hasCPUSpec bool
	cpuShares  uint64
	cpuQuota   uint64
	cpuPeriod  uint64
	hasMemSpec bool
	memLimit   uint64

	// Pressure stall information (cgroup v2 cpu.pressure, memory.pressure,
	// io.pressure), read when the layout asks for it (feature gate
	// KubeletPSI). As cAdvisor, a cgroup without the files (cgroup v1, a
	// kernel without PSI) has zeros, and totals stay in the files'
	// microseconds (kubelet passes cAdvisor's figure on unchanged).
	psiRead                  bool
	psiCPU, psiMemory, psiIO psiStats
}

// psiStats is one pressure file: the "some" and "full" lines.
type psiStats struct{ some, full psiData }

// psiData is one line of a pressure file.
type psiData struct {
	total                uint64 // microseconds
	avg10, avg60, avg300 float64
}

// nextLine splits b at its first newline: the line, and what follows.
func nextLine(b []byte) (line, rest []byte) {
	if i := bytes.IndexByte(b, '\n'); i >= 0 {
		return b[:i], b[i+1:]
	}
	return b, nil
}

// parsePSI parses a pressure file ("some avg10=0.00 avg60=0.00
// avg300=0.00 total=0", then "full ..."; cpu.pressure has no "full" line
// before Linux 5.13). Unknown keys and lines are ignored, as runc does.
func parsePSI(b []byte) (psiStats, error) {
	var st psiStats
	for len(b) > 0 {
		var line []byte
		line, b = nextLine(b)
		kind, rest, _ := bytes.Cut(line, []byte{' '})
		var d *psiData
		switch string(kind) {
		case "some":
			d = &st.some
		case "full":
			d = &st.full
		default:
			continue
		}
		for _, f := range bytes.Fields(rest) {
			k, v, ok := bytes.Cut(f, []byte{'='})
			if !ok {
				return st, fmt.Errorf("pressure: bad field %q", f)
			}
			var err error
			switch string(k) {
			case "avg10":
				d.avg10, err = strconv.ParseFloat(string(v), 64)
			case "avg60":
				d.avg60, err = strconv.ParseFloat(string(v), 64)
			case "avg300":
				d.avg300, err = strconv.ParseFloat(string(v), 64)
			case "total":
				d.total, err = strconv.ParseUint(string(v), 10, 64)
			}
			if err != nil {
				return st, fmt.Errorf("pressure: bad field %q: %w", f, err)
			}
		}
	}
	return st, nil
}

// cgroupUsage is the name the older readers use for the same statistics.
type cgroupUsage = cgroupStats

// cgroupLayout says which mounted hierarchy holds which controller's files,
// found once per request from the files in each mount's root, so that a
// cgroup's statistics cost one open per file that exists (a hybrid host
// has a dozen v1 hierarchies; probing each for every file would be ten
// failed opens per file).
type cgroupLayout struct {
	cpuacct []string // v1 cpuacct: cpuacct.usage, cpuacct.stat
	cpu     []string // v1 cpu: cpu.stat (throttling), cpu.shares, cpu.cfs_*
	memory  []string // v1 memory
	v2      []string // unified hierarchies with cpu.stat, memory.*
	// psi: read the pressure files too (feature gate KubeletPSI).
	psi bool
}

// newCgroupLayout classifies mounts by their root's files. A mount whose
// root has none of the marker files and no cgroup.procs (a test's fake
// tree) is tried for everything.
func newCgroupLayout(mounts []string) *cgroupLayout {
	l := &cgroupLayout{}
	exists := func(dir, f string) bool {
		var st syscall.Stat_t
		return syscall.Stat(filepath.Join(dir, f), &st) == nil
	}
	for _, m := range mounts {
		known := false
		if exists(m, "cgroup.controllers") {
			l.v2 = append(l.v2, m)
			continue
		}
		if exists(m, "cpuacct.usage") {
			l.cpuacct, known = append(l.cpuacct, m), true
		}
		if exists(m, "cpu.shares") {
			l.cpu, known = append(l.cpu, m), true
		}
		if exists(m, "memory.usage_in_bytes") {
			l.memory, known = append(l.memory, m), true
		}
		if !known && !exists(m, "cgroup.procs") {
			l.cpuacct, l.cpu, l.memory, l.v2 = append(l.cpuacct, m), append(l.cpu, m), append(l.memory, m), append(l.v2, m)
		}
	}
	return l
}

// fileReader reads small cgroup and proc files into one reused buffer:
// no allocation per file beyond its path.
type fileReader struct{ buf, path []byte }

// atFDCWD is AT_FDCWD: openat relative to the working directory (paths
// here are absolute).
const atFDCWD = ^uintptr(99) // -100

// read returns the content of the file a+b+c, valid until the next read.
// The path is built in a reused buffer and opened without a conversion.
func (r *fileReader) read(a, b, c string) ([]byte, error) {
	if r.buf == nil {
		r.buf = make([]byte, 16<<10)
	}
	r.path = append(append(append(append(r.path[:0], a...), b...), c...), 0)
	fd, _, errno := syscall.Syscall6(syscall.SYS_OPENAT, atFDCWD, uintptr(unsafe.Pointer(&r.path[0])),
		uintptr(syscall.O_RDONLY|syscall.O_CLOEXEC), 0, 0, 0)
	if errno != 0 {
		return nil, errno
	}
	defer syscall.Close(int(fd))
	n := 0
	for {
		if n == len(r.buf) {
			r.buf = append(r.buf, make([]byte, len(r.buf))...)
		}
		m, err := syscall.Read(int(fd), r.buf[n:])
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			return nil, err
		}
		if m == 0 {
			return r.buf[:n], nil
		}
		n += m
	}
}

// uint reads a file holding one number ("max" reads as math.MaxUint64).
func (r *fileReader) uint(a, b, c string) (uint64, bool) {
	buf, err := r.read(a, b, c)
	if err != nil {
		return 0, false
	}
	buf = bytes.TrimSpace(buf)
	if string(buf) == "max" {
		return ^uint64(0), true
	}
	return atou(buf)
}

// atou parses a decimal number without allocating.
func atou(b []byte) (uint64, bool) {
	if len(b) == 0 || len(b) > 20 {
		return 0, false
	}
	var n uint64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		d := uint64(c - '0')
		if n > (^uint64(0)-d)/10 {
			return 0, false
		}
		n = n*10 + d
	}
	return n, true
}

// kv reads a "key value" per line file (cpu.stat, memory.stat,
// memory.events) and calls fn for each numeric value.
func (r *fileReader) kv(dir, path, file string, fn func(k []byte, v uint64)) bool {
	b, err := r.read(dir, path, file)
	if err != nil {
		return false
	}
	for len(b) > 0 {
		var line []byte
		line, b = nextLine(b)
		k, v, ok := bytes.Cut(line, []byte{' '})
		if !ok {
			continue
		}
		if n, ok := atou(bytes.TrimSpace(v)); ok {
			fn(k, n)
		}
	}
	return true
}

// userHZ is the kernel's USER_HZ, the unit of cpuacct.stat (100 on every
// architecture Linux supports; runc assumes it too).
const userHZ = 100

// maxMemorySpec is the largest limit cAdvisor shows; above it (unlimited)
// it shows 0.
const maxMemorySpec = uint64(1) << 62

// read reads the statistics of the cgroup at path ("/" is the root,
// "/kubepods/pod<uid>/<id>" a container) from whichever hierarchy has
// them: v1 controllers, or cgroup v2.
func (l *cgroupLayout) read(r *fileReader, path string) (cgroupStats, error) {
	var u cgroupStats
	cpuV2 := false
	for _, m := range l.cpuacct {
		if n, ok := r.uint(m, path, "/cpuacct.usage"); ok {
			u.cpuNanos, u.hasCPU = n, true
			r.kv(m, path, "/cpuacct.stat", func(k []byte, v uint64) {
				switch string(k) {
				case "user":
					u.userNanos = v * (1e9 / userHZ)
				case "system":
					u.systemNanos = v * (1e9 / userHZ)
				}
			})
			break
		}
	}
	if !u.hasCPU {
		for _, m := range l.v2 {
			found := false
			r.kv(m, path, "/cpu.stat", func(k []byte, v uint64) {
				switch string(k) {
				case "usage_usec":
					u.cpuNanos, found = v*1000, true
				case "user_usec":
					u.userNanos = v * 1000
				case "system_usec":
					u.systemNanos = v * 1000
				case "nr_periods":
					u.periods = v
				case "nr_throttled":
					u.throttledPeriods = v
				case "throttled_usec":
					u.throttledNanos = v * 1000
				}
			})
			if !found {
				continue
			}
			u.hasCPU, cpuV2 = true, true
			// cAdvisor's v2 spec: cpu.weight as shares, cpu.max as
			// quota and period (the root has neither).
			if w, ok := r.uint(m, path, "/cpu.weight"); ok && w >= 1 && w <= 10000 {
				u.cpuShares, u.hasCPUSpec = 2+((w-1)*262142)/9999, true
			}
			if b, err := r.read(m, path, "/cpu.max"); err == nil {
				q, p, ok := bytes.Cut(bytes.TrimSpace(b), []byte{' '})
				if ok {
					u.hasCPUSpec = true
					if string(q) != "max" {
						u.cpuQuota, _ = strconv.ParseUint(string(q), 10, 64)
					}
					u.cpuPeriod, _ = strconv.ParseUint(string(p), 10, 64)
				}
			}
			break
		}
	}
	if !cpuV2 {
		for _, m := range l.cpu {
			shares, ok := r.uint(m, path, "/cpu.shares")
			if !ok {
				continue
			}
			u.hasCPUSpec, u.cpuShares = true, shares
			u.cpuPeriod, _ = r.uint(m, path, "/cpu.cfs_period_us")
			if b, err := r.read(m, path, "/cpu.cfs_quota_us"); err == nil {
				if q, err := strconv.ParseInt(string(bytes.TrimSpace(b)), 10, 64); err == nil && q > 0 {
					u.cpuQuota = uint64(q)
				}
			}
			r.kv(m, path, "/cpu.stat", func(k []byte, v uint64) {
				switch string(k) {
				case "nr_periods":
					u.periods = v
				case "nr_throttled":
					u.throttledPeriods = v
				case "throttled_time":
					u.throttledNanos = v
				}
			})
			break
		}
	}
	l.readMemory(r, path, &u)
	if !u.hasCPU && !u.hasMem {
		return u, fmt.Errorf("cgroup %s: no cpu or memory statistics", path)
	}
	if l.psi {
		u.psiRead = true
		l.readPSI(r, path, &u)
	}
	return u, nil
}

func (l *cgroupLayout) readMemory(r *fileReader, path string, u *cgroupStats) {
	var inactive uint64
	defer func() {
		if u.hasMem && u.memUsage > inactive {
			u.workingSet = u.memUsage - inactive
		}
	}()
	for _, m := range l.memory {
		usage, ok := r.uint(m, path, "/memory.usage_in_bytes")
		if !ok {
			continue
		}
		u.memUsage, u.hasMem = usage, true
		u.maxUsage, _ = r.uint(m, path, "/memory.max_usage_in_bytes")
		u.failcnt, _ = r.uint(m, path, "/memory.failcnt")
		if lim, ok := r.uint(m, path, "/memory.limit_in_bytes"); ok {
			u.hasMemSpec = true
			if lim <= maxMemorySpec {
				u.memLimit = lim
			}
		}
		r.kv(m, path, "/memory.stat", func(k []byte, v uint64) {
			switch string(k) {
			case "total_inactive_file":
				inactive = v
			case "total_rss":
				u.rss = v
			case "total_cache":
				u.cache = v
			case "total_swap":
				u.swap = v
			}
		})
		r.kv(m, path, "/memory.oom_control", func(k []byte, v uint64) {
			if string(k) == "oom_kill" {
				u.oomKills = v
			}
		})
		return
	}
	for _, m := range l.v2 {
		usage, ok := r.uint(m, path, "/memory.current")
		if !ok {
			if path != "/" {
				continue
			}
			// The cgroup v2 root has memory.stat but no memory.current:
			// usage is anon + file, as runc's root statistics (what
			// cadvisor, and so kubelet, report for the node on v2), not
			// MemTotal - MemAvailable.
			var anon, file uint64
			haveAnon := false
			r.kv(m, path, "/memory.stat", func(k []byte, v uint64) {
				switch string(k) {
				case "anon":
					anon, haveAnon = v, true
				case "file":
					file = v
				case "inactive_file":
					inactive = v
				}
			})
			if !haveAnon {
				continue
			}
			u.memUsage, u.rss, u.cache, u.hasMem = anon+file, anon, file, true
			return
		}
		u.memUsage, u.hasMem = usage, true
		u.maxUsage, _ = r.uint(m, path, "/memory.peak")
		if lim, ok := r.uint(m, path, "/memory.max"); ok {
			u.hasMemSpec = true
			if lim <= maxMemorySpec {
				u.memLimit = lim
			}
		}
		if sw, ok := r.uint(m, path, "/memory.swap.current"); ok {
			u.swap = sw
		}
		r.kv(m, path, "/memory.stat", func(k []byte, v uint64) {
			switch string(k) {
			case "inactive_file":
				inactive = v
			case "anon":
				u.rss = v
			case "file":
				u.cache = v
			}
		})
		r.kv(m, path, "/memory.events", func(k []byte, v uint64) {
			if string(k) == "oom_kill" {
				u.oomKills = v
			}
		})
		return
	}
}

// readPSI reads the cgroup's pressure files from the first unified
// hierarchy that has any of them; a file that is missing or does not parse
// leaves zeros, as cAdvisor reports it.
func (l *cgroupLayout) readPSI(r *fileReader, path string, u *cgroupStats) {
	for _, m := range l.v2 {
		found := false
		for _, f := range []struct {
			name string
			st   *psiStats
		}{{"/cpu.pressure", &u.psiCPU}, {"/memory.pressure", &u.psiMemory}, {"/io.pressure", &u.psiIO}} {
			b, err := r.read(m, path, f.name)
			if err != nil {
				continue
			}
			found = true
			if st, err := parsePSI(b); err == nil {
				*f.st = st
			}
		}
		if found {
			return
		}
	}
}

// readCgroup reads one cgroup with a layout of its own (tests, one-off
// reads); handlers make one layout per request.
func readCgroup(mounts []string, path string) (cgroupStats, error) {
	return newCgroupLayout(mounts).read(&fileReader{}, path)
}

// netDev is one interface's counters from /proc/<pid>/net/dev.
type netDev struct {
	name                                    string
	rxBytes, rxPackets, rxErrors, rxDropped uint64
	txBytes, txPackets, txErrors, txDropped uint64
}

// ignoredNetDev reports the interfaces cAdvisor leaves out of a
// container's network statistics (lo, veth*, docker*, nerdctl*).
func ignoredNetDev(name string) bool {
	for _, p := range []string{"lo", "veth", "docker", "nerdctl"} {
		if len(name) >= len(p) && asciiLower(name[:len(p)]) == p {
			return true
		}
	}
	return false
}

func asciiLower(s string) string {
	for i := 0; i < len(s); i++ {
		if c := s[i]; 'A' <= c && c <= 'Z' {
			b := []byte(s)
			for j := i; j < len(b); j++ {
				if 'A' <= b[j] && b[j] <= 'Z' {
					b[j] += 'a' - 'A'
				}
			}
			return string(b)
		}
	}
	return s
}

// parseNetDev parses /proc/net/dev: per interface, receive bytes,
// packets, errs, drop, fifo, frame, compressed, multicast, then transmit
// bytes, packets, errs, drop, ... It appends the interfaces cAdvisor
// reports to out.
func parseNetDev(b []byte, out []netDev) ([]netDev, error) {
	var fields [16]uint64
	for len(b) > 0 {
		var line []byte
		line, b = nextLine(b)
		name, rest, ok := bytes.Cut(line, []byte{':'})
		if !ok {
			continue // the two header lines
		}
		name = bytes.TrimSpace(name)
		if ignoredNetDev(string(name)) {
			continue
		}
		n := 0
		for n < len(fields) {
			rest = bytes.TrimLeft(rest, " ")
			if len(rest) == 0 {
				break
			}
			end := bytes.IndexByte(rest, ' ')
			if end < 0 {
				end = len(rest)
			}
			v, ok := atou(rest[:end])
			if !ok {
				return out, fmt.Errorf("net/dev: interface %s: bad number %q", name, rest[:end])
			}
			fields[n], rest = v, rest[end:]
			n++
		}
		if n < 12 {
			return out, errors.New("net/dev: interface " + string(name) + ": too few fields")
		}
		out = append(out, netDev{name: string(name),
			rxBytes: fields[0], rxPackets: fields[1], rxErrors: fields[2], rxDropped: fields[3],
			txBytes: fields[8], txPackets: fields[9], txErrors: fields[10], txDropped: fields[11]})
	}
	return out, nil
}
