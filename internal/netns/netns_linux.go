package netns

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sync"

	"golang.org/x/sys/unix"
)

// mu serialises Create and Remove: both test-then-act on a mount point.
var mu sync.Mutex

// IsNetNS reports whether path is a network namespace file: a bind mount of
// a namespace (nsfs) whose type is network, as Create leaves it.
func IsNetNS(path string) bool {
	var st unix.Statfs_t
	if err := unix.Statfs(path, &st); err != nil || int64(st.Type) != unix.NSFS_MAGIC {
		return false
	}
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	// NS_GET_NSTYPE answers with the CLONE_NEW* flag of the namespace.
	t, err := unix.IoctlRetInt(int(f.Fd()), unix.NS_GET_NSTYPE)
	return err == nil && t == unix.CLONE_NEWNET
}

// Create creates a new network namespace whose loopback interface is up and
// keeps it at path (an absolute path; missing parent directories are
// created). If path already holds a network namespace, Create does nothing
// and returns nil.
func Create(path string) error {
	if !filepath.IsAbs(path) {
		return fmt.Errorf("netns: path %q must be absolute", path)
	}
	mu.Lock()
	defer mu.Unlock()
	if IsNetNS(path) {
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("netns: create %s: %w", path, err)
	}
	// The mount point: an empty file (one left by an interrupted Create or
	// Remove is reused).
	if fi, err := os.Lstat(path); err == nil && !fi.Mode().IsRegular() {
		return fmt.Errorf("netns: create %s: exists and is not a regular file (%s)", path, fi.Mode().Type())
	}
	f, err := os.OpenFile(path, os.O_RDONLY|os.O_CREATE, 0o444)
	if err != nil {
		return fmt.Errorf("netns: create %s: %w", path, err)
	}
	f.Close()

	if err := onDisposableThread(func() error { return createOnThisThread(path) }); err != nil {
		_ = os.Remove(path)
		return fmt.Errorf("netns: create %s: %w", path, err)
	}
	return nil
}

// createOnThisThread moves the current (locked, disposable) thread into a new
// network namespace, brings lo up and bind-mounts the namespace on path.
func createOnThisThread(path string) error {
	if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
		return fmt.Errorf("unshare(CLONE_NEWNET): %w", err)
	}
	if err := loopbackUp(); err != nil {
		return err
	}
	src := fmt.Sprintf("/proc/self/task/%d/ns/net", unix.Gettid())
	if err := unix.Mount(src, path, "", unix.MS_BIND, ""); err != nil {
		return fmt.Errorf("bind mount %s: %w", src, err)
	}
	return nil
}

// loopbackUp sets IFF_UP on lo in the current thread's network namespace.
func loopbackUp() error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("socket: %w", err)
	}
	defer unix.Close(fd)
	ifr, err := unix.NewIfreq("lo")
	if err != nil {
		return err
	}
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFFLAGS, ifr); err != nil {
		return fmt.Errorf("get flags of lo: %w", err)
	}
	ifr.SetUint16(ifr.Uint16() | unix.IFF_UP)
	if err := unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr); err != nil {
		return fmt.Errorf("bring lo up: %w", err)
	}
	return nil
}

// Remove unmounts the namespace at path (lazily: processes still in it keep
// it alive) and deletes the file. A missing path is not an error.
func Remove(path string) error {
	if !filepath.IsAbs(path) {
		return fmt.Errorf("netns: path %q must be absolute", path)
	}
	mu.Lock()
	defer mu.Unlock()
	// Unmount until no namespace is left (a crash between two Creates may
	// have stacked mounts).
	for i := 0; i < 16 && IsNetNS(path); i++ {
		if err := unix.Unmount(path, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
			return fmt.Errorf("netns: unmount %s: %w", path, err)
		}
	}
	if IsNetNS(path) {
		return fmt.Errorf("netns: %s is still a namespace mount after unmounting", path)
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("netns: remove %s: %w", path, err)
	}
	return nil
}

// Do runs fn on a dedicated OS thread that has joined the network namespace
// at path, and returns fn's error. The thread is discarded afterwards; fn
// must not start goroutines that expect to run in the namespace (they run
// on other threads, in the agent's namespace).
func Do(path string, fn func() error) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("netns: open %s: %w", path, err)
	}
	defer f.Close()
	if !IsNetNS(path) {
		return fmt.Errorf("netns: %s is not a network namespace", path)
	}
	return onDisposableThread(func() error {
		if err := unix.Setns(int(f.Fd()), unix.CLONE_NEWNET); err != nil {
			return fmt.Errorf("netns: setns %s: %w", path, err)
		}
		return fn()
	})
}

// onDisposableThread runs fn on an OS thread that no other goroutine will
// ever use: fn's goroutine locks the thread and ends without unlocking it,
// so the Go runtime terminates the thread. fn may change the thread's
// namespaces.
//
// The process's main thread is never used: Go does not terminate it (it
// parks it forever instead), and /proc/self/ns/net and /proc/net follow the
// main thread, so leaving it in another namespace would change what the
// whole process appears to be in.
func onDisposableThread(fn func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread dies with the goroutine
		if unix.Gettid() == unix.Getpid() {
			// On the main thread: keep it locked here so that the
			// goroutine below gets another thread, then give it back.
			defer runtime.UnlockOSThread()
			inner := make(chan error, 1)
			go func() {
				runtime.LockOSThread()
				inner <- fn()
			}()
			errc <- <-inner
			return
		}
		errc <- fn()
	}()
	return <-errc
}
