package runtime

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"syscall"

	"k8s.io/apimachinery/pkg/types"

	"github.com/nodeagent/nodeagent/internal/mountinfo"
)

// RemovePodCgroup removes the pod's cgroup (Options.CgroupParent/<uid>)
// from every mounted cgroup hierarchy once its containers are gone: runc
// removes each container's cgroup but not the pod's parent. A missing
// cgroup is not an error; one that still has children or processes is
// (EBUSY), so the caller retries later.
func (r *Runtime) RemovePodCgroup(uid types.UID) error {
	if uid == "" || strings.ContainsAny(string(uid), "/.") {
		return fmt.Errorf("runtime: remove pod cgroup: bad pod UID %q", uid)
	}
	rel := path.Join(r.opts.CgroupParent, string(uid))
	var errs []error
	for _, root := range cgroupMounts() {
		dir := filepath.Join(root, rel)
		// Children first: a container whose task creation was cancelled
		// can leave its (empty) cgroup behind, which would keep the pod's
		// busy forever. rmdir only ever removes empty cgroups, so a
		// container that still runs makes this fail, as it should.
		var dirs []string
		_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				dirs = append(dirs, p)
			}
			return nil
		})
		for i := len(dirs) - 1; i >= 0; i-- {
			if err := syscall.Rmdir(dirs[i]); err != nil && !errors.Is(err, os.ErrNotExist) {
				errs = append(errs, fmt.Errorf("runtime: remove pod cgroup %s: %w", dirs[i], err))
				break
			}
		}
	}
	return errors.Join(errs...)
}

// cgroupMounts lists the mount points of every cgroup (v1) and cgroup2
// filesystem; none if the mount table cannot be read.
func cgroupMounts() []string {
	ms, err := mountinfo.Read()
	if err != nil {
		return nil
	}
	return mountinfo.CgroupMountPoints(ms)
}

// removeContainerCgroup removes a removed container's own cgroup
// (cgroupfs driver) from every hierarchy, if it is still there and empty.
// runc removes it when it deletes a task, but a task whose creation was
// cut short (the agent SIGKILLed while it waited for containerd) leaves
// it behind: the next agent removes the container, never started, and
// without this its empty cgroup stayed in the pod's for the pod's life
// (found by e2e/fault's TestAgentSIGKILLedDuringPodChurn). A cgroup that
// still has processes is left alone (rmdir fails).
func (r *Runtime) removeContainerCgroup(cgroupsPath string) {
	if r.opts.SystemdCgroup || !strings.HasPrefix(cgroupsPath, "/") || strings.Contains(cgroupsPath, "..") {
		return
	}
	for _, root := range cgroupMounts() {
		_ = syscall.Rmdir(filepath.Join(root, cgroupsPath))
	}
}
