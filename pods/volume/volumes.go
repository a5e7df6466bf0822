package volume

// Volumes of the supported subset (see the package documentation): emptyDir
// on disk or in memory (tmpfs) and hostPath with kubelet's type checks;
// projected volumes are written by the Projector (projected.go).
//
// Layout: an emptyDir volume lives at <podDir>/volumes/empty-dir/<name>, a
// projected volume at <podDir>/volumes/projected/<name>; a hostPath volume
// is the host path itself. Containers get every volume as a
// bind mount (ContainerMounts).
//
// Assumption: the agent shares its mount namespace with containerd (no
// private /tmp or mount namespace in the unit), so that the tmpfs mounts it
// makes are what runc bind-mounts into containers.

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/nodeagent/nodeagent/internal/mountinfo"
	"github.com/nodeagent/nodeagent/runtime"
)

// emptyDirPlugin is the directory of emptyDir volumes under
// <podDir>/volumes.
const emptyDirPlugin = "empty-dir"

func volumesDir(podDir string) string { return filepath.Join(podDir, "volumes") }

// SetupVolumes makes the pod's volumes ready and returns, for each volume
// name, the host path to bind-mount into containers:
//   - emptyDir with medium "": a directory <podDir>/volumes/empty-dir/<name>
//     with mode 0777 (sizeLimit is not enforced on disk);
//   - emptyDir with medium Memory: a tmpfs mounted there (nosuid, nodev;
//     tmpfs's root mode 1777 as under kubelet), of size sizeLimit when it
//     is set and positive, else tmpfs's default (half of RAM); it counts
//     against the memory of the host, not of the pod's cgroup limits;
//   - emptyDir with medium HugePages or HugePages-<size>: a hugetlbfs
//     mounted there with the page size of the pod's hugepages-<size>
//     requests (see hugePagesMountOption), as kubelet's;
//   - an emptyDir of a pod with securityContext.fsGroup then belongs to
//     that group with the setgid bit (2777 on disk, 3777 on tmpfs), its
//     contents group read-write, as kubelet's volume ownership makes it
//     (setOwnership); once, when the volume is first set up (see
//     setupEmptyDir);
//   - hostPath: the path, after the checks of its type (DirectoryOrCreate
//     creates a directory 0755, FileOrCreate an empty file 0644 and its
//     parent 0755; Directory, File, Socket, CharDevice and BlockDevice must
//     exist with that type; "" checks nothing).
//
// Secret, configMap, downwardAPI and projected volumes are skipped: the
// Projector sets them up (at <podDir>/volumes/<type>/<name>) and the
// caller merges its map.
//
// podDir must be absolute. SetupVolumes is idempotent: a second call (after
// an agent restart, say) reuses the directories and mounts that exist and
// re-mounts a tmpfs that is missing. An error names the volume; volumes set
// up before it stay (TeardownVolumes removes them). A volume's failure is a
// *MountError.
func SetupVolumes(podDir string, pod *v1.Pod) (map[string]string, error) {
	if !filepath.IsAbs(podDir) {
		return nil, fmt.Errorf("volumes: pod directory %q must be absolute", podDir)
	}
	paths := make(map[string]string, len(pod.Spec.Volumes))
	seen := make(map[string]bool, len(pod.Spec.Volumes))
	for i := range pod.Spec.Volumes {
		v := &pod.Spec.Volumes[i]
		if errs := validation.IsDNS1123Label(v.Name); len(errs) > 0 {
			return nil, fmt.Errorf("volume %q: invalid name: %s", v.Name, strings.Join(errs, "; "))
		}
		if seen[v.Name] {
			return nil, fmt.Errorf("volume %q: duplicate name", v.Name)
		}
		seen[v.Name] = true
		if isPayloadVolume(v) || isExternalVolume(v) || v.Image != nil {
			// Written by the Projector; set up by the External; image
			// volumes are mounted by the pod worker once their image is
			// pulled (ImageVolumeDir).
			continue
		}
		var (
			p   string
			err error
		)
		switch {
		case v.EmptyDir != nil && v.HostPath != nil:
			err = errors.New("more than one volume source")
		case v.EmptyDir != nil:
			p, err = setupEmptyDir(podDir, v.Name, v.EmptyDir, pod)
		case v.HostPath != nil:
			p, err = SetupHostPath(v.HostPath)
		default:
			err = errors.New("unsupported volume source (only emptyDir, hostPath, secret, configMap, downwardAPI and projected are supported)")
		}
		if err != nil {
			return nil, &MountError{Volume: v.Name, Err: err}
		}
		paths[v.Name] = p
	}
	return paths, nil
}

