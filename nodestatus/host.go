package nodestatus

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"
)

// FSStats describes a filesystem.
type FSStats struct {
	CapacityBytes, AvailableBytes uint64
	Inodes, InodesFree            uint64
}

// Host reads the facts of the machine the agent runs on. Every file is read
// below Root ("" = "/"), so tests can lay out a fake /proc, /sys and /etc in a
// temporary directory. The function fields default to the real system calls.
type Host struct {
	Root string
	// Uname returns the kernel release (uname -r).
	Uname func() (string, error)
	// Statfs returns the stats of the filesystem holding path.
	Statfs func(path string) (FSStats, error)
	// DefaultRouteIP returns the first global unicast address of the interface
	// carrying the default route. Default: /proc/net/route and the interface's addresses.
	DefaultRouteIP func() (net.IP, error)
}

func (h *Host) path(p string) string {
	if h.Root == "" {
		return p
	}
	return filepath.Join(h.Root, p)
}

func (h *Host) read(p string) ([]byte, error) { return os.ReadFile(h.path(p)) }

func (h *Host) readTrimmed(p string) (string, error) {
	b, err := h.read(p)
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(string(b)), nil
}

// MachineID returns /etc/machine-id (or the D-Bus copy).
func (h *Host) MachineID() (string, error) {
	var errs []error
	for _, p := range []string{"/etc/machine-id", "/var/lib/dbus/machine-id"} {
		s, err := h.readTrimmed(p)
		if err == nil && s != "" {
			return s, nil
		}
		if err == nil {
			err = fmt.Errorf("%s is empty", p)
		}
		errs = append(errs, err)
	}
	return "", fmt.Errorf("machine id: %w", errors.Join(errs...))
}

// SystemUUID returns the DMI product UUID (readable by root only on most systems).
func (h *Host) SystemUUID() (string, error) {
	s, err := h.readTrimmed("/sys/class/dmi/id/product_uuid")
	if err != nil {
		return "", fmt.Errorf("system uuid: %w", err)
	}
	return s, nil
}

// BootID returns the kernel's random boot id.
func (h *Host) BootID() (string, error) {
	s, err := h.readTrimmed("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return "", fmt.Errorf("boot id: %w", err)
	}
	return s, nil
}

// KernelVersion returns uname -r.
func (h *Host) KernelVersion() (string, error) {
	if h.Uname != nil {
		return h.Uname()
	}
	if h.Root != "" {
		return h.readTrimmed("/proc/sys/kernel/osrelease")
	}
	return uname()
}

// OSImage returns PRETTY_NAME from os-release, as cAdvisor does for kubelet.
func (h *Host) OSImage() (string, error) {
	var errs []error
	for _, p := range []string{"/etc/os-release", "/usr/lib/os-release"} {
		b, err := h.read(p)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		vals := parseOSRelease(b)
		if v := vals["PRETTY_NAME"]; v != "" {
			return v, nil
		}
		if v := vals["NAME"]; v != "" {
			return v, nil
		}
		return "Linux", nil
	}
	return "", fmt.Errorf("os image: %w", errors.Join(errs...))
}

func parseOSRelease(b []byte) map[string]string {
	out := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			continue
		}
		if uq, err := strconv.Unquote(v); err == nil {
			v = uq
		} else {
			v = strings.Trim(v, `'"`)
		}
		out[k] = v
	}
	return out
}

// Meminfo is the part of /proc/meminfo the agent uses, in bytes, and on a
// cgroup v2 host the root cgroup's working set.
type Meminfo struct {
	Total, Free, InactiveFile uint64
	// SwapTotal is the host's swap (cAdvisor's SwapCapacity).
	SwapTotal uint64
	// CgroupV2 is set on a host whose unified root has the memory
	// controller; CgroupV2WorkingSet is then the root cgroup's anon + file -
	// inactive_file from its memory.stat: the node working set kubelet
	// uses on v2 (runc's root statistics, which cadvisor reports; the v2
	// root has no memory.current).
	CgroupV2           bool
	CgroupV2WorkingSet uint64
}

