package netns

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

func needRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root")
	}
}

// nsOf returns the inode of the network namespace of the calling thread or
// of a namespace file.
func inode(t *testing.T, path string) uint64 {
	t.Helper()
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		t.Fatal(err)
	}
	return st.Ino
}

func loFlags(t *testing.T, path string) (flags uint16, ifaces []string) {
	t.Helper()
	err := Do(path, func() error {
		fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			return err
		}
		defer unix.Close(fd)
		ifr, err := unix.NewIfreq("lo")
		if err != nil {
			return err
		}
		if err := unix.IoctlIfreq(fd, unix.SIOCGIFFLAGS, ifr); err != nil {
			return err
		}
		flags = ifr.Uint16()
		is, err := net.Interfaces()
		for _, i := range is {
			ifaces = append(ifaces, i.Name)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return flags, ifaces
}

func TestNetNSLifecycle(t *testing.T) {
	needRoot(t)
	hostNS := inode(t, "/proc/self/ns/net")
	path := filepath.Join(t.TempDir(), "netns", "pod1")
	t.Cleanup(func() { _ = Remove(path) })

	if IsNetNS(path) {
		t.Fatal("IsNetNS before Create")
	}
	if err := Create(path); err != nil {
		t.Fatal(err)
	}
	if !IsNetNS(path) {
		t.Fatal("IsNetNS after Create = false")
	}
	ns := inode(t, path)
	if ns == hostNS {
		t.Fatal("the namespace is the host's")
	}
	if got := inode(t, "/proc/self/ns/net"); got != hostNS {
		t.Fatalf("the process's namespace changed: %d, want %d", got, hostNS)
	}
	flags, ifaces := loFlags(t, path)
	if flags&unix.IFF_UP == 0 || flags&unix.IFF_LOOPBACK == 0 {
		t.Fatalf("lo flags %#x: want UP and LOOPBACK", flags)
	}
	if len(ifaces) != 1 || ifaces[0] != "lo" {
		t.Fatalf("interfaces in the namespace: %v, want only lo", ifaces)
	}

	// Idempotent: the same namespace stays, no second mount.
	if err := Create(path); err != nil {
		t.Fatal(err)
	}
	if got := inode(t, path); got != ns {
		t.Fatalf("second Create replaced the namespace (%d -> %d)", ns, got)
	}
	if n := mountsAt(t, path); n != 1 {
		t.Fatalf("%d mounts at %s after two Creates, want 1", n, path)
	}

	if err := Remove(path); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Fatalf("after Remove: stat %v", err)
	}
	if n := mountsAt(t, path); n != 0 {
		t.Fatalf("%d mounts left at %s", n, path)
	}
	if err := Remove(path); err != nil {
		t.Fatalf("Remove of a missing path: %v", err)
	}
}

// A file left behind (by a crash between creating the mount point and
// mounting) is reused; a plain file is not a namespace.
func TestNetNSCreateOverLeftoverFile(t *testing.T) {
	needRoot(t)
	path := filepath.Join(t.TempDir(), "ns")
	if err := os.WriteFile(path, nil, 0o444); err != nil {
		t.Fatal(err)
	}
	if IsNetNS(path) {
		t.Fatal("a plain file is a namespace")
	}
	if err := Remove(path); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, nil, 0o444); err != nil {
		t.Fatal(err)
	}
	if err := Create(path); err != nil {
		t.Fatal(err)
	}
	defer Remove(path)
	if !IsNetNS(path) {
		t.Fatal("not a namespace after Create")
	}
}

func TestNetNSBadInput(t *testing.T) {
	for _, f := range []func(string) error{Create, Remove} {
		if err := f("relative/ns"); err == nil {
			t.Error("relative path accepted")
		}
	}
	if err := Create(t.TempDir()); err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Errorf("Create on a directory: %v", err)
	}
	if err := Do(filepath.Join(t.TempDir(), "missing"), func() error { return nil }); err == nil {
		t.Error("Do on a missing path succeeded")
	}
	if err := Do("/proc/self/exe", func() error { return nil }); err == nil {
		t.Error("Do on a file that is not a namespace succeeded")
	}
}

func mountsAt(t *testing.T, path string) int {
	t.Helper()
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, line := range splitLines(string(b)) {
		var f [5]string
		fields := 0
		start := 0
		for i := 0; i <= len(line) && fields < 5; i++ {
			if i == len(line) || line[i] == ' ' {
				f[fields] = line[start:i]
				fields++
				start = i + 1
			}
		}
		if fields == 5 && f[4] == path {
			n++
		}
	}
	return n
}

func splitLines(s string) []string {
	var out []string
	for len(s) > 0 {
		i := 0
		for i < len(s) && s[i] != '\n' {
			i++
		}
		out = append(out, s[:i])
		if i < len(s) {
			i++
		}
		s = s[i:]
	}
	return out
}