// emptyDirMetaDir is kubelet's directory for what it knows about an
// emptyDir volume (its "ready" file), under the pod directory.
func emptyDirMetaDir(podDir, name string) string {
	return filepath.Join(podDir, "plugins", "kubernetes.io~empty-dir", name)
}

// setupEmptyDir lays out an emptyDir volume as kubelet's emptyDir plugin
// does (SetUpAt): the directory with mode 0777; for medium Memory a tmpfs
// on it, with tmpfs's own root mode 1777 (kubelet passes no mode); then,
// with an fsGroup, the volume's ownership (setOwnership); then a "ready"
// file in the volume's meta directory. A volume that is ready (and, for
// Memory, still mounted) is left as it is, so ownership and modes are set
// once, not on every sync: what the pod's processes change later stays.
func setupEmptyDir(podDir, name string, ed *v1.EmptyDirVolumeSource, pod *v1.Pod) (string, error) {
	dir := filepath.Join(volumesDir(podDir), emptyDirPlugin, name)
	ready := filepath.Join(emptyDirMetaDir(podDir, name), "ready")
	fsGroup := fsGroupOf(pod)
	var hugeOpt string
	switch {
	case ed.Medium == v1.StorageMediumDefault, ed.Medium == v1.StorageMediumMemory:
	case isHugePagesMedium(ed.Medium):
		var err error
		if hugeOpt, err = hugePagesMountOption(ed.Medium, pod); err != nil {
			return "", fmt.Errorf("emptyDir: %w", err)
		}
	default:
		return "", fmt.Errorf("emptyDir: unsupported medium %q (only \"\", %q, %q and %q-<size> are supported)", ed.Medium, v1.StorageMediumMemory, v1.StorageMediumHugePages, v1.StorageMediumHugePages)
	}
	if _, err := os.Stat(ready); err == nil {
		switch _, derr := os.Stat(dir); {
		case derr == nil && ed.Medium == v1.StorageMediumDefault:
			return dir, nil
		case derr == nil:
			mounted, err := isMountPoint(dir)
			if err != nil {
				return "", fmt.Errorf("emptyDir: %w", err)
			}
			if mounted {
				return dir, nil
			}
		}
	}
	// kubelet's setupDir: MkdirAll's mode is filtered by the umask; every
	// user of the pod may write an emptyDir. Only the permission bits are
	// compared, so that a tmpfs already mounted there (a restart between
	// the mount and the ready file) keeps its sticky and setgid bits.
	if err := os.MkdirAll(dir, 0o777); err != nil {
		return "", fmt.Errorf("emptyDir: %w", err)
	}
	fi, err := os.Lstat(dir)
	if err != nil {
		return "", fmt.Errorf("emptyDir: %w", err)
	}
	if fi.Mode().Perm() != 0o777 {
		if err := os.Chmod(dir, 0o777); err != nil {
			return "", fmt.Errorf("emptyDir: %w", err)
		}
	}
	if ed.Medium == v1.StorageMediumMemory {
		mounted, err := isMountPoint(dir)
		if err != nil {
			return "", fmt.Errorf("emptyDir: %w", err)
		}
		if !mounted {
			var opts string
			if ed.SizeLimit != nil && ed.SizeLimit.Sign() > 0 {
				opts = "size=" + strconv.FormatInt(ed.SizeLimit.Value(), 10)
			}
			opts = withNoswap(opts)
			if err := unix.Mount("tmpfs", dir, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, opts); err != nil {
				return "", fmt.Errorf("emptyDir: mount tmpfs (%s) on %s: %w", opts, dir, err)
			}
		}
	}
	if hugeOpt != "" {
		mounted, err := isMountPoint(dir)
		if err != nil {
			return "", fmt.Errorf("emptyDir: %w", err)
		}
		if !mounted {
			if err := unix.Mount("nodev", dir, "hugetlbfs", 0, hugeOpt); err != nil {
				return "", fmt.Errorf("emptyDir: mount hugetlbfs (%s) on %s: %w", hugeOpt, dir, err)
			}
		}
	}
	if fsGroup != nil {
		SetOwnership(dir, *fsGroup)
	}
	if err := os.MkdirAll(filepath.Dir(ready), 0o750); err != nil {
		return "", fmt.Errorf("emptyDir: %w", err)
	}
	if err := os.WriteFile(ready, nil, 0o600); err != nil {
		return "", fmt.Errorf("emptyDir: %w", err)
	}
	return dir, nil
}

