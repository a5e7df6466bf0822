package netns

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"syscall"

	"golang.org/x/sys/unix"
)

// UserFile is the pod's user namespace in its namespace directory (a pod
// with hostUsers: false), beside IPCFile and UTSFile.
const UserFile = "user"

// IDMap maps Size IDs from ContainerID in a user namespace to HostID.
type IDMap struct{ ContainerID, HostID, Size int }

// CreateUserPod makes a pod's user namespace with the UID and GID
// mappings, and owned by it the pod's network namespace (at netPath, ""
// for none) and the IPC and UTS namespaces o asks for (in dir, as
// CreatePod): a container's root, in the user namespace, then has its
// capabilities over the pod's namespaces (sysfs, mqueue and sysctls work
// as in a CRI runtime's user-namespaced sandbox), and none over the
// host's. The user namespace is bind-mounted at dir/UserFile.
//
// A user namespace can only be created by a single-threaded process, so a
// child is cloned into the new namespaces and stopped before it runs
// anything (it execs this binary under ptrace and is killed at the
// exec's stop); the bind mounts keep the namespaces. Loopback is brought
// up and the hostname set from the agent's side. What is already in place
// (an agent restart) is kept: call CreatePod and Create afterwards as for
// any pod, which find the namespaces and only add the pod's /dev/shm.
func CreateUserPod(dir, netPath string, o PodNamespaces, uids, gids []IDMap) error {
	if !filepath.IsAbs(dir) || (netPath != "" && !filepath.IsAbs(netPath)) {
		return fmt.Errorf("netns: user namespace paths %q, %q must be absolute", dir, netPath)
	}
	mu.Lock()
	defer mu.Unlock()
	userPath := filepath.Join(dir, UserFile)
	if IsNS(userPath, unix.CLONE_NEWUSER) {
		return nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("netns: pod user namespace: %w", err)
	}
	flags := uintptr(unix.CLONE_NEWUSER)
	targets := map[string]string{"user": userPath}
	if netPath != "" {
		if IsNetNS(netPath) {
			return fmt.Errorf("netns: %s is a network namespace already, not owned by the pod's user namespace", netPath)
		}
		flags |= unix.CLONE_NEWNET
		targets["net"] = netPath
		if err := os.MkdirAll(filepath.Dir(netPath), 0o755); err != nil {
			return fmt.Errorf("netns: create %s: %w", netPath, err)
		}
	}
	if o.IPC {
		flags |= unix.CLONE_NEWIPC
		targets["ipc"] = filepath.Join(dir, IPCFile)
	}
	if o.UTS {
		flags |= unix.CLONE_NEWUTS
		targets["uts"] = filepath.Join(dir, UTSFile)
	}
	for _, p := range targets {
		if isNSFS(p) {
			return fmt.Errorf("netns: %s is a namespace already, not owned by the pod's user namespace", p)
		}
		f, err := os.OpenFile(p, os.O_RDONLY|os.O_CREATE, 0o444)
		if err != nil {
			return fmt.Errorf("netns: pod user namespace: %w", err)
		}
		f.Close()
	}
	// The child is traced by, and dies with (Pdeathsig), the thread that
	// forks it: keep this goroutine on that thread until it is reaped.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	pid, err := stoppedChild(flags, uids, gids)
	if err != nil {
		return fmt.Errorf("netns: pod user namespace: %w", err)
	}
	defer reap(pid)
	var errs []error
	for ns, p := range targets {
		src := fmt.Sprintf("/proc/%d/ns/%s", pid, ns)
		if err := unix.Mount(src, p, "", unix.MS_BIND, ""); err != nil {
			errs = append(errs, fmt.Errorf("bind mount %s: %w", src, err))
		}
	}
	if err := errors.Join(errs...); err != nil {
		for _, p := range targets {
			_ = unix.Unmount(p, unix.MNT_DETACH)
		}
		return fmt.Errorf("netns: pod user namespace: %w", err)
	}
	if netPath != "" {
		if err := doIn(netPath, unix.CLONE_NEWNET, loopbackUp); err != nil {
			return err
		}
	}
	if o.UTS && o.Hostname != "" {
		err := doIn(targets["uts"], unix.CLONE_NEWUTS, func() error { return unix.Sethostname([]byte(o.Hostname)) })
		if err != nil {
			return fmt.Errorf("netns: sethostname %q: %w", o.Hostname, err)
		}
	}
	return nil
}

// isNSFS reports whether p is any namespace file.
func isNSFS(p string) bool {
	var st unix.Statfs_t
	return unix.Statfs(p, &st) == nil && int64(st.Type) == unix.NSFS_MAGIC
}

// doIn runs fn on a disposable thread that joined the namespace at path.
func doIn(path string, nstype int, fn func() error) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	return onDisposableThread(func() error {
		if err := unix.Setns(int(f.Fd()), nstype); err != nil {
			return fmt.Errorf("setns %s: %w", path, err)
		}
		return fn()
	})
}

// stoppedChild clones a child into new namespaces (flags) with the ID
// mappings written by this process (with setgroups allowed, which
// containers need), and lets it exec this binary under ptrace: the kernel
// stops it at the exec, before any of its code runs.
func stoppedChild(flags uintptr, uids, gids []IDMap) (int, error) {
	self, err := os.Executable()
	if err != nil {
		self = "/proc/self/exe"
	}
	conv := func(ms []IDMap) []syscall.SysProcIDMap {
		out := make([]syscall.SysProcIDMap, 0, len(ms))
		for _, m := range ms {
			out = append(out, syscall.SysProcIDMap{ContainerID: m.ContainerID, HostID: m.HostID, Size: m.Size})
		}
		return out
	}
	// The caller's thread is locked: it traces the child, and its end
	// (the agent's crash) kills the child before it could run.
	return syscall.ForkExec(self, []string{"nodeagent-userns-holder"}, &syscall.ProcAttr{
		Env: []string{},
		Sys: &syscall.SysProcAttr{
			Cloneflags:                 flags,
			UidMappings:                conv(uids),
			GidMappings:                conv(gids),
			GidMappingsEnableSetgroups: true,
			Ptrace:                     true,
			Pdeathsig:                  syscall.SIGKILL,
		},
	})
}

// reap kills the stopped child and waits for it (bounded: a SIGKILLed
// child ends at once).
func reap(pid int) {
	_ = unix.Kill(pid, unix.SIGKILL)
	for range 100 {
		var ws unix.WaitStatus
		got, err := unix.Wait4(pid, &ws, unix.WALL, nil)
		if err != nil || (got == pid && (ws.Exited() || ws.Signaled())) {
			return
		}
	}
}
