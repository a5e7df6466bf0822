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
// kubelet and cAdvisor report a cgroup's (usage minus inactive file pages),
// its anonymous memory, an optional memory limit and its memory pressure.
//
// On a cgroup v2 host it is one cgroup, and the limit is memory.high: what
// systemd's MemoryHigh= sets. On a v1 (or hybrid) host the memory
// controller is v1, which has no memory.high: the limit is
// memory.limit_in_bytes (systemd's MemoryLimit=/MemoryMax=), a hard limit at
// which the kernel reclaims and, if that fails, OOM-kills, where memory.high
// only reclaims and throttles. v1 has no per-cgroup PSI either; on a hybrid
// host whose kernel has PSI the process also joins a cgroup of the same
// name in the v2 hierarchy (/sys/fs/cgroup/unified, no controllers), whose
// memory.pressure counts the stalls of its tasks however memory is limited.
type memCgroup struct {
	path string
	v2   bool
	// psiPath is the cgroup v2 directory with memory.pressure ("" without PSI).
	psiPath string
}

// agentMemCgroupName is the memory cgroup an agent of the run is measured
// in. It must not be the agent's own cgroup root for its namespace
// (cm.RootForNamespace: "nodeagent-" + namespace): the pods' cgroups would
// then be inside it and count in the agent's working set.
func agentMemCgroupName(mode, runID string) string {
	return "nodeagent-bench-agent-" + mode + "-" + runID
}

// newMemCgroup makes a memory cgroup named name at the top of the memory
// hierarchy (cgroup v2 or v1), limited to limit bytes when limit > 0.
func newMemCgroup(name string, limit int64) (*memCgroup, error) {
	c := &memCgroup{path: filepath.Join("/sys/fs/cgroup/memory", name)}
	if _, err := os.Stat("/sys/fs/cgroup/cgroup.controllers"); err == nil {
		c = &memCgroup{path: filepath.Join("/sys/fs/cgroup", name), v2: true}
	}
	if err := os.Mkdir(c.path, 0o755); err != nil {
		return nil, fmt.Errorf("memory cgroup: %w", err)
	}
	if c.v2 {
		c.psiPath = c.path
	} else if _, err := os.Stat("/sys/fs/cgroup/unified/cgroup.procs"); err == nil {
		p := filepath.Join("/sys/fs/cgroup/unified", name)
		if err := os.Mkdir(p, 0o755); err != nil {
			_ = c.remove()
			return nil, fmt.Errorf("cgroup v2 for PSI: %w", err)
		}
		c.psiPath = p
	}
	if c.psiPath != "" {
		if _, err := os.Stat(filepath.Join(c.psiPath, "memory.pressure")); err != nil {
			_ = os.Remove(c.psiPath) // kernel without PSI (psi=0)
			c.psiPath = ""
		}
	}
	if limit > 0 {
		file := "memory.limit_in_bytes"
		if c.v2 {
			file = "memory.high"
		}
		if err := os.WriteFile(filepath.Join(c.path, file), []byte(strconv.FormatInt(limit, 10)), 0o644); err != nil {
			_ = c.remove()
			return nil, fmt.Errorf("memory limit: %w", err)
		}
	}
	return c, nil
}

// limitKind names what the limit is on this host.
func (c *memCgroup) limitKind() string {
	if c.v2 {
		return "cgroup v2 memory.high (as systemd's MemoryHigh=)"
	}
	return "cgroup v1 memory.limit_in_bytes (a hard limit: reclaim, then OOM kill; v1 has no memory.high)"
}

// wrap returns the argv that starts argv inside the cgroup(s): a shell
// joins them and execs the program, so every page the program charges is
// in the cgroup from its first.
func (c *memCgroup) wrap(argv ...string) []string {
	psi := c.psiPath
	if psi == c.path {
		psi = ""
	}
	script := `echo $$ > "$1/cgroup.procs" && { [ -z "$2" ] || echo $$ > "$2/cgroup.procs"; } && shift 2 && exec "$@"`
	return append([]string{"/bin/sh", "-c", script, "sh", c.path, psi}, argv...)
}

// memStat is one reading of the cgroup, in MiB.
type memStat struct {
	Usage      float64 // memory.current (v2) / memory.usage_in_bytes (v1)
	Anon       float64 // anon (v2) / total_rss (v1)
	Inactive   float64 // inactive_file / total_inactive_file
	WorkingSet float64 // Usage − Inactive, as cAdvisor
	// What the working set holds besides anonymous memory: kernel memory
	// (v1 memory.kmem.usage_in_bytes, v2 kernel: slab, the memory cgroups
	// and dentries the agent creates for pods), active file pages and
	// shmem (tmpfs volumes the agent writes).
	Kernel, ActiveFile, Shmem float64
}