// SetOwnership gives everything under dir (dir included, children before
// their parent, symbolic links not followed) to group gid and adds
// read-write for user and group (0660), and for directories execute
// (0110) and setgid, so that what is created in them later belongs to the
// group too — kubelet's volume ownership for an fsGroup
// (SetVolumeOwnership, changeFilePermission; an emptyDir always gets the
// recursive change, its fsGroupChangePolicy does not apply). The mode of a
// symbolic link is not changed. As in kubelet, a file that cannot be
// changed does not fail the volume.
func SetOwnership(dir string, gid int64) {
	_ = walkDepthFirst(dir, func(p string, fi fs.FileInfo) {
		_ = os.Lchown(p, -1, int(gid))
		if fi.Mode()&fs.ModeSymlink != 0 {
			return
		}
		mask := fs.FileMode(0o660)
		if fi.IsDir() {
			mask |= fs.ModeSetgid | 0o110
		}
		_ = os.Chmod(p, fi.Mode()|mask)
	})
}

// walkDepthFirst calls fn for every file under root (root included),
// children before their directory, without following symbolic links.
func walkDepthFirst(root string, fn func(string, fs.FileInfo)) error {
	fi, err := os.Lstat(root)
	if err != nil {
		return err
	}
	if fi.IsDir() {
		es, err := os.ReadDir(root)
		if err != nil {
			return err
		}
		for _, e := range es {
			if err := walkDepthFirst(filepath.Join(root, e.Name()), fn); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return err
			}
		}
	}
	fn(root, fi)
	return nil
}

