package volume

// subPath and subPathExpr: a container may mount a path inside a volume
// instead of the whole volume. As kubelet does, the path is resolved on the
// host with its symlinks and must stay inside the volume; a missing path is
// created as a directory (with the mode of the volume's root); then the
// resolved path is opened component by component without following
// symlinks and that open file is bind-mounted at
// <podDir>/volume-subpaths/<volume>/<container>/<mount index>, which is
// what the container gets. A container that swaps a directory of the
// volume for a symlink between the check and the mount therefore cannot
// make the agent mount a host path outside the volume.

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
	v1 "k8s.io/api/core/v1"

	"github.com/nodeagent/nodeagent/runtime"
)

// subPathsDir holds the bind mounts of subPaths under the pod directory
// (kubelet's name).
const subPathsDir = "volume-subpaths"

// ContainerMountsWithSubPaths is ContainerMounts for containers whose
// volumeMounts may use subPath or subPathExpr: it prepares their bind
// mounts under podDir (see the top of this file). expand expands a
// subPathExpr with the container's environment ($(VAR)); it must fail
// when a variable has no value. An expanded subPath that is absolute or
// has a ".." component is an error, as is a subPath that leaves the
// volume through a symlink.
func ContainerMountsWithSubPaths(podDir string, c *v1.Container, vols map[string]string, expand func(string) (string, error)) ([]runtime.Mount, error) {
	plain := *c
	plain.VolumeMounts = make([]v1.VolumeMount, len(c.VolumeMounts))
	for i, m := range c.VolumeMounts {
		m.SubPath, m.SubPathExpr = "", ""
		plain.VolumeMounts[i] = m
	}
	mounts, err := ContainerMounts(&plain, vols)
	if err != nil {
		return nil, err
	}
	for i, m := range c.VolumeMounts {
		sub := m.SubPath
		if m.SubPathExpr != "" {
			if sub != "" {
				return nil, fmt.Errorf("container %q: volumeMount %q: subPath and subPathExpr are mutually exclusive", c.Name, m.Name)
			}
			if expand == nil {
				return nil, fmt.Errorf("container %q: volumeMount %q: subPathExpr cannot be expanded", c.Name, m.Name)
			}
			if sub, err = expand(m.SubPathExpr); err != nil {
				return nil, fmt.Errorf("container %q: volumeMount %q: subPathExpr %q: %w", c.Name, m.Name, m.SubPathExpr, err)
			}
		}
		if sub == "" {
			continue
		}
		target := filepath.Join(podDir, subPathsDir, m.Name, c.Name, strconv.Itoa(i))
		host, err := PrepareSubPath(vols[m.Name], sub, target)
		if err != nil {
			return nil, fmt.Errorf("container %q: volumeMount %q: %w", c.Name, m.Name, err)
		}
		mounts[i].HostPath = host
	}
	return mounts, nil
}

// ValidateSubPath checks kubelet's rules for a (expanded) subPath: relative
// and without ".." components.
func ValidateSubPath(sub string) error {
	if path.IsAbs(sub) {
		return fmt.Errorf("error SubPath `%s` must not be an absolute path", sub)
	}
	for _, c := range strings.Split(sub, "/") {
		if c == ".." {
			return fmt.Errorf("unable to provision SubPath `%s`: must not contain '..'", sub)
		}
	}
	return nil
}

// PrepareSubPath makes <volume>/<sub> safe to give a container and returns
// the host path to bind-mount: target, a bind mount of it (see the top of
// this file). A missing <volume>/<sub> is created as a directory.
func PrepareSubPath(volume, sub, target string) (string, error) {
	if err := ValidateSubPath(sub); err != nil {
		return "", err
	}
	full := filepath.Join(volume, sub)
	if _, err := os.Stat(full); errors.Is(err, fs.ErrNotExist) {
		fi, err := os.Stat(volume)
		if err != nil {
			return "", fmt.Errorf("subPath %q: %w", sub, err)
		}
		if err := safeMakeDir(volume, sub, fi.Mode().Perm()); err != nil {
			return "", fmt.Errorf("failed to create subPath directory %q: %w", sub, err)
		}
	} else if err != nil {
		return "", fmt.Errorf("subPath %q: %w", sub, err)
	}
	base, err := filepath.EvalSymlinks(volume)
	if err != nil {
		return "", fmt.Errorf("subPath %q: %w", sub, err)
	}
	resolved, err := filepath.EvalSymlinks(full)
	if err != nil {
		return "", fmt.Errorf("subPath %q: %w", sub, err)
	}
	if !within(resolved, base) {
		return "", fmt.Errorf("subpath %q not within volume path %q", resolved, base)
	}
	fd, err := safeOpen(base, resolved)
	if err != nil {
		return "", fmt.Errorf("subPath %q: %w", sub, err)
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return "", fmt.Errorf("subPath %q: %w", sub, err)
	}
	if err := makeTarget(target, st.Mode&unix.S_IFMT == unix.S_IFDIR); err != nil {
		return "", fmt.Errorf("subPath %q: %w", sub, err)
	}
	src := "/proc/self/fd/" + strconv.Itoa(fd)
	if err := unix.Mount(src, target, "", unix.MS_BIND, ""); err != nil {
		return "", fmt.Errorf("subPath %q: bind %s to %s: %w", sub, resolved, target, err)
	}
	return target, nil
}

