package volume

import (
	"fmt"
	"path/filepath"

	"golang.org/x/sys/unix"

	"github.com/nodeagent/nodeagent/internal/mountinfo"
)

// MakeRShared makes dir (the agent's rootDir) a shared mount, as kubelet
// does with its root directory at startup (setupDataDirs, MakeRShared), so
// that a mount a container makes under a Bidirectional volume (a CSI
// plugin publishing a volume under <rootDir>/pods/…, say) propagates to the
// host and from there, through HostToContainer and Bidirectional mounts,
// into other containers; containerd refuses those mounts when their source
// is on a mount that is not shared (or a slave).
//
// When the mount dir is on is shared already (the usual case: systemd
// makes / shared) nothing changes. Otherwise dir is made rshared — after
// bind-mounting it onto itself when it is not a mount point. kubelet binds
// even a mount point and binds non-recursively; MakeRShared binds only
// when it must and recursively, so that mounts already under dir (the
// volumes of pods that ran before an upgrade) stay visible to the agent
// instead of being hidden under the new mount. Calling it again is a
// no-op. dir must exist; the mount stays after the agent exits, as
// kubelet's does.
func MakeRShared(dir string) error {
	resolved, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return fmt.Errorf("make %s a shared mount: %w", dir, err)
	}
	ms, err := mountinfo.Read()
	if err != nil {
		return fmt.Errorf("make %s a shared mount: %w", dir, err)
	}
	on, ok := mountinfo.Containing(ms, resolved)
	if !ok {
		return fmt.Errorf("make %s a shared mount: cannot find its mount point", dir)
	}
	if on.Shared() {
		return nil
	}
	if on.MountPoint != resolved {
		if err := unix.Mount(resolved, resolved, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
			return fmt.Errorf("failed to bind-mount %s: %w", resolved, err)
		}
	}
	if err := unix.Mount("", resolved, "", unix.MS_SHARED|unix.MS_REC, ""); err != nil {
		return fmt.Errorf("failed to make %s rshared: %w", resolved, err)
	}
	return nil
}
