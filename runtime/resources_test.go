package runtime

import (
	"context"
	"testing"

	"github.com/containerd/containerd/containers"
	"github.com/containerd/containerd/namespaces"
	"github.com/containerd/containerd/oci"
	specs "github.com/opencontainers/runtime-spec/specs-go"
)

// The container's limits in the OCI spec are containerd CRI's from
// kubelet's LinuxContainerResources: CPU shares, CFS quota and period,
// memory, and never a pids limit (the CRI has none; with the systemd
// driver a scope without one gets systemd's DefaultTasksMax, which
// hack/test-vm.sh checks in the cgroup v2 guest).
func TestResourceSpecOpts(t *testing.T) {
	for _, tc := range []struct {
		desc string
		res  Resources
	}{
		{"none", Resources{}},
		{"guaranteed 250m 64Mi", Resources{CPUShares: 256, CPUQuota: 25000, MemoryLimitBytes: 64 << 20}},
		{"quota with its own period", Resources{CPUShares: 102, CPUQuota: 5000, CPUPeriod: 50000}},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			ctx := namespaces.WithNamespace(context.Background(), "test")
			sp, err := oci.GenerateSpec(ctx, nil, &containers.Container{ID: "c"}, resourceSpecOpts(tc.res, false)...)
			if err != nil {
				t.Fatal(err)
			}
			r := sp.Linux.Resources
			if r.Pids != nil {
				t.Errorf("linux.resources.pids = %+v, want none (kubelet's containers have no pids limit of their own)", *r.Pids)
			}
			var shares, period uint64
			var quota, mem int64
			if r.CPU != nil {
				shares, quota, period = deref(r.CPU.Shares), deref(r.CPU.Quota), deref(r.CPU.Period)
			}
			if r.Memory != nil {
				mem = deref(r.Memory.Limit)
			}
			wantPeriod := tc.res.CPUPeriod
			if tc.res.CPUQuota > 0 && wantPeriod == 0 {
				wantPeriod = 100000
			}
			if shares != tc.res.CPUShares || quota != tc.res.CPUQuota || period != wantPeriod || mem != tc.res.MemoryLimitBytes {
				t.Errorf("shares %d quota %d period %d memory %d, want %d %d %d %d",
					shares, quota, period, mem, tc.res.CPUShares, tc.res.CPUQuota, wantPeriod, tc.res.MemoryLimitBytes)
			}
		})
	}
}

// Swap as kubelet has containerd set it: cgroup v2 memory.swap.max in the
// unified map (0 for NoSwap, the LimitedSwap share otherwise); on v1
// memory+swap equal to the memory limit, and nothing without a limit; the
// same for a creation and an update.
func TestSwapResources(t *testing.T) {
	zero, share := int64(0), int64(300<<20)
	for _, tc := range []struct {
		desc        string
		res         Resources
		unified     bool
		wantUnified string // memory.swap.max, "" for none
		wantMemsw   int64  // linux.resources.memory.swap, 0 for none
	}{
		{"default", Resources{MemoryLimitBytes: 64 << 20}, true, "", 0},
		{"v2 NoSwap", Resources{MemoryLimitBytes: 64 << 20, SwapMax: &zero}, true, "0", 0},
		{"v2 NoSwap without a limit", Resources{SwapMax: &zero}, true, "0", 0},
		{"v2 LimitedSwap", Resources{MemoryLimitBytes: 1 << 30, SwapMax: &share}, true, "314572800", 0},
		{"v1 NoSwap", Resources{MemoryLimitBytes: 64 << 20, SwapMax: &zero}, false, "", 64 << 20},
		{"v1 NoSwap without a limit", Resources{SwapMax: &zero}, false, "", 0},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			ctx := namespaces.WithNamespace(context.Background(), "test")
			sp, err := oci.GenerateSpec(ctx, nil, &containers.Container{ID: "c"}, resourceSpecOpts(tc.res, tc.unified)...)
			if err != nil {
				t.Fatal(err)
			}
			upd := linuxResources(tc.res)
			applySwap(upd, tc.res, tc.unified)
			for what, r := range map[string]*specs.LinuxResources{"create": sp.Linux.Resources, "update": upd} {
				var memsw int64
				if r.Memory != nil {
					memsw = deref(r.Memory.Swap)
				}
				if got := r.Unified["memory.swap.max"]; got != tc.wantUnified || memsw != tc.wantMemsw {
					t.Errorf("%s: memory.swap.max %q, memory.swap %d; want %q, %d", what, got, memsw, tc.wantUnified, tc.wantMemsw)
				}
			}
		})
	}
}

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}

// On a unified cgroup v2 host an unprivileged container has its own cgroup
// namespace, as containerd's CRI plugin gives kubelet's; privileged ones and
// every container on cgroup v1 share the host's.
func TestCgroupNamespaceOpts(t *testing.T) {
	for _, tc := range []struct {
		unified, privileged, want bool
	}{
		{unified: true, want: true},
		{unified: true, privileged: true},
		{unified: false},
		{unified: false, privileged: true},
	} {
		ctx := namespaces.WithNamespace(context.Background(), "test")
		sp, err := oci.GenerateSpec(ctx, nil, &containers.Container{ID: "c"}, cgroupNamespaceOpts(tc.unified, tc.privileged)...)
		if err != nil {
			t.Fatal(err)
		}
		got := false
		for _, ns := range sp.Linux.Namespaces {
			if ns.Type == specs.CgroupNamespace {
				got = ns.Path == "" // a new one, not joined
			}
		}
		if got != tc.want {
			t.Errorf("unified %v privileged %v: private cgroup namespace %v, want %v", tc.unified, tc.privileged, got, tc.want)
		}
	}
}
