package runtime

import (
	"os"
	"slices"
	"strings"

	"github.com/containerd/containerd/oci"
	specs "github.com/opencontainers/runtime-spec/specs-go"
)

// cgroupMountOpts mounts the container's cgroups read-only at
// /sys/fs/cgroup, as containerd's CRI plugin does for kubelet's containers
// (read-write for privileged ones: WithWriteableCgroupfs), unless the pod
// mounts something there itself: applications read their own limits there
// (a JVM sizes its heap from memory.limit_in_bytes / memory.max), and an
// in-place resize changes them. A privileged container on cgroup v2 shares
// the host's cgroup namespace, where mounting cgroup2 applies its options
// to the host's single superblock: the host's nsdelegate and
// memory_recursiveprot are kept, as CRI does.
func cgroupMountOpts(unified, privileged bool, mounts []Mount) []oci.SpecOpts {
	if mountsAt(mounts, "/sys/fs/cgroup") {
		return nil
	}
	opts := []string{"nosuid", "noexec", "nodev", "relatime", "ro"}
	if unified && privileged {
		for _, o := range hostCgroup2SuperOptions() {
			if o == "nsdelegate" || o == "memory_recursiveprot" {
				opts = append(opts, o)
			}
		}
	}
	return []oci.SpecOpts{oci.WithMounts([]specs.Mount{{Source: "cgroup", Destination: "/sys/fs/cgroup", Type: "cgroup", Options: opts}})}
}

// hostCgroup2SuperOptions are the super options of the host's cgroup2
// mount at /sys/fs/cgroup (nil if there is none).
func hostCgroup2SuperOptions() []string {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil
	}
	for _, l := range strings.Split(string(b), "\n") {
		pre, post, ok := strings.Cut(l, " - ")
		f, g := strings.Fields(pre), strings.Fields(post)
		if !ok || len(f) < 5 || len(g) < 3 || f[4] != "/sys/fs/cgroup" || g[0] != "cgroup2" {
			continue
		}
		return slices.Collect(strings.SplitSeq(g[2], ","))
	}
	return nil
}
