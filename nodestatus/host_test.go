package nodestatus

import (
	"errors"
	"net"
	"os"
	"path/filepath"
	"testing"
)

// fakeHost lays out a fake /etc, /proc and /sys below a temporary root.
type fakeHost struct {
	t    *testing.T
	root string
	fs   map[string]FSStats
	*Host
}

func newFakeHost(t *testing.T) *fakeHost {
	t.Helper()
	h := &fakeHost{t: t, root: t.TempDir(), fs: map[string]FSStats{}}
	h.Host = &Host{
		Root:           h.root,
		Uname:          func() (string, error) { return "6.1.0-test-amd64", nil },
		DefaultRouteIP: func() (net.IP, error) { return net.ParseIP("10.1.2.3"), nil },
		Statfs: func(path string) (FSStats, error) {
			s, ok := h.fs[path]
			if !ok {
				return FSStats{}, errors.New("no such filesystem: " + path)
			}
			return s, nil
		},
	}
	h.write("/etc/machine-id", "0123456789abcdef0123456789abcdef\n")
	h.write("/sys/class/dmi/id/product_uuid", "4C4C4544-0042-3510-8052-B7C04F4E3132\n")
	h.write("/proc/sys/kernel/random/boot_id", "b0a7e6c4-1f2e-4a4b-9c1d-0e1f2a3b4c5d\n")
	h.write("/etc/os-release", "PRETTY_NAME=\"Debian GNU/Linux 12 (bookworm)\"\nNAME=\"Debian GNU/Linux\"\nID=debian\n")
	h.setMem(8<<30, 4<<30, 1<<30)
	h.write("/sys/devices/system/cpu/online", "0-3\n")
	h.write("/sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages", "0\n")
	h.write("/sys/kernel/mm/hugepages/hugepages-1048576kB/nr_hugepages", "0\n")
	h.write("/proc/sys/kernel/pid_max", "4194304\n")
	h.write("/proc/sys/kernel/threads-max", "62832\n")
	h.write("/proc/loadavg", "0.50 0.40 0.30 2/350 12345\n")
	h.fs["/var/lib/nodeagent"] = FSStats{CapacityBytes: 100 << 30, AvailableBytes: 60 << 30, Inodes: 1000000, InodesFree: 900000}
	return h
}

func (h *fakeHost) write(p, content string) {
	h.t.Helper()
	full := filepath.Join(h.root, p)
	if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
		h.t.Fatal(err)
	}
	if err := os.WriteFile(full, []byte(content), 0o644); err != nil {
		h.t.Fatal(err)
	}
}

func (h *fakeHost) setMem(total, free, inactiveFile uint64) {
	h.write("/proc/meminfo", "MemTotal:       "+itoa(total/1024)+" kB\nMemFree:        "+itoa(free/1024)+
		" kB\nMemAvailable:   "+itoa((free+inactiveFile)/1024)+" kB\nBuffers:          1000 kB\nInactive(file):  "+itoa(inactiveFile/1024)+" kB\n")
}

func itoa(v uint64) string {
	if v == 0 {
		return "0"
	}
	var b []byte
	for v > 0 {
		b = append([]byte{byte('0' + v%10)}, b...)
		v /= 10
	}
	return string(b)
}

