package cm

import (
	"fmt"
	"os"
	"strings"

	"github.com/opencontainers/cgroups"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// HugePageLimits sums the hugepages-<size> quantities of rl per page size
// in bytes (kubelet's HugePageLimits): the pod cgroup's hugetlb limits from
// its requests (the API server makes them equal to its limits), kubepods'
// from allocatable.
func HugePageLimits(rl v1.ResourceList) map[int64]int64 {
	limits := map[int64]int64{}
	for name, q := range rl {
		size, ok := hugePageSize(name)
		if !ok {
			continue
		}
		limits[size] += q.Value()
	}
	return limits
}

// hugePageSize is the page size of a hugepages-<size> resource name.
func hugePageSize(name v1.ResourceName) (int64, bool) {
	s, ok := strings.CutPrefix(string(name), v1.ResourceHugePagesPrefix)
	if !ok {
		return 0, false
	}
	q, err := resource.ParseQuantity(s)
	if err != nil || q.Value() <= 0 {
		return 0, false
	}
	return q.Value(), true
}

// unboundedHugePages is the hugetlb limit kubelet gives the QoS cgroups
// for every page size (setHugePagesUnbounded): in effect none, below what
// cgroup v1's page-aligned arithmetic overflows on.
const unboundedHugePages = int64(1 << 62)

// UnboundedHugePages is a hugetlb limit of unboundedHugePages for each
// page size in sizes (the cgroups library's names, "2MB").
func UnboundedHugePages(sizes []string) map[int64]int64 {
	m := map[int64]int64{}
	for _, s := range sizes {
		if b, err := PageSizeBytes(s); err == nil {
			m[b] = unboundedHugePages
		}
	}
	return m
}

// hugetlbLimits are the library's hugetlb limits for limits: one per page
// size the host supports (sizes), 0 for sizes limits does not name, as
// kubelet's maybeSetHugetlb (a pod that requests no huge pages may use
// none). Sizes the host does not have are left out.
func hugetlbLimits(limits map[int64]int64, sizes []string) []*cgroups.HugepageLimit {
	var out []*cgroups.HugepageLimit
	for _, s := range sizes {
		b, err := PageSizeBytes(s)
		if err != nil {
			continue
		}
		out = append(out, &cgroups.HugepageLimit{Pagesize: s, Limit: uint64(max(limits[b], 0))})
	}
	return out
}

// PageSizeBytes parses the cgroups library's page size names ("2MB",
// "1GB", "64KB": binary units, as the kernel's hugetlb.<size>.* files).
func PageSizeBytes(s string) (int64, error) {
	units := []struct {
		suffix string
		shift  uint
	}{{"KB", 10}, {"MB", 20}, {"GB", 30}, {"TB", 40}, {"PB", 50}, {"B", 0}}
	for _, u := range units {
		if n, ok := strings.CutSuffix(s, u.suffix); ok {
			var v int64
			if _, err := fmt.Sscanf(n, "%d", &v); err != nil || v <= 0 || fmt.Sprint(v) != n {
				return 0, fmt.Errorf("page size %q", s)
			}
			return v << u.shift, nil
		}
	}
	return 0, fmt.Errorf("page size %q", s)
}

// HugetlbPageSizes are the huge page sizes whose hugetlb limits this host's
// cgroups take, as the cgroups library names them ("2MB"): every size in
// /sys/kernel/mm/hugepages when the hugetlb controller is there (cgroup
// v2: in the root's cgroup.controllers; v1: mounted), else none, as
// kubelet's maybeSetHugetlb skips an absent controller ("Optional
// subsystem not supported: hugetlb").
func HugetlbPageSizes() []string {
	if cgroups.IsCgroup2UnifiedMode() {
		b, err := os.ReadFile("/sys/fs/cgroup/cgroup.controllers")
		if err != nil || !hasField(string(b), "hugetlb") {
			return nil
		}
	} else if _, err := cgroups.FindCgroupMountpoint("", "hugetlb"); err != nil {
		return nil
	}
	return cgroups.HugePageSizes()
}

func hasField(s, f string) bool {
	for _, x := range strings.Fields(s) {
		if x == f {
			return true
		}
	}
	return false
}
