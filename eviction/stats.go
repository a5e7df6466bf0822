package eviction

import (
	"bufio"
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	v1 "k8s.io/api/core/v1"

	"github.com/nodeagent/nodeagent/internal/mountinfo"
	"github.com/nodeagent/nodeagent/runtime"
)

// Stats measures pods' usage on the host: memory and processes from their
// cgroups, disk from their directory (local volumes on the node
// filesystem: tmpfs and other mounts below it are not counted) and their
// container logs under RootDir.
type Stats struct {
	// RootDir holds the pods' directories (pods/<uid>) and, from agents
	// before podLogsDir, container logs (logs/).
	RootDir string
	// PodLogsDir holds the pods' container logs (kubelet's podLogsDir);
	// "" counts the old rootDir/logs layout only.
	PodLogsDir string
	// Containers lists the agent's containers (their cgroups).
	Containers func(ctx context.Context) ([]runtime.Container, error)
	// CgroupMounts are the cgroup hierarchies (nil: the host's).
	CgroupMounts []string
	// WritableLayer measures a container's writable layer
	// (runtime.Runtime.WritableLayerUsage); nil: not counted. Used by
	// LocalUsage only.
	WritableLayer func(ctx context.Context, id string) (int64, error)
	// DedicatedImageFS: the image filesystem (where writable layers live)
	// is not RootDir's; as in kubelet, a container's ephemeral-storage
	// usage then counts its logs only.
	DedicatedImageFS bool
}

// Usage measures pods; a pod missing from the result could not be
// measured at all.
func (s Stats) Usage(ctx context.Context, pods []*v1.Pod) map[string]PodUsage {
	mounts := s.CgroupMounts
	if mounts == nil {
		if ms, err := mountinfo.Read(); err == nil {
			mounts = mountinfo.CgroupMountPoints(ms)
		}
	}
	var cs []runtime.Container
	if s.Containers != nil {
		cs, _ = s.Containers(ctx) // without them: disk figures only
	}
	byPod := map[string][]runtime.Container{}
	for _, c := range cs {
		if c.State == runtime.StateRunning && c.CgroupsPath != "" {
			byPod[string(c.Pod.UID)] = append(byPod[string(c.Pod.UID)], c)
		}
	}
	out := map[string]PodUsage{}
	for _, p := range pods {
		uid := string(p.UID)
		var u PodUsage
		var podCgroup string
		for _, c := range byPod[uid] {
			cg := runtime.CgroupfsPath(c.CgroupsPath)
			podCgroup = filepath.Dir(cg)
			cu := ContainerUsage{Name: c.Name}
			cu.Memory, _ = workingSet(mounts, cg)
			u.Containers = append(u.Containers, cu)
		}
		if podCgroup != "" {
			u.Memory, _ = workingSet(mounts, podCgroup)
			u.Processes, _ = readCounter(mounts, podCgroup, "pids.current")
		}
		logs := s.podLogDirs(p)
		for i := range u.Containers {
			for _, l := range logs {
				b, _ := diskUsage(filepath.Join(l, u.Containers[i].Name))
				u.Containers[i].Disk += b.bytes
			}
		}
		for _, dir := range append([]string{filepath.Join(s.RootDir, "pods", uid)}, logs...) {
			d, _ := diskUsage(dir)
			u.Disk += d.bytes
			u.Inodes += d.inodes
		}
		out[uid] = u
	}
	return out
}

// workingSet is a cgroup's memory usage less its inactive file pages
// (cgroup v2 memory.current, or v1 memory.usage_in_bytes).
func workingSet(mounts []string, path string) (int64, error) {
	for _, m := range mounts {
		dir := filepath.Join(m, path)
		usage, err := readInt(filepath.Join(dir, "memory.current"))
		key := "inactive_file"
		if err != nil {
			if usage, err = readInt(filepath.Join(dir, "memory.usage_in_bytes")); err != nil {
				continue
			}
			key = "total_inactive_file"
		}
		inactive, _ := readStat(filepath.Join(dir, "memory.stat"), key)
		return max(usage-inactive, 0), nil
	}
	return 0, errors.New("no memory statistics for cgroup " + path)
}

// readCounter reads a single-number cgroup file from the first hierarchy
// that has it.
func readCounter(mounts []string, path, file string) (int64, error) {
	for _, m := range mounts {
		if v, err := readInt(filepath.Join(m, path, file)); err == nil {
			return v, nil
		}
	}
	return 0, errors.New("no " + file + " for cgroup " + path)
}

func readInt(p string) (int64, error) {
	b, err := os.ReadFile(p)
	if err != nil {
		return 0, err
	}
	return strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
}

func readStat(p, key string) (int64, error) {
	f, err := os.Open(p)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), " ")
		if ok && k == key {
			return strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		}
	}
	return 0, errors.New(key + " not in " + p)
}

type usage struct{ bytes, inodes int64 }

// diskUsage sums the allocated bytes and the inodes below dir on dir's
// own filesystem (mounts below it, such as memory-backed volumes, are
// skipped), as du -x does.
func diskUsage(dir string) (usage, error) {
	var u usage
	var st syscall.Stat_t
	if err := syscall.Lstat(dir, &st); err != nil {
		return u, err
	}
	dev := st.Dev
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil // vanished or unreadable: skip
		}
		var s syscall.Stat_t
		if syscall.Lstat(p, &s) != nil {
			return nil
		}
		if s.Dev != dev {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		u.inodes++
		u.bytes += s.Blocks * 512
		return nil
	})
	return u, err
}

// podLogDirs are the pod's log directories: podLogsDir's, and the one
// agents before it kept under rootDir/logs (containers they started still
// write there).
func (s Stats) podLogDirs(p *v1.Pod) []string {
	name := p.Namespace + "_" + p.Name + "_" + string(p.UID)
	dirs := []string{filepath.Join(s.RootDir, "logs", name)}
	if s.PodLogsDir != "" {
		dirs = append(dirs, filepath.Join(s.PodLogsDir, name))
	}
	return dirs
}

// DedicatedImageFS reports whether the image filesystem (where writable
// layers live; imageFSRoot is the runtime's ImageFSRoot) is another
// filesystem than rootDir's, which decides Stats.DedicatedImageFS. Unknown
// counts as shared.
func DedicatedImageFS(ctx context.Context, imageFSRoot func(context.Context) (string, error), rootDir string) bool {
	dir, err := imageFSRoot(ctx)
	if err != nil {
		return false
	}
	var a, b syscall.Stat_t
	if syscall.Stat(dir, &a) != nil || syscall.Stat(rootDir, &b) != nil {
		return false
	}
	return a.Dev != b.Dev
}
