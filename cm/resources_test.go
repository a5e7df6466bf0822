package cm

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
)

func u64(v uint64) *uint64 { return &v }
func i64(v int64) *int64   { return &v }

// The pods are as the API server (or the static pod source) defaults them:
// a missing request is its limit.
func TestPodResourceConfig(t *testing.T) {
	// A pod that requests no huge pages may use none (hugetlb 0 for every
	// size: TestHugePageLimitsFromPod).
	noHugePages := map[int64]int64{}
	withInit := podOf(ctr("a", res("cpu", "100m"), nil), ctr("b", res("cpu", "200m"), nil))
	withInit.Spec.InitContainers = []v1.Container{ctr("init", res("cpu", "1"), nil)}
	withOverhead := podOf(ctr("a", res("cpu", "1", "memory", "1Gi"), res("cpu", "1", "memory", "1Gi")))
	withOverhead.Spec.Overhead = res("cpu", "250m", "memory", "100Mi")
	for _, tc := range []struct {
		desc string
		pod  *v1.Pod
		pids int64
		want ResourceConfig
	}{
		{
			desc: "guaranteed: shares, quota and memory from the sums",
			pod: podOf(ctr("a", res("cpu", "500m", "memory", "64Mi"), res("cpu", "500m", "memory", "64Mi")),
				ctr("b", res("cpu", "250m", "memory", "32Mi"), res("cpu", "250m", "memory", "32Mi"))),
			want: ResourceConfig{CPUShares: u64(768), CPUQuota: i64(75000), CPUPeriod: u64(100000), Memory: i64(96 << 20), HugePageLimit: noHugePages},
		},
		{
			desc: "guaranteed with overhead",
			pod:  withOverhead,
			want: ResourceConfig{CPUShares: u64(1280), CPUQuota: i64(125000), CPUPeriod: u64(100000), Memory: i64(1<<30 + 100<<20), HugePageLimit: noHugePages},
		},
		{
			desc: "burstable, every container limited",
			pod:  podOf(ctr("a", res("cpu", "100m", "memory", "10Mi"), res("cpu", "1", "memory", "100Mi"))),
			want: ResourceConfig{CPUShares: u64(102), CPUQuota: i64(100000), CPUPeriod: u64(100000), Memory: i64(100 << 20), HugePageLimit: noHugePages},
		},
		{
			desc: "burstable, one container without limits: shares only",
			pod:  podOf(ctr("a", res("cpu", "100m"), res("cpu", "1", "memory", "100Mi")), ctr("b", res("memory", "1Mi"), nil)),
			want: ResourceConfig{CPUShares: u64(102), HugePageLimit: noHugePages},
		},
		{
			desc: "burstable, cpu limited everywhere, memory not",
			pod:  podOf(ctr("a", res("cpu", "2", "memory", "10Mi"), res("cpu", "2"))),
			want: ResourceConfig{CPUShares: u64(2048), CPUQuota: i64(200000), CPUPeriod: u64(100000), HugePageLimit: noHugePages},
		},
		{
			desc: "init container's larger request wins",
			pod:  withInit,
			want: ResourceConfig{CPUShares: u64(1024), HugePageLimit: noHugePages},
		},
		{
			desc: "tiny quota is raised to 1ms",
			pod:  podOf(ctr("a", res("cpu", "1m", "memory", "8Mi"), res("cpu", "1m", "memory", "8Mi"))),
			want: ResourceConfig{CPUShares: u64(2), CPUQuota: i64(1000), CPUPeriod: u64(100000), Memory: i64(8 << 20), HugePageLimit: noHugePages},
		},
		{
			desc: "besteffort: 2 shares, pids limit",
			pod:  podOf(ctr("a", nil, nil)),
			pids: 100,
			want: ResourceConfig{CPUShares: u64(2), PidsLimit: i64(100), HugePageLimit: noHugePages},
		},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, PodResourceConfig(tc.pod, tc.pids)); diff != "" {
				t.Errorf("(-want +got)\n%s", diff)
			}
		})
	}
}

func TestCPUConversions(t *testing.T) {
	for _, tc := range []struct {
		milli  int64
		shares uint64
		weight uint64
	}{
		{0, 2, 1}, {1, 2, 1}, {100, 102, 4}, {1000, 1024, 39}, {300000, 262144, 10000},
	} {
		if got := MilliCPUToShares(tc.milli); got != tc.shares {
			t.Errorf("MilliCPUToShares(%d) = %d, want %d", tc.milli, got, tc.shares)
		}
		if got := SharesToWeight(tc.shares); got != tc.weight {
			t.Errorf("SharesToWeight(%d) = %d, want %d", tc.shares, got, tc.weight)
		}
	}
}

func TestNodeAllocatableConfig(t *testing.T) {
	alloc := res("cpu", "2", "memory", "3Gi", "pid", "1000")
	if diff := cmp.Diff(ResourceConfig{CPUShares: u64(2048), Memory: i64(3 << 30), PidsLimit: i64(1000), HugePageLimit: map[int64]int64{}}, NodeAllocatableConfig(alloc, true)); diff != "" {
		t.Errorf("enforced (-want +got)\n%s", diff)
	}
	if diff := cmp.Diff(ResourceConfig{CPUShares: u64(2048)}, NodeAllocatableConfig(alloc, false)); diff != "" {
		t.Errorf("not enforced (-want +got)\n%s", diff)
	}
}
