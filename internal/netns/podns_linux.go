package netns

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// The IPC and UTS namespaces every container of a pod shares (as with a
// CRI runtime's sandbox), and the pod's /dev/shm, are kept in a directory
// of the pod:
//
//	DIR/ipc  a bind mount of the pod's IPC namespace
//	DIR/uts  a bind mount of the pod's UTS namespace (its hostname set)
//	DIR/shm  a tmpfs (the containers' /dev/shm), size ShmSize
//
// None needs a process to live: a bind-mounted namespace outlives the
// thread that made it.
const (
	IPCFile = "ipc"
	UTSFile = "uts"
	ShmDir  = "shm"
	// ShmSize is the size of a pod's /dev/shm: containerd's default for a
	// sandbox's shm (64 MiB).
	ShmSize = 64 << 20
)

// PodNamespaces says which of a pod's namespaces CreatePod makes.
type PodNamespaces struct {
	// IPC makes DIR/ipc and DIR/shm (not with hostIPC).
	IPC bool
	// UTS makes DIR/uts with Hostname set in it (not with hostNetwork:
	// such pods use the host's UTS namespace).
	UTS      bool
	Hostname string
}

// IsNS reports whether path is a bind mount of a namespace of type nstype
// (a CLONE_NEW* flag).
func IsNS(path string, nstype int) bool {
	var st unix.Statfs_t
	if err := unix.Statfs(path, &st); err != nil || int64(st.Type) != unix.NSFS_MAGIC {
		return false
	}
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	t, err := unix.IoctlRetInt(int(f.Fd()), unix.NS_GET_NSTYPE)
	return err == nil && t == nstype
}

// CreatePod makes the namespaces o asks for in dir (absolute; created if
// missing). What is already there is kept (an agent restart finds the
// running pod's namespaces): CreatePod is idempotent.
func CreatePod(dir string, o PodNamespaces) error {
	if !filepath.IsAbs(dir) {
		return fmt.Errorf("netns: pod namespace directory %q must be absolute", dir)
	}
	mu.Lock()
	defer mu.Unlock()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("netns: pod namespaces: %w", err)
	}
	var flags int
	var files []string
	if o.IPC && !IsNS(filepath.Join(dir, IPCFile), unix.CLONE_NEWIPC) {
		flags |= unix.CLONE_NEWIPC
		files = append(files, IPCFile)
	}
	if o.UTS && !IsNS(filepath.Join(dir, UTSFile), unix.CLONE_NEWUTS) {
		flags |= unix.CLONE_NEWUTS
		files = append(files, UTSFile)
	}
	for _, f := range files {
		p := filepath.Join(dir, f)
		fh, err := os.OpenFile(p, os.O_RDONLY|os.O_CREATE, 0o444)
		if err != nil {
			return fmt.Errorf("netns: pod namespaces: %w", err)
		}
		fh.Close()
	}
	if flags != 0 {
		err := onDisposableThread(func() error {
			if err := unix.Unshare(flags); err != nil {
				return fmt.Errorf("unshare: %w", err)
			}
			if flags&unix.CLONE_NEWUTS != 0 && o.Hostname != "" {
				if err := unix.Sethostname([]byte(o.Hostname)); err != nil {
					return fmt.Errorf("sethostname %q: %w", o.Hostname, err)
				}
			}
			tid := unix.Gettid()
			for _, f := range files {
				src := fmt.Sprintf("/proc/self/task/%d/ns/%s", tid, f)
				if err := unix.Mount(src, filepath.Join(dir, f), "", unix.MS_BIND, ""); err != nil {
					return fmt.Errorf("bind mount %s: %w", src, err)
				}
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("netns: pod namespaces in %s: %w", dir, err)
		}
	}
	userPod := IsNS(filepath.Join(dir, UserFile), unix.CLONE_NEWUSER)
	if userPod && flags&unix.CLONE_NEWUTS == 0 && o.UTS && o.Hostname != "" {
		// CreateUserPod made the UTS namespace before the pod's hostname
		// was known.
		err := doIn(filepath.Join(dir, UTSFile), unix.CLONE_NEWUTS, func() error { return unix.Sethostname([]byte(o.Hostname)) })
		if err != nil {
			return fmt.Errorf("netns: sethostname %q: %w", o.Hostname, err)
		}
	}
	if o.IPC {
		if err := mountShm(filepath.Join(dir, ShmDir)); err != nil {
			return fmt.Errorf("netns: pod shm: %w", err)
		}
	}
	return nil
}

// mountShm mounts the pod's /dev/shm tmpfs on p unless one is there.
func mountShm(p string) error {
	if err := os.MkdirAll(p, 0o755); err != nil {
		return err
	}
	if isMountPoint(p) {
		return nil
	}
	// containerd's sandbox shm: nosuid, nodev, noexec, mode 1777.
	data := fmt.Sprintf("mode=1777,size=%d", ShmSize)
	if err := unix.Mount("shm", p, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, data); err != nil {
		return fmt.Errorf("mount tmpfs on %s: %w", p, err)
	}
	return nil
}

// isMountPoint reports whether p is on another device than its parent.
func isMountPoint(p string) bool {
	var st, parent unix.Stat_t
	if unix.Lstat(p, &st) != nil || unix.Lstat(filepath.Dir(p), &parent) != nil {
		return false
	}
	return st.Dev != parent.Dev
}

// RemovePod unmounts and removes what CreatePod made in dir, and dir. A
// missing dir is not an error. Processes still in the namespaces keep
// them alive (the unmounts are lazy).
func RemovePod(dir string) error {
	if !filepath.IsAbs(dir) {
		return fmt.Errorf("netns: pod namespace directory %q must be absolute", dir)
	}
	mu.Lock()
	defer mu.Unlock()
	var errs []error
	for _, f := range []string{IPCFile, UTSFile, ShmDir, UserFile} {
		p := filepath.Join(dir, f)
		// Unmount until nothing is mounted (stacked mounts of an
		// interrupted create).
		for i := 0; i < 16 && (isMountPoint(p) || isNSFS(p)); i++ {
			if err := unix.Unmount(p, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
				errs = append(errs, fmt.Errorf("netns: unmount %s: %w", p, err))
				break
			}
		}
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	for _, f := range []string{IPCFile, UTSFile, ShmDir, UserFile} {
		if err := os.Remove(filepath.Join(dir, f)); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, fmt.Errorf("netns: remove %w", err))
		}
	}
	if err := os.Remove(dir); err != nil && !errors.Is(err, os.ErrNotExist) {
		errs = append(errs, fmt.Errorf("netns: remove %w", err))
	}
	return errors.Join(errs...)
}