func TestHostFiles(t *testing.T) {
	h := newFakeHost(t)
	for _, tc := range []struct {
		name string
		get  func() (string, error)
		want string
	}{
		{"machine-id", h.MachineID, "0123456789abcdef0123456789abcdef"},
		{"system uuid", h.SystemUUID, "4C4C4544-0042-3510-8052-B7C04F4E3132"},
		{"boot id", h.BootID, "b0a7e6c4-1f2e-4a4b-9c1d-0e1f2a3b4c5d"},
		{"kernel", h.KernelVersion, "6.1.0-test-amd64"},
		{"os image", h.OSImage, "Debian GNU/Linux 12 (bookworm)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.get()
			if err != nil || got != tc.want {
				t.Errorf("got %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}

func TestHostMachineIDFallbackAndErrors(t *testing.T) {
	h := newFakeHost(t)
	h.write("/etc/machine-id", "\n")
	h.write("/var/lib/dbus/machine-id", "dbusid\n")
	if got, err := h.MachineID(); err != nil || got != "dbusid" {
		t.Errorf("fallback: got %q, %v", got, err)
	}
	os.Remove(filepath.Join(h.root, "/var/lib/dbus/machine-id"))
	if _, err := h.MachineID(); err == nil {
		t.Error("empty machine-id and no dbus copy: want an error")
	}
	os.Remove(filepath.Join(h.root, "/sys/class/dmi/id/product_uuid"))
	if _, err := h.SystemUUID(); err == nil {
		t.Error("missing product_uuid: want an error")
	}
}

func TestHostOSImage(t *testing.T) {
	for _, tc := range []struct{ name, content, want string }{
		{"pretty name", `PRETTY_NAME="Ubuntu 24.04 LTS"`, "Ubuntu 24.04 LTS"},
		{"single quotes and comments", "# comment\nPRETTY_NAME='Fedora Linux 40'\n", "Fedora Linux 40"},
		{"name only", "NAME=Alpine\n", "Alpine"},
		{"nothing", "ID=x\n", "Linux"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newFakeHost(t)
			h.write("/etc/os-release", tc.content)
			if got, err := h.OSImage(); err != nil || got != tc.want {
				t.Errorf("got %q, %v; want %q", got, err, tc.want)
			}
		})
	}
	h := newFakeHost(t)
	os.Remove(filepath.Join(h.root, "/etc/os-release"))
	h.write("/usr/lib/os-release", "PRETTY_NAME=usr\n")
	if got, _ := h.OSImage(); got != "usr" {
		t.Errorf("usr/lib fallback: got %q", got)
	}
}

func TestHostMeminfo(t *testing.T) {
	h := newFakeHost(t)
	m, err := h.Meminfo()
	if err != nil {
		t.Fatal(err)
	}
	if m.Total != 8<<30 || m.Free != 4<<30 || m.InactiveFile != 1<<30 || m.Available() != 5<<30 {
		t.Errorf("got %+v", m)
	}
	// cgroup v2 with the memory controller: the root's memory.stat, as
	// kubelet: MemTotal - (anon + file - inactive_file), not MemFree +
	// Inactive(file) (kernel memory is not in the working set).
	h.write("/sys/fs/cgroup/cgroup.controllers", "cpuset cpu io memory pids\n")
	h.write("/sys/fs/cgroup/memory.stat", "anon 1073741824\nfile 2147483648\nkernel 536870912\ninactive_file 1073741824\n")
	if m, err = h.Meminfo(); err != nil || !m.CgroupV2 || m.CgroupV2WorkingSet != 2<<30 || m.Available() != 6<<30 {
		t.Errorf("cgroup v2: got %+v, available %d, %v", m, m.Available(), err)
	}
	h.write("/sys/fs/cgroup/memory.stat", "kernel 1\n")
	if _, err := h.Meminfo(); err == nil {
		t.Error("cgroup v2 root memory.stat without anon/file: want an error")
	}
	// A hybrid host's unified root without the memory controller: meminfo.
	h.write("/sys/fs/cgroup/cgroup.controllers", "\n")
	if m, err = h.Meminfo(); err != nil || m.CgroupV2 || m.Available() != 5<<30 {
		t.Errorf("no v2 memory controller: got %+v, %v", m, err)
	}
	h.write("/proc/meminfo", "MemTotal: 8388608 kB\nSwapTotal: 2097148 kB\nSwapFree: 2097148 kB\n")
	if m, err = h.Meminfo(); err != nil || m.SwapTotal != 2097148*1024 {
		t.Errorf("swap: got %+v, %v", m, err)
	}
	h.write("/proc/meminfo", "MemFree: 10 kB\n")
	if _, err := h.Meminfo(); err == nil {
		t.Error("no MemTotal: want an error")
	}
	h.write("/proc/meminfo", "MemTotal: x kB\n")
	if _, err := h.Meminfo(); err == nil {
		t.Error("garbage: want an error")
	}
}

func TestCountCPUList(t *testing.T) {
	for _, tc := range []struct {
		in      string
		want    int
		wantErr bool
	}{
		{"0", 1, false}, {"0-3", 4, false}, {"0-1,4,6-7", 5, false}, {"", 0, true}, {"3-1", 0, true}, {"a", 0, true},
	} {
		got, err := countCPUList(tc.in)
		if got != tc.want || (err != nil) != tc.wantErr {
			t.Errorf("countCPUList(%q) = %d, %v; want %d, err=%v", tc.in, got, err, tc.want, tc.wantErr)
		}
	}
}

func TestHostHugePages(t *testing.T) {
	h := newFakeHost(t)
	h.write("/sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages", "3\n")
	hp, err := h.HugePages()
	if err != nil {
		t.Fatal(err)
	}
	if hp[2<<20] != 6<<20 || hp[1<<30] != 0 || len(hp) != 2 {
		t.Errorf("got %v", hp)
	}
	if HugePageResourceName(2<<20) != "hugepages-2Mi" || HugePageResourceName(1<<30) != "hugepages-1Gi" {
		t.Errorf("names: %s %s", HugePageResourceName(2<<20), HugePageResourceName(1<<30))
	}
	os.RemoveAll(filepath.Join(h.root, "/sys/kernel/mm/hugepages"))
	if hp, err := h.HugePages(); err != nil || len(hp) != 0 {
		t.Errorf("no hugepage support: got %v, %v", hp, err)
	}
}

func TestHostPIDs(t *testing.T) {
	h := newFakeHost(t)
	limit, running, err := h.PIDs()
	if err != nil || limit != 62832 || running != 350 {
		t.Errorf("got %d, %d, %v", limit, running, err)
	}
	h.write("/proc/loadavg", "garbage\n")
	if _, _, err := h.PIDs(); err == nil {
		t.Error("malformed loadavg: want an error")
	}
}

func TestHostDefaultRoute(t *testing.T) {
	h := newFakeHost(t)
	h.write("/proc/net/route", "Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT\n"+
		"eth1\t00000000\t0102A8C0\t0003\t0\t0\t200\t00000000\t0\t0\t0\n"+
		"eth0\t00000000\t0101A8C0\t0003\t0\t0\t100\t00000000\t0\t0\t0\n"+
		"eth0\t0001A8C0\t00000000\t0001\t0\t0\t100\t00FFFFFF\t0\t0\t0\n")
	if got, err := h.defaultRouteInterface(); err != nil || got != "eth0" {
		t.Errorf("got %q, %v; want eth0 (lowest metric)", got, err)
	}
	h.write("/proc/net/route", "Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\n")
	if _, err := h.defaultRouteInterface(); err == nil {
		t.Error("no default route: want an error")
	}
}

func TestRealHost(t *testing.T) {
	// The real files exist on any Linux test machine; this checks the parsers
	// against the real formats.
	h := &Host{}
	if _, err := h.Meminfo(); err != nil {
		t.Error(err)
	}
	if n, err := h.NumCPU(); err != nil || n < 1 {
		t.Error(n, err)
	}
	if _, err := h.BootID(); err != nil {
		t.Error(err)
	}
	if v, err := h.KernelVersion(); err != nil || v == "" {
		t.Error(v, err)
	}
	if _, _, err := h.PIDs(); err != nil {
		t.Error(err)
	}
	if fs, err := h.FS(t.TempDir()); err != nil || fs.CapacityBytes == 0 {
		t.Error(fs, err)
	}
}
