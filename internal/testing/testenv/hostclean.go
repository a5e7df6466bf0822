package testenv

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/nodeagent/nodeagent/config"
	"github.com/nodeagent/nodeagent/internal/mountinfo"
)

// AgentRunDirs are the directories under /run/nodeagent that an agent on
// the containerd at endpoint (a socket path or unix:// URL), in containerd
// namespace ns, keeps for itself (config's NetNSDir and PodNSDir): its
// pods' network namespaces, and their IPC/UTS namespaces and /dev/shm.
// They outlive the agent, so a test that runs an agent must remove them.
func AgentRunDirs(endpoint, ns string) []string {
	s := config.RunDirSuffix(endpoint, ns)
	return []string{"/run/nodeagent/netns" + s, "/run/nodeagent/pods" + s}
}

// MountsUnder returns the mounts strictly below any of dirs ("fstype
// mountpoint", in the kernel's order).
func MountsUnder(dirs ...string) ([]string, error) {
	ms, err := mountinfo.Read()
	if err != nil {
		return nil, err
	}
	var out []string
	for _, m := range ms {
		for _, d := range dirs {
			if strings.HasPrefix(m.MountPoint, filepath.Clean(d)+"/") {
				out = append(out, m.FSType+" "+m.MountPoint)
				break
			}
		}
	}
	return out, nil
}

// RemoveHostLeftovers unmounts everything mounted below dirs (deepest
// first, lazily: a namespace some process still uses stays alive for it)
// and removes the directories. It is for tests' cleanups, once the agent
// that made them has stopped: an agent killed before it cleaned up after
// its pods leaves nsfs bind mounts and tmpfs mounts there, which nothing
// else would ever release. It returns what it unmounted.
func RemoveHostLeftovers(dirs ...string) ([]string, error) {
	ms, err := mountinfo.Read()
	if err != nil {
		return nil, err
	}
	var points []string
	for _, d := range dirs {
		points = append(points, mountinfo.MountPointsUnder(ms, d)...)
	}
	// Deepest first; a path mounted twice (stacked) is unmounted twice.
	sort.SliceStable(points, func(i, j int) bool { return len(points[i]) > len(points[j]) })
	var errs []error
	var done []string
	for _, p := range points {
		if err := unix.Unmount(p, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
			errs = append(errs, fmt.Errorf("unmount %s: %w", p, err))
			continue
		}
		done = append(done, p)
	}
	for _, d := range dirs {
		if err := os.RemoveAll(d); err != nil {
			errs = append(errs, err)
		}
	}
	return done, errors.Join(errs...)
}

// CleanAgentRunDirs is RemoveHostLeftovers on AgentRunDirs(endpoint, ns) for a
// test's cleanup: it logs what the agent left mounted and fails the test
// if anything stays mounted or the directories stay.
func CleanAgentRunDirs(t testing.TB, endpoint, ns string) {
	t.Helper()
	dirs := AgentRunDirs(endpoint, ns)
	done, err := RemoveHostLeftovers(dirs...)
	if len(done) > 0 {
		t.Logf("host cleanup: unmounted %d mounts the agent left under %v: %v", len(done), dirs, done)
	}
	if err != nil {
		t.Errorf("host cleanup: %v", err)
	}
	left, err := MountsUnder(dirs...)
	if err != nil {
		t.Errorf("host cleanup: %v", err)
	}
	if len(left) > 0 {
		t.Errorf("host cleanup: still mounted under %v: %v", dirs, left)
	}
	for _, d := range dirs {
		if _, err := os.Stat(d); err == nil {
			t.Errorf("host cleanup: %s still exists", d)
		}
	}
}

// UnmountRootDir lazily unmounts every mount at dir, an agent's rootDir,
// with everything below it: on a host whose / is not a shared mount the
// agent bind-mounts its rootDir onto itself to make it shared (as kubelet
// does, volume.MakeRShared), and that mount outlives the agent and keeps
// the directory from being removed. For tests' cleanups, once the agent
// has stopped. A dir that is not a mount point is left alone.
func UnmountRootDir(dir string) error {
	resolved, err := filepath.EvalSymlinks(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	// Stacked mounts go one by one; bounded.
	for range 8 {
		if err := unix.Unmount(resolved, unix.MNT_DETACH); errors.Is(err, unix.EINVAL) {
			return nil // not a mount point (any more)
		} else if err != nil {
			return fmt.Errorf("unmount %s: %w", resolved, err)
		}
	}
	return fmt.Errorf("unmount %s: still a mount point after 8 unmounts", resolved)
}