// makeTarget makes target an unmounted directory or file to bind a
// subPath on (a mount left by an earlier attempt of the container is
// removed: the new attempt gets the path as it resolves now).
func makeTarget(target string, dir bool) error {
	for range 8 {
		mounted, err := isMountPoint(target)
		if errors.Is(err, fs.ErrNotExist) {
			break
		}
		if err != nil {
			return err
		}
		if !mounted {
			break
		}
		if err := unix.Unmount(target, unix.MNT_DETACH); err != nil {
			return fmt.Errorf("unmount %s: %w", target, err)
		}
	}
	if fi, err := os.Lstat(target); err == nil && fi.IsDir() != dir {
		if err := os.Remove(target); err != nil {
			return err
		}
	}
	if err := os.MkdirAll(filepath.Dir(target), 0o750); err != nil {
		return err
	}
	if dir {
		return os.MkdirAll(target, 0o750)
	}
	f, err := os.OpenFile(target, os.O_CREATE|os.O_RDONLY, 0o640)
	if err != nil {
		return err
	}
	return f.Close()
}

// within reports whether p is base or below it (both clean and absolute).
func within(p, base string) bool {
	return p == base || strings.HasPrefix(p, strings.TrimSuffix(base, "/")+"/")
}

// safeOpen opens p (below base; both resolved) with O_PATH, one component
// at a time from base without following symlinks: a component that is a
// symlink (swapped in since p was resolved) is an error.
func safeOpen(base, p string) (int, error) {
	rel, err := filepath.Rel(base, p)
	if err != nil {
		return -1, err
	}
	fd, err := unix.Open(base, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, fmt.Errorf("open %s: %w", base, err)
	}
	if rel == "." {
		return fd, nil
	}
	cur := base
	for _, c := range strings.Split(rel, "/") {
		cur = filepath.Join(cur, c)
		next, err := unix.Openat(fd, c, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		unix.Close(fd)
		if err != nil {
			return -1, fmt.Errorf("open %s: %w", cur, err)
		}
		var st unix.Stat_t
		if err := unix.Fstat(next, &st); err != nil {
			unix.Close(next)
			return -1, err
		}
		if st.Mode&unix.S_IFMT == unix.S_IFLNK {
			unix.Close(next)
			return -1, fmt.Errorf("%s is a symlink (changed while it was being mounted)", cur)
		}
		fd = next
	}
	return fd, nil
}

// safeMakeDir creates the missing directories of base/sub with mode perm:
// the part that exists must resolve inside base, and the new directories
// are made relative to a descriptor of it, never through a symlink.
func safeMakeDir(base, sub string, perm fs.FileMode) error {
	existing := filepath.Join(base, sub)
	var missing []string
	for {
		if _, err := os.Lstat(existing); err == nil {
			break
		} else if !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		missing = append([]string{filepath.Base(existing)}, missing...)
		existing = filepath.Dir(existing)
	}
	rbase, err := filepath.EvalSymlinks(base)
	if err != nil {
		return err
	}
	rexisting, err := filepath.EvalSymlinks(existing)
	if err != nil {
		return err
	}
	if !within(rexisting, rbase) {
		return fmt.Errorf("%s is not within volume path %s", rexisting, rbase)
	}
	fd, err := safeOpen(rbase, rexisting)
	if err != nil {
		return err
	}
	defer func() { unix.Close(fd) }()
	for _, c := range missing {
		if err := unix.Mkdirat(fd, c, uint32(perm)); err != nil && !errors.Is(err, unix.EEXIST) {
			return fmt.Errorf("mkdir %s: %w", c, err)
		}
		next, err := unix.Openat(fd, c, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			return fmt.Errorf("open %s: %w", c, err)
		}
		unix.Close(fd)
		fd = next
		// Mkdirat's mode is filtered by the umask.
		if err := unix.Fchmodat(unix.AT_FDCWD, "/proc/self/fd/"+strconv.Itoa(fd), uint32(perm), 0); err != nil {
			return fmt.Errorf("chmod %s: %w", c, err)
		}
	}
	return nil
}