// Available is kubelet's memory.available at node level: capacity minus the
// working set, where the working set is the memory in use minus inactive file
// pages (reclaimable without I/O). On cgroup v2 that is MemTotal minus the
// root cgroup's working set (kernel memory such as slab is not in it, as in
// kubelet); elsewhere MemFree + Inactive(file).
func (m Meminfo) Available() uint64 {
	if m.CgroupV2 {
		if m.CgroupV2WorkingSet >= m.Total {
			return 0
		}
		return m.Total - m.CgroupV2WorkingSet
	}
	return m.Free + m.InactiveFile
}

// Meminfo parses /proc/meminfo.
func (h *Host) Meminfo() (Meminfo, error) {
	b, err := h.read("/proc/meminfo")
	if err != nil {
		return Meminfo{}, fmt.Errorf("meminfo: %w", err)
	}
	var m Meminfo
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 2 {
			continue
		}
		var dst *uint64
		switch f[0] {
		case "MemTotal:":
			dst = &m.Total
		case "MemFree:":
			dst = &m.Free
		case "Inactive(file):":
			dst = &m.InactiveFile
		case "SwapTotal:":
			dst = &m.SwapTotal
		default:
			continue
		}
		v, err := strconv.ParseUint(f[1], 10, 64)
		if err != nil {
			return Meminfo{}, fmt.Errorf("meminfo: %s: %w", f[0], err)
		}
		if len(f) > 2 && f[2] == "kB" {
			v *= 1024
		}
		*dst = v
	}
	if m.Total == 0 {
		return Meminfo{}, errors.New("meminfo: no MemTotal")
	}
	if ctrls, err := h.readTrimmed("/sys/fs/cgroup/cgroup.controllers"); err == nil && slices.Contains(strings.Fields(ctrls), "memory") {
		st, err := h.read("/sys/fs/cgroup/memory.stat")
		if err != nil {
			return Meminfo{}, fmt.Errorf("cgroup v2 root memory.stat: %w", err)
		}
		vals := map[string]uint64{}
		for _, l := range strings.Split(string(st), "\n") {
			if k, v, ok := strings.Cut(l, " "); ok {
				if n, err := strconv.ParseUint(v, 10, 64); err == nil {
					vals[k] = n
				}
			}
		}
		anon, okA := vals["anon"]
		file, okF := vals["file"]
		if !okA || !okF {
			return Meminfo{}, errors.New("cgroup v2 root memory.stat: no anon or file")
		}
		usage := anon + file
		// In a cgroup namespace /sys/fs/cgroup is a non-root cgroup, which
		// has memory.current (runc reads that when it exists).
		if cur, err := h.readTrimmed("/sys/fs/cgroup/memory.current"); err == nil {
			if n, err := strconv.ParseUint(cur, 10, 64); err == nil {
				usage = n
			}
		}
		m.CgroupV2 = true
		m.CgroupV2WorkingSet = max(usage, vals["inactive_file"]) - vals["inactive_file"]
	}
	return m, nil
}

// NumCPU counts the online CPUs in /sys/devices/system/cpu/online ("0-3,5").
func (h *Host) NumCPU() (int, error) {
	s, err := h.readTrimmed("/sys/devices/system/cpu/online")
	if err != nil {
		return 0, fmt.Errorf("online cpus: %w", err)
	}
	n, err := countCPUList(s)
	if err != nil {
		return 0, fmt.Errorf("online cpus %q: %w", s, err)
	}
	return n, nil
}

func countCPUList(s string) (int, error) {
	n := 0
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := strconv.Atoi(lo)
		if err != nil {
			return 0, err
		}
		b := a
		if isRange {
			if b, err = strconv.Atoi(hi); err != nil {
				return 0, err
			}
		}
		if b < a {
			return 0, fmt.Errorf("bad range %q", part)
		}
		n += b - a + 1
	}
	if n == 0 {
		return 0, errors.New("no cpus")
	}
	return n, nil
}

// HugePages returns, per page size in bytes, the bytes pre-allocated as huge
// pages (nr_hugepages × size), for every size the kernel supports.
func (h *Host) HugePages() (map[int64]int64, error) {
	dir := h.path("/sys/kernel/mm/hugepages")
	ents, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil // kernel without huge page support
	}
	if err != nil {
		return nil, fmt.Errorf("hugepages: %w", err)
	}
	out := map[int64]int64{}
	for _, e := range ents {
		name := e.Name() // hugepages-2048kB
		if !strings.HasPrefix(name, "hugepages-") || !strings.HasSuffix(name, "kB") {
			continue
		}
		kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimPrefix(name, "hugepages-"), "kB"), 10, 64)
		if err != nil {
			return nil, fmt.Errorf("hugepages: %s: %w", name, err)
		}
		b, err := os.ReadFile(filepath.Join(dir, name, "nr_hugepages"))
		if err != nil {
			return nil, fmt.Errorf("hugepages: %w", err)
		}
		nr, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
		if err != nil {
			return nil, fmt.Errorf("hugepages: %s/nr_hugepages: %w", name, err)
		}
		out[kb*1024] = nr * kb * 1024
	}
	return out, nil
}