// SetupHostPath checks (or, for DirectoryOrCreate and FileOrCreate,
// creates) a hostPath volume's path as kubelet does and returns it; see
// SetupVolumes.
func SetupHostPath(hp *v1.HostPathVolumeSource) (string, error) {
	p := hp.Path
	if !filepath.IsAbs(p) {
		return "", fmt.Errorf("hostPath: path %q must be absolute", p)
	}
	p = filepath.Clean(p)
	typ := v1.HostPathUnset
	if hp.Type != nil {
		typ = *hp.Type
	}
	// The file types each check accepts.
	want := map[v1.HostPathType]fs.FileMode{
		v1.HostPathDirectory:         fs.ModeDir,
		v1.HostPathSocket:            fs.ModeSocket,
		v1.HostPathCharDev:           fs.ModeDevice | fs.ModeCharDevice,
		v1.HostPathBlockDev:          fs.ModeDevice,
		v1.HostPathFile:              0, // regular
		v1.HostPathFileOrCreate:      0,
		v1.HostPathDirectoryOrCreate: fs.ModeDir,
	}
	names := map[v1.HostPathType]string{
		v1.HostPathDirectory: "a directory", v1.HostPathDirectoryOrCreate: "a directory",
		v1.HostPathFile: "a regular file", v1.HostPathFileOrCreate: "a regular file",
		v1.HostPathSocket: "a socket", v1.HostPathCharDev: "a character device", v1.HostPathBlockDev: "a block device",
	}
	switch typ {
	case v1.HostPathUnset:
		return p, nil
	case v1.HostPathDirectoryOrCreate:
		if err := os.MkdirAll(p, 0o755); err != nil {
			return "", fmt.Errorf("hostPath %s (type %s): %w", p, typ, err)
		}
	case v1.HostPathFileOrCreate:
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return "", fmt.Errorf("hostPath %s (type %s): %w", p, typ, err)
		}
		// O_EXCL: never open (and so never block on) an existing FIFO or
		// device; an existing path is checked below.
		f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
		switch {
		case err == nil:
			f.Close()
		case !errors.Is(err, fs.ErrExist):
			return "", fmt.Errorf("hostPath %s (type %s): %w", p, typ, err)
		}
	case v1.HostPathDirectory, v1.HostPathFile, v1.HostPathSocket, v1.HostPathCharDev, v1.HostPathBlockDev:
	default:
		return "", fmt.Errorf("hostPath %s: unknown type %q", p, typ)
	}
	fi, err := os.Stat(p)
	if err != nil {
		return "", fmt.Errorf("hostPath %s (type %s): %w", p, typ, err)
	}
	if got := fi.Mode().Type(); got != want[typ] {
		return "", fmt.Errorf("hostPath %s (type %s): is not %s (mode %s)", p, typ, names[typ], fi.Mode())
	}
	return p, nil
}

// TeardownVolumes unmounts every mount under <podDir>/volume-subpaths (the
// bind mounts of subPaths) and <podDir>/volumes (the tmpfs of Memory
// emptyDirs and of secret, configMap, downwardAPI and projected volumes)
// and removes those directories with the emptyDirs' data. hostPath volumes
// are not touched. It refuses to remove anything while a mount remains
// under a directory. A missing directory is not an error.
func TeardownVolumes(podDir string) error {
	if !filepath.IsAbs(podDir) {
		return fmt.Errorf("volumes: pod directory %q must be absolute", podDir)
	}
	// Subpath binds first: they may be mounts of volume paths.
	for _, dir := range []string{filepath.Join(podDir, subPathsDir), volumesDir(podDir)} {
		if err := unmountAndRemove(dir); err != nil {
			return fmt.Errorf("volumes: %w", err)
		}
	}
	return nil
}

func unmountAndRemove(dir string) error {
	if _, err := os.Lstat(dir); errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	// mountinfo shows resolved paths.
	resolved, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return err
	}
	for attempt := 0; ; attempt++ {
		mps, err := mountsUnder(resolved)
		if err != nil {
			return err
		}
		if len(mps) == 0 {
			break
		}
		if attempt == 8 {
			return fmt.Errorf("%s still has mounts after unmounting: %s", dir, strings.Join(mps, ", "))
		}
		// Deepest first.
		sort.Slice(mps, func(i, j int) bool { return len(mps[i]) > len(mps[j]) })
		for _, mp := range mps {
			if err := unix.Unmount(mp, 0); err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
				return fmt.Errorf("unmount %s: %w", mp, err)
			}
		}
	}
	return os.RemoveAll(dir)
}

