package runtime_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nodeagent/nodeagent/internal/netns"
	"github.com/nodeagent/nodeagent/runtime"
)

// semverAtLeast reports whether the first x.y in s is at least major.minor.
func semverAtLeast(s string, major, minor int) bool {
	m := regexp.MustCompile(`(\d+)\.(\d+)`).FindStringSubmatch(s)
	if m == nil {
		return false
	}
	a, _ := strconv.Atoi(m[1])
	b, _ := strconv.Atoi(m[2])
	return a > major || (a == major && b >= minor)
}

// SupportsUserNamespaces says yes exactly where kubelet would get a yes
// from containerd's CRI: containerd 2.0 or later with runc 1.2 or later
// (idmapped mounts). Where it says yes, a container joined to a pod's user
// namespace (internal/netns CreateUserPod, as the pod workers make it) runs
// with a non-identity uid_map, its root is not the host's root, its rootfs
// is its own and its volume is idmapped; where it says no (Debian's
// containerd 1.6 and runc 1.1 here) the pod workers refuse the pod with
// kubelet's message (pods TestWorkerUserNamespaceRefused). About 2 s.
func TestUserNamespaceAgainstContainerd(t *testing.T) {
	rt, cd := newRuntime(t)
	ctx := context.Background()
	got, err := rt.SupportsUserNamespaces(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	v, err := rt.Version(ctx)
	if err != nil {
		t.Fatal(err)
	}
	runc, err := cd.Runc()
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(runc, "--version").Output()
	if err != nil {
		t.Fatal(err)
	}
	runcVersion, _, _ := strings.Cut(string(out), "\n")
	want := semverAtLeast(v.RuntimeVersion, 2, 0) && semverAtLeast(runcVersion, 1, 2)
	t.Logf("containerd %s, %s (%s): user namespaces %v", v.RuntimeVersion, runcVersion, runc, got)
	if got != want {
		t.Fatalf("SupportsUserNamespaces = %v, want %v for containerd %s and %s", got, want, v.RuntimeVersion, runcVersion)
	}
	if !got {
		return
	}

	// The container's root (a host UID of the pod's slot) must traverse
	// the path to its bundle, as under /run/containerd (0711); the test
	// daemon's temporary directory is 0700.
	if err := os.Chmod(cd.Dir, 0o711); err != nil {
		t.Fatal(err)
	}
	const hostID = 1 << 24
	m := []netns.IDMap{{ContainerID: 0, HostID: hostID, Size: 65536}}
	dir := t.TempDir()
	podDir, netPath := filepath.Join(dir, "ns"), filepath.Join(dir, "netns", "pod")
	if err := netns.CreateUserPod(podDir, netPath, netns.PodNamespaces{IPC: true, UTS: true, Hostname: "userns-pod"}, m, m); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = netns.RemovePod(podDir); _ = netns.Remove(netPath) })
	vol := filepath.Join(dir, "vol")
	if err := os.Mkdir(vol, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(vol, "f"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	idm := []runtime.IDMapping{{ContainerID: 0, HostID: hostID, Size: 65536}}
	s := spec("userns", "c", "sh", "-c",
		`cat /proc/self/uid_map; echo uid=$(id -u); echo vol=$(stat -c %u:%g /vol/f); touch /vol/new && echo vol-write-ok; `+
			`touch /etc/rootfs-write && echo rootfs-write-ok; echo host=$(hostname); echo done; exec sleep 60`)
	s.LogPath = filepath.Join(dir, "c.log")
	s.NetNSPath = netPath
	s.PodNamespaces = runtime.PodNamespaces{IPCPath: filepath.Join(podDir, netns.IPCFile), UTSPath: filepath.Join(podDir, netns.UTSFile)}
	s.Mounts = []runtime.Mount{{HostPath: vol, ContainerPath: "/vol"}}
	s.UserNamespace = &runtime.UserNamespace{UIDs: idm, GIDs: idm, Path: filepath.Join(podDir, netns.UserFile)}
	id, err := rt.CreateContainer(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rt.RemoveContainer(context.Background(), id) })
	if err := rt.StartContainer(ctx, id); err != nil {
		t.Fatal(err)
	}
	c := waitState(t, rt, id, runtime.StateRunning)
	defer rt.StopContainer(ctx, id, 0)

	// From the host: the process's uid_map and its real UID.
	uidMap, err := os.ReadFile("/proc/" + strconv.Itoa(int(c.Pid)) + "/uid_map")
	if err != nil {
		t.Fatal(err)
	}
	if f := strings.Fields(string(uidMap)); len(f) != 3 || f[0] != "0" || f[1] != strconv.Itoa(hostID) || f[2] != "65536" {
		t.Errorf("/proc/%d/uid_map = %q, want 0 %d 65536", c.Pid, uidMap, hostID)
	}
	status, err := os.ReadFile("/proc/" + strconv.Itoa(int(c.Pid)) + "/status")
	if err != nil {
		t.Fatal(err)
	}
	wantUid := "Uid:\t" + strings.Repeat(strconv.Itoa(hostID)+"\t", 3) + strconv.Itoa(hostID)
	if !strings.Contains(string(status), wantUid) {
		t.Errorf("the container's root is not host UID %d (the host's root must not be it):\n%s", hostID, status)
	}
	var st syscall.Stat_t

	var log string
	for deadline := time.Now().Add(15 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		b, _ := os.ReadFile(s.LogPath)
		if log = string(b); strings.Contains(log, "done") {
			break
		}
	}
	for _, w := range []string{"uid=0", "vol=0:0", "vol-write-ok", "rootfs-write-ok", "host=userns-pod"} {
		if !strings.Contains(log, w) {
			t.Errorf("%q missing from the container's output:\n%s", w, log)
		}
	}
	// Written through the idmapped mount as the container's root: the
	// host's root owns it on disk.
	if err := syscall.Stat(filepath.Join(vol, "new"), &st); err != nil {
		t.Errorf("the container's file: %v", err)
	} else if st.Uid != 0 {
		t.Errorf("the container's file is owned by host UID %d on disk, want 0 (idmapped)", st.Uid)
	}
}
