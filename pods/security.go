package pods

import (
	"fmt"
	"os"
	"syscall"

	v1 "k8s.io/api/core/v1"

	"github.com/nodeagent/nodeagent/pods/containerspec"
)

// SecurityOptions are the node settings that shape containers' security
// (containerspec.SecurityOptions).
type SecurityOptions = containerspec.SecurityOptions

// applyFSGroup gives the pod's emptyDir volumes to its fsGroup, as
// kubelet's volume ownership does for them: group fsGroup, mode
// rwxrwsrwx (setgid, so files made inside belong to the group too). It
// changes only the volume's directory, and only when it differs
// (fsGroupChangePolicy OnRootMismatch, which is all an emptyDir that the
// pod's own processes fill needs). vols maps volume names to host paths.
func applyFSGroup(pod *v1.Pod, vols map[string]string) error {
	sc := pod.Spec.SecurityContext
	if sc == nil || sc.FSGroup == nil {
		return nil
	}
	gid := int(*sc.FSGroup)
	const mode = os.ModeDir | os.ModeSetgid | 0o777
	for _, v := range pod.Spec.Volumes {
		dir, ok := vols[v.Name]
		if v.EmptyDir == nil || !ok {
			continue
		}
		fi, err := os.Stat(dir)
		if err != nil {
			return fmt.Errorf("volume %s: %w", v.Name, err)
		}
		if st, ok := fi.Sys().(*syscall.Stat_t); ok && int(st.Gid) == gid && fi.Mode()&(os.ModeSetgid|os.ModePerm) == mode&(os.ModeSetgid|os.ModePerm) {
			continue
		}
		if err := os.Lchown(dir, -1, gid); err != nil {
			return fmt.Errorf("volume %s: fsGroup: %w", v.Name, err)
		}
		if err := os.Chmod(dir, mode); err != nil {
			return fmt.Errorf("volume %s: fsGroup: %w", v.Name, err)
		}
	}
	return nil
}