// ContainerMounts turns a container's volumeMounts into the runtime's bind
// mounts, with the host paths SetupVolumes returned (vols). readOnly and
// mountPropagation (see Propagation) are honoured. A mount of an unknown
// volume, a relative or duplicate mountPath, an invalid mountPropagation
// (see Propagation), or a feature outside the supported subset (subPath,
// subPathExpr, recursiveReadOnly other than Disabled) is an error naming
// the container and the mount.
func ContainerMounts(c *v1.Container, vols map[string]string) ([]runtime.Mount, error) {
	out := make([]runtime.Mount, 0, len(c.VolumeMounts))
	seen := make(map[string]bool, len(c.VolumeMounts))
	for _, m := range c.VolumeMounts {
		fail := func(format string, args ...any) error {
			return fmt.Errorf("container %q: volumeMount %q at %q: %s", c.Name, m.Name, m.MountPath, fmt.Sprintf(format, args...))
		}
		host, ok := vols[m.Name]
		switch {
		case !ok:
			return nil, fail("no volume named %q", m.Name)
		case !path.IsAbs(m.MountPath):
			return nil, fail("mountPath must be absolute")
		case seen[path.Clean(m.MountPath)]:
			return nil, fail("duplicate mountPath")
		case m.SubPath != "" || m.SubPathExpr != "":
			return nil, fail("subPath and subPathExpr are not supported")
		case m.RecursiveReadOnly != nil && *m.RecursiveReadOnly != v1.RecursiveReadOnlyDisabled:
			return nil, fail("recursiveReadOnly %s is not supported", *m.RecursiveReadOnly)
		}
		prop, err := Propagation(m.MountPropagation, c)
		if err != nil {
			return nil, fail("%v", err)
		}
		seen[path.Clean(m.MountPath)] = true
		out = append(out, runtime.Mount{HostPath: host, ContainerPath: m.MountPath, ReadOnly: m.ReadOnly, Propagation: prop})
	}
	return out, nil
}

// Propagation maps a volumeMount's mountPropagation to the runtime's, as
// kubelet does (translateMountPropagation): unset and None are private,
// HostToContainer is rslave, Bidirectional rshared. Another value is
// kubelet's error. Bidirectional in a container that is not privileged is
// refused with the API server's message (the API server refuses such a pod
// and kubelet refuses such a static pod; see source.ValidatePod): it would
// let the container mount over the host's directories.
func Propagation(mode *v1.MountPropagationMode, c *v1.Container) (runtime.Propagation, error) {
	switch {
	case mode == nil, *mode == v1.MountPropagationNone:
		return runtime.PropagationPrivate, nil
	case *mode == v1.MountPropagationHostToContainer:
		return runtime.PropagationHostToContainer, nil
	case *mode == v1.MountPropagationBidirectional:
		if sc := c.SecurityContext; sc == nil || sc.Privileged == nil || !*sc.Privileged {
			return 0, errors.New(BidirectionalNotPrivileged)
		}
		return runtime.PropagationBidirectional, nil
	}
	return 0, fmt.Errorf("invalid MountPropagation mode: %q", *mode)
}

// BidirectionalNotPrivileged is the API server's message (pod validation)
// for a Bidirectional mountPropagation in a container that is not
// privileged.
const BidirectionalNotPrivileged = "Bidirectional mount propagation is available only to privileged containers"

// isMountPoint reports whether dir is a mount point.
func isMountPoint(dir string) (bool, error) {
	resolved, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return false, err
	}
	mps, err := readMountPoints()
	if err != nil {
		return false, err
	}
	for _, mp := range mps {
		if mp == resolved {
			return true, nil
		}
	}
	return false, nil
}

// mountsUnder lists the mount points strictly below dir.
func mountsUnder(dir string) ([]string, error) {
	ms, err := mountinfo.Read()
	if err != nil {
		return nil, err
	}
	return mountinfo.MountPointsUnder(ms, dir), nil
}

// readMountPoints returns the mount points of the agent's mount namespace,
// unescaped.
func readMountPoints() ([]string, error) {
	ms, err := mountinfo.Read()
	if err != nil {
		return nil, err
	}
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = m.MountPoint
	}
	return out, nil
}

// ImageVolumeDir is where the image volume name of the pod in podDir is
// mounted on the host (read-only), kubelet's plugin directory layout:
// <podDir>/volumes/kubernetes.io~image/<name>.
func ImageVolumeDir(podDir, name string) string {
	return filepath.Join(podDir, "volumes", "kubernetes.io~image", name)
}
