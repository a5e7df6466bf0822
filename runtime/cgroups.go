package runtime

import (
	"errors"
	"fmt"
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
		if err := syscall.Rmdir(dir); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, fmt.Errorf("runtime: remove pod cgroup %s: %w", dir, err))
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