func (c *memCgroup) stat() (memStat, error) {
	usageFile, anonKey, inactiveKey := "memory.usage_in_bytes", "total_rss", "total_inactive_file"
	if c.v2 {
		usageFile, anonKey, inactiveKey = "memory.current", "anon", "inactive_file"
	}
	var s memStat
	usage, err := readInt(filepath.Join(c.path, usageFile))
	if err != nil {
		return s, err
	}
	kv, err := readKeyed(filepath.Join(c.path, "memory.stat"))
	if err != nil {
		return s, err
	}
	inactive, ok1 := kv[inactiveKey]
	anon, ok2 := kv[anonKey]
	if !ok1 || !ok2 {
		return s, fmt.Errorf("%s/memory.stat: no %s or %s", c.path, inactiveKey, anonKey)
	}
	const mib = 1 << 20
	s.Usage, s.Anon, s.Inactive = float64(usage)/mib, float64(anon)/mib, float64(inactive)/mib
	if c.v2 {
		s.Kernel, s.ActiveFile, s.Shmem = float64(kv["kernel"])/mib, float64(kv["active_file"])/mib, float64(kv["shmem"])/mib
	} else {
		if k, err := readInt(filepath.Join(c.path, "memory.kmem.usage_in_bytes")); err == nil {
			s.Kernel = float64(k) / mib
		}
		s.ActiveFile, s.Shmem = float64(kv["total_active_file"])/mib, float64(kv["total_shmem"])/mib
	}
	s.WorkingSet = max(s.Usage-s.Inactive, 0)
	return s, nil
}

// workingSetMiB is usage − inactive_file (v2: memory.current and
// inactive_file; v1: memory.usage_in_bytes and total_inactive_file).
func (c *memCgroup) workingSetMiB() (float64, error) {
	s, err := c.stat()
	return s.WorkingSet, err
}

// psi is one line of a PSI file: the share of time (%) some task of the
// cgroup stalled on memory over 10, 60 and 300 s, and the total stall (µs).
type psi struct {
	Avg10, Avg60, Avg300 float64
	TotalUs              int64
}

// pressure reads the "some" line of the cgroup's memory.pressure.
func (c *memCgroup) pressure() (psi, bool, error) {
	if c.psiPath == "" {
		return psi{}, false, nil
	}
	b, err := os.ReadFile(filepath.Join(c.psiPath, "memory.pressure"))
	if err != nil {
		return psi{}, false, err
	}
	p, err := parsePSISome(string(b))
	return p, err == nil, err
}

func parsePSISome(s string) (psi, error) {
	var p psi
	for _, line := range strings.Split(s, "\n") {
		f := strings.Fields(line)
		if len(f) != 5 || f[0] != "some" {
			continue
		}
		for _, kv := range f[1:] {
			k, v, _ := strings.Cut(kv, "=")
			var err error
			switch k {
			case "avg10":
				p.Avg10, err = strconv.ParseFloat(v, 64)
			case "avg60":
				p.Avg60, err = strconv.ParseFloat(v, 64)
			case "avg300":
				p.Avg300, err = strconv.ParseFloat(v, 64)
			case "total":
				p.TotalUs, err = strconv.ParseInt(v, 10, 64)
			}
			if err != nil {
				return p, fmt.Errorf("memory.pressure %q: %w", line, err)
			}
		}
		return p, nil
	}
	return p, fmt.Errorf("memory.pressure: no \"some\" line in %q", s)
}

// limitEvents counts how often the limit was hit, and the OOM kills in the
// cgroup: v2 memory.events high and oom_kill; v1 memory.failcnt and
// memory.oom_control's oom_kill.
func (c *memCgroup) limitEvents() (hits, oomKills int64, err error) {
	if c.v2 {
		kv, err := readKeyed(filepath.Join(c.path, "memory.events"))
		return kv["high"], kv["oom_kill"], err
	}
	if hits, err = readInt(filepath.Join(c.path, "memory.failcnt")); err != nil {
		return 0, 0, err
	}
	kv, err := readKeyed(filepath.Join(c.path, "memory.oom_control"))
	return hits, kv["oom_kill"], err
}

// remove deletes the cgroup(s) (once its processes are gone).
func (c *memCgroup) remove() error {
	if c.psiPath != "" && c.psiPath != c.path {
		_ = os.Remove(c.psiPath)
	}
	return os.Remove(c.path)
}

func readInt(path string) (int64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	return strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
}

// readKeyed parses "key value" lines (memory.stat, memory.events).
func readKeyed(path string) (map[string]int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	out := map[string]int64{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), " ")
		if !ok {
			continue
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("%s: %q: %w", path, sc.Text(), err)
		}
		out[k] = n
	}
	return out, sc.Err()
}

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
