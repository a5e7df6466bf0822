package netns

import (
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// ownerInode is the inode of the user namespace that owns the namespace
// file p (NS_GET_USERNS).
func ownerInode(t *testing.T, p string) uint64 {
	t.Helper()
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	fd, err := unix.IoctlRetInt(int(f.Fd()), unix.NS_GET_USERNS)
	if err != nil {
		t.Fatalf("NS_GET_USERNS %s: %v", p, err)
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		t.Fatal(err)
	}
	return st.Ino
}

// CreateUserPod makes a user namespace owning the pod's network, IPC and
// UTS namespaces (loopback up, hostname set); CreatePod and Create then
// keep them; RemovePod and Remove leave no mount.
func TestCreateUserPod(t *testing.T) {
	needRoot(t)
	base := t.TempDir()
	dir, netPath := filepath.Join(base, "pod"), filepath.Join(base, "netns", "pod")
	o := PodNamespaces{IPC: true, UTS: true, Hostname: "userns-0"}
	m := []IDMap{{ContainerID: 0, HostID: 1 << 20, Size: 65536}}
	if err := CreateUserPod(dir, netPath, o, m, m); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = RemovePod(dir); _ = Remove(netPath) })
	user := filepath.Join(dir, UserFile)
	if !IsNS(user, unix.CLONE_NEWUSER) {
		t.Fatal("no user namespace held")
	}
	if inode(t, user) == inode(t, "/proc/self/ns/user") {
		t.Fatal("the pod's user namespace is the agent's")
	}
	for _, p := range []string{netPath, filepath.Join(dir, IPCFile), filepath.Join(dir, UTSFile)} {
		if got, want := ownerInode(t, p), inode(t, user); got != want {
			t.Errorf("%s is owned by user namespace %d, want the pod's %d", p, got, want)
		}
	}
	if got := hostnameIn(t, filepath.Join(dir, UTSFile)); got != "userns-0" {
		t.Errorf("hostname %q", got)
	}
	// Again (an agent restart), then the usual calls: nothing is replaced.
	ino := inode(t, netPath)
	if err := CreateUserPod(dir, netPath, o, m, m); err != nil {
		t.Fatal(err)
	}
	if err := CreatePod(dir, o); err != nil {
		t.Fatal(err)
	}
	if err := Create(netPath); err != nil {
		t.Fatal(err)
	}
	if inode(t, netPath) != ino || ownerInode(t, filepath.Join(dir, IPCFile)) != inode(t, user) {
		t.Error("a second call replaced the pod's namespaces")
	}
	if err := RemovePod(dir); err != nil {
		t.Fatal(err)
	}
	if err := Remove(netPath); err != nil {
		t.Fatal(err)
	}
	if ms := mountsUnder(t, base); len(ms) != 0 {
		t.Errorf("mounts left: %v", ms)
	}
}

// The worker makes the user namespace before the pod's hostname is
// known: CreatePod sets it in the existing UTS namespace.
func TestCreateUserPodHostnameLater(t *testing.T) {
	needRoot(t)
	dir := filepath.Join(t.TempDir(), "pod")
	m := []IDMap{{ContainerID: 0, HostID: 1 << 20, Size: 65536}}
	if err := CreateUserPod(dir, "", PodNamespaces{IPC: true, UTS: true}, m, m); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = RemovePod(dir) })
	if err := CreatePod(dir, PodNamespaces{IPC: true, UTS: true, Hostname: "later"}); err != nil {
		t.Fatal(err)
	}
	if got := hostnameIn(t, filepath.Join(dir, UTSFile)); got != "later" {
		t.Errorf("hostname %q, want later", got)
	}
	if ownerInode(t, filepath.Join(dir, UTSFile)) != inode(t, filepath.Join(dir, UserFile)) {
		t.Error("CreatePod replaced the pod's UTS namespace")
	}
}
