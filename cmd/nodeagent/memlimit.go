package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// The agent under a memory limit of its own cgroup (systemd's MemoryHigh= or
// MemoryMax=, docs/vm.md "The MemoryHigh=32M hold").
//
// The Go runtime does not read cgroup limits: by default its heap grows to
// twice the live heap before a collection, whatever the cgroup allows. On
// cgroup v2, memory.high is not a failing limit: above it the kernel
// reclaims the cgroup's memory and, when that frees nothing (anonymous memory
// without swap), puts every allocating thread to sleep, again and again. In
// the cgroup v2 guest an agent with 70 to 80 pods under MemoryHigh=32M had 37
// MiB of anonymous memory (27 MiB of it in transparent huge pages), its memory
// PSI "some" at 85-97 %, and missed its Lease renewals, its PLEG relists and
// its pods' starts: the throttling never ends because nothing tells the heap
// to shrink.
//
// So, when its cgroup has a limit and GOMEMLIMIT is not set, the agent gives
// the runtime a soft memory limit below it (goMemoryLimitFraction of it: the
// rest is for what the cgroup also charges and the runtime does not count,
// the kernel's slab, stacks and page tables for the agent and the files it
// reads), so that the collector runs before the cgroup throttles; and it
// turns transparent huge pages off for itself (PR_SET_THP_DISABLE), since a
// 2 MiB page is charged whole for every touched 2 MiB of the heap and the
// runtime cannot give part of it back. kubelet does neither (it has no
// memory limit of its own by default); a node without a limit on the agent's
// cgroup is unchanged.

// goMemoryLimitFraction is the share of the cgroup's limit given to the Go
// runtime as its soft limit: 3/4 (24 MiB of 32 MiB). With 80 pods the
// guest's agent cgroup held 3.7 MiB of kernel memory and 1 MiB of files
// besides its anonymous memory.
const (
	goMemoryLimitNum = 3
	goMemoryLimitDen = 4
)

// cgroupUnlimited: a v1 memory.limit_in_bytes at or above this is no limit
// (the kernel's "unlimited" is PAGE_COUNTER_MAX pages, 9223372036854771712
// bytes with 4 KiB pages).
const cgroupUnlimited = int64(1) << 62

// ownCgroupMemoryLimit returns the smallest memory limit that applies to the
// process whose /proc/<pid>/cgroup is procCgroup, under the cgroup
// filesystem mounted at root (/sys/fs/cgroup), and the file that sets it;
// 0 and "" when none does. On the unified hierarchy (a "0::" line, and
// root/cgroup.controllers has "memory") it reads memory.high and memory.max
// of the process's cgroup and every ancestor's; otherwise the v1 memory
// controller's memory.limit_in_bytes of its cgroup and its ancestors' (a
// hybrid host: root/memory).
func ownCgroupMemoryLimit(procCgroup []byte, root string) (int64, string, error) {
	var v2, v1 string
	haveV2, haveV1 := false, false
	sc := bufio.NewScanner(bytes.NewReader(procCgroup))
	for sc.Scan() {
		parts := strings.SplitN(sc.Text(), ":", 3)
		if len(parts) != 3 {
			continue
		}
		if parts[0] == "0" && parts[1] == "" {
			v2, haveV2 = parts[2], true
			continue
		}
		for _, c := range strings.Split(parts[1], ",") {
			if c == "memory" {
				v1, haveV1 = parts[2], true
			}
		}
	}
	var dir string
	var files []string
	switch {
	case haveV1:
		dir, files = filepath.Join(root, "memory"), []string{"memory.limit_in_bytes"}
		v2 = v1
	case haveV2:
		ctrl, err := os.ReadFile(filepath.Join(root, "cgroup.controllers"))
		if err != nil {
			return 0, "", err
		}
		if !strings.Contains(" "+strings.TrimSpace(string(ctrl))+" ", " memory ") {
			return 0, "", nil
		}
		dir, files = root, []string{"memory.high", "memory.max"}
	default:
		return 0, "", nil
	}
	var limit int64
	var from string
	// From the process's cgroup up to the hierarchy's root (whose files do
	// not exist on v2).
	for p := filepath.Clean("/" + v2); ; p = filepath.Dir(p) {
		for _, f := range files {
			file := filepath.Join(dir, p, f)
			b, err := os.ReadFile(file)
			if errors.Is(err, fs.ErrNotExist) {
				continue
			}
			if err != nil {
				return 0, "", err
			}
			s := strings.TrimSpace(string(b))
			if s == "max" {
				continue
			}
			v, err := strconv.ParseInt(s, 10, 64)
			if err != nil {
				return 0, "", fmt.Errorf("%s: %q: %w", file, s, err)
			}
			if v <= 0 || v >= cgroupUnlimited {
				continue
			}
			if limit == 0 || v < limit {
				limit, from = v, file
			}
		}
		if p == "/" {
			break
		}
	}
	return limit, from, nil
}

// goMemoryLimit is the Go runtime's soft limit for a cgroup limit.
func goMemoryLimit(cgroupLimit int64) int64 {
	return cgroupLimit / goMemoryLimitDen * goMemoryLimitNum
}

// limitGoMemory sets the runtime's soft memory limit from the agent's own
// cgroup (above), unless GOMEMLIMIT is set, and turns transparent huge pages
// off for the agent when there is a limit.
func (a *agent) limitGoMemory() {
	procCgroup, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		a.log.Warn("cannot read the agent's cgroup; the Go runtime's memory limit is left as it is", "err", err)
		return
	}
	limit, from, err := ownCgroupMemoryLimit(procCgroup, "/sys/fs/cgroup")
	if err != nil {
		a.log.Warn("cannot read the agent's cgroup memory limit; the Go runtime's memory limit is left as it is", "err", err)
		return
	}
	if limit == 0 {
		return
	}
	if env := os.Getenv("GOMEMLIMIT"); env != "" {
		a.log.Info("the agent's cgroup has a memory limit; GOMEMLIMIT is set and kept", "cgroupLimit", limit, "file", from, "GOMEMLIMIT", env)
	} else {
		debug.SetMemoryLimit(goMemoryLimit(limit))
		a.log.Info("set the Go runtime's memory limit below the agent's cgroup memory limit", "goMemoryLimit", goMemoryLimit(limit), "cgroupLimit", limit, "file", from)
	}
	if err := unix.Prctl(unix.PR_SET_THP_DISABLE, 1, 0, 0, 0); err != nil {
		a.log.Warn("cannot turn transparent huge pages off for the agent", "err", err)
	}
}