// HugePageResourceName returns "hugepages-2Mi" for 2 MiB pages.
func HugePageResourceName(pageSize int64) string {
	return "hugepages-" + resource.NewQuantity(pageSize, resource.BinarySI).String()
}

// PIDs returns the system-wide task limit (min of pid_max and threads-max)
// and the number of tasks, as kubelet's pid.available signal.
func (h *Host) PIDs() (limit, running int64, err error) {
	limit = -1
	for _, p := range []string{"/proc/sys/kernel/pid_max", "/proc/sys/kernel/threads-max"} {
		s, err := h.readTrimmed(p)
		if err != nil {
			continue
		}
		if v, err := strconv.ParseInt(s, 10, 64); err == nil && (limit < 0 || v < limit) {
			limit = v
		}
	}
	if limit < 0 {
		return 0, 0, errors.New("pids: neither pid_max nor threads-max readable")
	}
	s, err := h.readTrimmed("/proc/loadavg") // "1.36 3.49 4.53 2/3518 3715089"
	if err != nil {
		return 0, 0, fmt.Errorf("pids: %w", err)
	}
	f := strings.Fields(s)
	if len(f) < 4 {
		return 0, 0, fmt.Errorf("pids: malformed /proc/loadavg %q", s)
	}
	_, tot, ok := strings.Cut(f[3], "/")
	if !ok {
		return 0, 0, fmt.Errorf("pids: malformed /proc/loadavg %q", s)
	}
	running, err = strconv.ParseInt(tot, 10, 64)
	if err != nil {
		return 0, 0, fmt.Errorf("pids: %w", err)
	}
	return limit, running, nil
}

// FS returns the stats of the filesystem holding path.
func (h *Host) FS(path string) (FSStats, error) {
	if h.Statfs != nil {
		return h.Statfs(path)
	}
	return statfs(path)
}

// InternalIP returns the address of the interface carrying the default route.
func (h *Host) InternalIP() (net.IP, error) {
	if h.DefaultRouteIP != nil {
		return h.DefaultRouteIP()
	}
	iface, err := h.defaultRouteInterface()
	if err != nil {
		return nil, err
	}
	ifi, err := net.InterfaceByName(iface)
	if err != nil {
		return nil, fmt.Errorf("default route interface %s: %w", iface, err)
	}
	addrs, err := ifi.Addrs()
	if err != nil {
		return nil, fmt.Errorf("default route interface %s: %w", iface, err)
	}
	for _, a := range addrs {
		if ipn, ok := a.(*net.IPNet); ok && ipn.IP.To4() != nil && ipn.IP.IsGlobalUnicast() {
			return ipn.IP, nil
		}
	}
	return nil, fmt.Errorf("default route interface %s has no global IPv4 address", iface)
}

// defaultRouteInterface parses /proc/net/route for the IPv4 default route
// with the lowest metric.
func (h *Host) defaultRouteInterface() (string, error) {
	b, err := h.read("/proc/net/route")
	if err != nil {
		return "", fmt.Errorf("default route: %w", err)
	}
	best, bestMetric := "", int64(-1)
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		// Iface Destination Gateway Flags RefCnt Use Metric Mask ...
		if len(f) < 8 || f[0] == "Iface" || f[1] != "00000000" || f[7] != "00000000" {
			continue
		}
		flags, err := strconv.ParseUint(f[3], 16, 32)
		if err != nil || flags&0x1 == 0 { // RTF_UP
			continue
		}
		metric, err := strconv.ParseInt(f[6], 10, 64)
		if err != nil {
			continue
		}
		if bestMetric < 0 || metric < bestMetric {
			best, bestMetric = f[0], metric
		}
	}
	if best == "" {
		return "", errors.New("default route: no IPv4 default route; set nodeIP")
	}
	return best, nil
}
