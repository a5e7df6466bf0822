package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// memCgroup is a memory cgroup of the agent's own, for the working set as
// kubelet and cAdvisor report a cgroup's: usage minus inactive file pages.
type memCgroup struct {
	path string
	v2   bool
}

// newMemCgroup makes a memory cgroup named name at the top of the memory
// hierarchy (cgroup v2 or v1).
func newMemCgroup(name string) (*memCgroup, error) {
	c := &memCgroup{path: filepath.Join("/sys/fs/cgroup/memory", name)}
	if _, err := os.Stat("/sys/fs/cgroup/cgroup.controllers"); err == nil {
		c = &memCgroup{path: filepath.Join("/sys/fs/cgroup", name), v2: true}
	}
	if err := os.Mkdir(c.path, 0o755); err != nil {
		return nil, fmt.Errorf("memory cgroup: %w", err)
	}
	return c, nil
}

// wrap returns the argv that starts argv inside the cgroup: a shell joins
// it and execs the program, so every page the program charges is in the
// cgroup from its first.
func (c *memCgroup) wrap(argv ...string) []string {
	return append([]string{"/bin/sh", "-c", `echo $$ > "$1/cgroup.procs" && shift && exec "$@"`, "sh", c.path}, argv...)
}

// workingSetMiB is usage − inactive_file (v2: memory.current and
// inactive_file; v1: memory.usage_in_bytes and total_inactive_file).
func (c *memCgroup) workingSetMiB() (float64, error) {
	usageFile, inactiveKey := "memory.usage_in_bytes", "total_inactive_file"
	if c.v2 {
		usageFile, inactiveKey = "memory.current", "inactive_file"
	}
	b, err := os.ReadFile(filepath.Join(c.path, usageFile))
	if err != nil {
		return 0, err
	}
	usage, err := strconv.ParseFloat(strings.TrimSpace(string(b)), 64)
	if err != nil {
		return 0, err
	}
	f, err := os.Open(filepath.Join(c.path, "memory.stat"))
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, _ := strings.Cut(sc.Text(), " ")
		if k == inactiveKey {
			inactive, err := strconv.ParseFloat(v, 64)
			if err != nil {
				return 0, err
			}
			return max(usage-inactive, 0) / (1 << 20), nil
		}
	}
	return 0, fmt.Errorf("%s: no %s", c.path, inactiveKey)
}

// remove deletes the cgroup (once its processes are gone).
func (c *memCgroup) remove() error { return os.Remove(c.path) }

// freshCopy copies the program at src to dst and drops dst's page cache, so
// the pages the program touches are charged to the cgroup that runs it, not
// to whoever read the file first (and two agents do not share them).
func freshCopy(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o755)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	if err := out.Sync(); err != nil {
		out.Close()
		return err
	}
	if err := unix.Fadvise(int(out.Fd()), 0, 0, unix.FADV_DONTNEED); err != nil {
		out.Close()
		return fmt.Errorf("drop the page cache of %s: %w", dst, err)
	}
	return out.Close()
}
