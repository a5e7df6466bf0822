package cm

import (
	"fmt"
	"path"
	"strings"

	"k8s.io/apimachinery/pkg/types"
)

// CgroupName is a driver-neutral cgroup name: its components from the
// root, as kubelet's CgroupName. {"kubepods", "burstable", "pod<uid>"} is
// /kubepods/burstable/pod<uid> with cgroupfs and
// /kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod<uid>.slice
// with systemd.
type CgroupName []string

// Child returns the name of a child cgroup.
func (n CgroupName) Child(c ...string) CgroupName {
	return append(append(CgroupName{}, n...), c...)
}

// ToCgroupfs is the name as a path relative to each cgroup mount.
func (n CgroupName) ToCgroupfs() string {
	return "/" + path.Join(n...)
}

// ToSystemd is the name as a path of nested slices relative to each cgroup
// mount. Dashes in components become underscores: systemd reads a dash in
// a slice name as a level of the hierarchy.
func (n CgroupName) ToSystemd() string {
	if len(n) == 0 {
		return "/"
	}
	var dir, unit string
	for _, c := range n {
		c = strings.ReplaceAll(c, "-", "_")
		if unit == "" {
			unit = c
		} else {
			unit += "-" + c
		}
		dir += "/" + unit + ".slice"
	}
	return dir
}

// SystemdSlice is the name's own slice unit ("kubepods-burstable.slice"),
// "-.slice" for the root.
func (n CgroupName) SystemdSlice() string {
	if len(n) == 0 {
		return "-.slice"
	}
	return path.Base(n.ToSystemd())
}

// ParseRoot reads a cgroupRoot setting: a cgroupfs path ("/", "/kube") or,
// with the systemd driver, a slice path ("/kube.slice",
// "/kube.slice/kube-a.slice"; a bare "kube-a.slice" is expanded).
func ParseRoot(systemd bool, root string) (CgroupName, error) {
	if root == "" || root == "/" {
		return nil, nil
	}
	if !systemd {
		if !strings.HasPrefix(root, "/") {
			return nil, fmt.Errorf("cgroup root %q: must be an absolute path", root)
		}
		return CgroupName(strings.Split(strings.Trim(path.Clean(root), "/"), "/")), nil
	}
	last := path.Base(root)
	if !strings.HasSuffix(last, ".slice") || last == ".slice" || last == "-.slice" && root != "/-.slice" {
		return nil, fmt.Errorf("cgroup root %q: must be a systemd slice such as /kube.slice", root)
	}
	if last == "-.slice" {
		return nil, nil
	}
	var n CgroupName
	for _, c := range strings.Split(strings.TrimSuffix(last, ".slice"), "-") {
		if c == "" {
			return nil, fmt.Errorf("cgroup root %q: empty component in the slice name", root)
		}
		n = append(n, strings.ReplaceAll(c, "_", "-"))
	}
	if want := n.ToSystemd(); strings.HasPrefix(root, "/") && root != want {
		return nil, fmt.Errorf("cgroup root %q: the slice %s lives at %s", root, last, want)
	}
	return n, nil
}

// RootFor is the cgroup the agent's kubepods hierarchy lives under:
// cgroupRoot when set (ParseRoot); otherwise RootForNamespace(namespace),
// the host's root for the k8s.io namespace (kubelet's paths) and a root of
// the agent's own for any other, so that agents sharing a host never touch
// each other's QoS cgroups.
func RootFor(systemd bool, cgroupRoot, namespace string) (CgroupName, error) {
	if cgroupRoot != "" {
		return ParseRoot(systemd, cgroupRoot)
	}
	return RootForNamespace(namespace), nil
}

// RootForNamespace is the default cgroup root of an agent that uses
// containerd namespace ns: the host's root for k8s.io (kubelet's paths),
// else a root of its own, so that agents sharing a host (tests, a second
// instance) never share, update or remove each other's QoS cgroups.
func RootForNamespace(ns string) CgroupName {
	if ns == "" || ns == "k8s.io" {
		return nil
	}
	return CgroupName{"nodeagent-" + ns}
}

// PodCgroupName is the component of a pod's cgroup (kubelet's "pod<uid>").
func PodCgroupName(uid types.UID) string { return "pod" + string(uid) }
