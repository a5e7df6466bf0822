package netns

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// hostnameIn reads the hostname inside the UTS namespace file p.
func hostnameIn(t *testing.T, p string) string {
	t.Helper()
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var name string
	err = onDisposableThread(func() error {
		if err := unix.Setns(int(f.Fd()), unix.CLONE_NEWUTS); err != nil {
			return err
		}
		var u unix.Utsname
		if err := unix.Uname(&u); err != nil {
			return err
		}
		name = unix.ByteSliceToString(u.Nodename[:])
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return name
}

func mountsUnder(t *testing.T, dir string) []string {
	t.Helper()
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) > 4 && strings.HasPrefix(f[4], dir) {
			out = append(out, f[4])
		}
	}
	return out
}

// CreatePod makes held IPC and UTS namespaces (new ones, the hostname set)
// and a tmpfs /dev/shm; a second call keeps them; RemovePod leaves no
// mount and no file.
func TestPodNamespacesLifecycle(t *testing.T) {
	needRoot(t)
	dir := filepath.Join(t.TempDir(), "pod")
	o := PodNamespaces{IPC: true, UTS: true, Hostname: "web-0"}
	start := time.Now()
	if err := CreatePod(dir, o); err != nil {
		t.Fatal(err)
	}
	t.Logf("CreatePod (IPC, UTS, shm) took %v", time.Since(start))
	t.Cleanup(func() { _ = RemovePod(dir) })
	ipc, uts, shm := filepath.Join(dir, IPCFile), filepath.Join(dir, UTSFile), filepath.Join(dir, ShmDir)
	if !IsNS(ipc, unix.CLONE_NEWIPC) || !IsNS(uts, unix.CLONE_NEWUTS) {
		t.Fatalf("not namespace mounts: ipc %v uts %v", IsNS(ipc, unix.CLONE_NEWIPC), IsNS(uts, unix.CLONE_NEWUTS))
	}
	if IsNS(ipc, unix.CLONE_NEWUTS) || IsNS(uts, unix.CLONE_NEWNET) {
		t.Error("IsNS ignores the namespace type")
	}
	if inode(t, ipc) == inode(t, "/proc/self/ns/ipc") || inode(t, uts) == inode(t, "/proc/self/ns/uts") {
		t.Error("the pod's namespaces are the agent's")
	}
	if got := hostnameIn(t, uts); got != "web-0" {
		t.Errorf("hostname in the pod's UTS namespace %q, want web-0", got)
	}
	host, _ := os.Hostname()
	if got, _ := os.Hostname(); got != host || host == "web-0" {
		t.Errorf("the agent's hostname changed to %q", got)
	}
	var st unix.Statfs_t
	if err := unix.Statfs(shm, &st); err != nil || st.Type != unix.TMPFS_MAGIC || st.Blocks*uint64(st.Bsize) != ShmSize {
		t.Errorf("shm: %v, type %x, size %d", err, st.Type, st.Blocks*uint64(st.Bsize))
	}
	before := [2]uint64{inode(t, ipc), inode(t, uts)}
	if err := CreatePod(dir, PodNamespaces{IPC: true, UTS: true, Hostname: "other"}); err != nil {
		t.Fatal(err)
	}
	if after := [2]uint64{inode(t, ipc), inode(t, uts)}; after != before || len(mountsUnder(t, dir)) != 3 {
		t.Errorf("a second CreatePod replaced or stacked: %v → %v, mounts %q", before, after, mountsUnder(t, dir))
	}
	if err := RemovePod(dir); err != nil {
		t.Fatal(err)
	}
	if m := mountsUnder(t, dir); len(m) > 0 {
		t.Errorf("mounts left: %q", m)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("%s left: %v", dir, err)
	}
	if err := RemovePod(dir); err != nil {
		t.Errorf("RemovePod of nothing: %v", err)
	}
}

// Only what is asked for: no UTS namespace for hostNetwork pods, no IPC
// namespace nor shm for hostIPC pods.
func TestPodNamespacesPartial(t *testing.T) {
	needRoot(t)
	dir := filepath.Join(t.TempDir(), "pod")
	if err := CreatePod(dir, PodNamespaces{IPC: true}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = RemovePod(dir) })
	if _, err := os.Stat(filepath.Join(dir, UTSFile)); !os.IsNotExist(err) {
		t.Errorf("uts made without UTS: %v", err)
	}
	if err := CreatePod(dir, PodNamespaces{UTS: true, Hostname: "h"}); err != nil {
		t.Fatal(err)
	}
	if !IsNS(filepath.Join(dir, UTSFile), unix.CLONE_NEWUTS) || !IsNS(filepath.Join(dir, IPCFile), unix.CLONE_NEWIPC) {
		t.Error("adding UTS lost or missed a namespace")
	}
	if err := RemovePod(dir); err != nil {
		t.Fatal(err)
	}
	if m := mountsUnder(t, dir); len(m) > 0 {
		t.Errorf("mounts left: %q", m)
	}
}
