package resize

import (
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/opencontainers/cgroups"
	"github.com/opencontainers/cgroups/systemd"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/nodeagent/nodeagent/cm"
)

// Cgroup is what a cgroup has for CPU and memory, read from its files.
// Zero CPUQuota or MemoryLimit means no limit.
type Cgroup struct {
	CPUShares   uint64 // cpu.shares, or cpu.weight converted on cgroup v2
	CPUWeight   uint64 // cpu.weight (cgroup v2 only)
	CPUQuota    int64  // µs per CPUPeriod
	CPUPeriod   uint64
	MemoryLimit int64
	MemoryUsage int64 // memory.usage_in_bytes (v1), memory.current (v2)
}

// CgroupFS reads cgroups below Root ("/sys/fs/cgroup"): the unified
// hierarchy when V2, else the cpu and memory hierarchies of cgroup v1.
type CgroupFS struct {
	Root string
	V2   bool
}

// HostCgroupFS reads this host's cgroups.
func HostCgroupFS() CgroupFS {
	return CgroupFS{Root: "/sys/fs/cgroup", V2: cgroups.IsCgroup2UnifiedMode()}
}

// Dir resolves a container's cgroupsPath (a cgroupfs path, or the systemd
// driver's "slice:prefix:name") or a pod cgroup's path to a path below
// each hierarchy.
func Dir(cgroupsPath string) (string, error) {
	if strings.HasPrefix(cgroupsPath, "/") {
		if strings.Contains(cgroupsPath, "..") {
			return "", fmt.Errorf("bad cgroups path %q", cgroupsPath)
		}
		return cgroupsPath, nil
	}
	parts := strings.Split(cgroupsPath, ":")
	if len(parts) != 3 || !strings.HasSuffix(parts[0], ".slice") {
		return "", fmt.Errorf("bad cgroups path %q", cgroupsPath)
	}
	slice, err := systemd.ExpandSlice(parts[0])
	if err != nil {
		return "", err
	}
	return filepath.Join(slice, parts[1]+"-"+parts[2]+".scope"), nil
}

// Read reads the cgroup at dir (see Dir).
func (f CgroupFS) Read(dir string) (Cgroup, error) {
	var c Cgroup
	var errs []error
	read := func(sub, file string) string {
		b, err := os.ReadFile(filepath.Join(f.Root, sub, dir, file))
		if err != nil {
			errs = append(errs, err)
			return ""
		}
		return strings.TrimSpace(string(b))
	}
	num := func(s string) int64 {
		if s == "" || s == "max" || s == "-1" {
			return 0
		}
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			errs = append(errs, fmt.Errorf("cgroup %s: %w", dir, err))
			return 0
		}
		if n >= math.MaxInt64/2 { // v1 "unlimited" (page-rounded MaxInt64)
			return 0
		}
		return int64(n)
	}
	if f.V2 {
		c.CPUWeight = uint64(num(read("", "cpu.weight")))
		c.CPUShares = weightToShares(c.CPUWeight)
		if q, p, ok := strings.Cut(read("", "cpu.max"), " "); ok {
			c.CPUQuota, c.CPUPeriod = num(q), uint64(num(p))
		}
		c.MemoryLimit = num(read("", "memory.max"))
		c.MemoryUsage = num(read("", "memory.current"))
	} else {
		c.CPUShares = uint64(num(read("cpu", "cpu.shares")))
		c.CPUQuota = num(read("cpu", "cpu.cfs_quota_us"))
		c.CPUPeriod = uint64(num(read("cpu", "cpu.cfs_period_us")))
		c.MemoryLimit = num(read("memory", "memory.limit_in_bytes"))
		c.MemoryUsage = num(read("memory", "memory.usage_in_bytes"))
	}
	return c, errors.Join(errs...)
}

// weightToShares inverts cm.SharesToWeight as well as integers allow.
func weightToShares(w uint64) uint64 {
	if w == 0 {
		return 0
	}
	return 2 + ((w-1)*262142)/9999
}

// Applied is containerStatuses[].resources of a running container whose
// allocation is alloc and whose cgroup is cg, as kubelet reports it from
// what the runtime says the container has: the CPU request from the
// shares (weight), the CPU limit from the quota, the memory limit; the
// memory request is the actuated one (no cgroup holds it). Where the
// cgroup has exactly what alloc makes of it, alloc's value is reported
// (cgroup v2's weight and small quotas cannot be converted back exactly,
// kubelet likewise keeps the allocated value below its minimums); anything
// else reports what the cgroup has. Resources not set in alloc are not
// reported.
func Applied(alloc, actuated v1.ResourceRequirements, cg Cgroup, v2 bool) v1.ResourceRequirements {
	out := *alloc.DeepCopy()
	out.Claims = nil
	want := ValuesOf(alloc)
	if out.Limits != nil {
		if _, ok := out.Limits[v1.ResourceCPU]; ok {
			switch {
			case cg.CPUQuota <= 0:
				// No quota (a container with exclusive CPUs): as kubelet,
				// whose runtime then reports no limit, the limit last set
				// is reported.
				if q, ok := actuated.Limits[v1.ResourceCPU]; ok {
					out.Limits[v1.ResourceCPU] = q.DeepCopy()
				}
			case cg.CPUQuota != cm.MilliCPUToQuota(want.CPULimit, int64(cm.QuotaPeriod)) || cg.CPUPeriod != cm.QuotaPeriod:
				out.Limits[v1.ResourceCPU] = *resource.NewMilliQuantity(quotaToMilli(cg.CPUQuota, cg.CPUPeriod), resource.DecimalSI)
			}
		}
		if _, ok := out.Limits[v1.ResourceMemory]; ok && cg.MemoryLimit != want.MemoryLimit {
			out.Limits[v1.ResourceMemory] = *resource.NewQuantity(cg.MemoryLimit, resource.BinarySI)
		}
	}
	if out.Requests != nil {
		if _, ok := out.Requests[v1.ResourceCPU]; ok {
			shares := cm.MilliCPUToShares(want.CPURequest)
			same := cg.CPUShares == shares
			if v2 {
				same = cg.CPUWeight == cm.SharesToWeight(shares)
			}
			if !same {
				out.Requests[v1.ResourceCPU] = *resource.NewMilliQuantity(sharesToMilli(cg.CPUShares), resource.DecimalSI)
			}
		}
		if _, ok := out.Requests[v1.ResourceMemory]; ok {
			if q, ok := actuated.Requests[v1.ResourceMemory]; ok {
				out.Requests[v1.ResourceMemory] = q.DeepCopy()
			}
		}
	}
	return out
}

// quotaToMilli and sharesToMilli are kubelet's conversions of what the
// runtime reports back to millicores.
func quotaToMilli(quota int64, period uint64) int64 {
	if quota <= 0 || period == 0 {
		return 0
	}
	return quota * 1000 / int64(period)
}

func sharesToMilli(shares uint64) int64 {
	if shares <= cm.MinShares {
		return 0
	}
	return int64(math.Ceil(float64(shares*1000) / cm.SharesPerCPU))
}
