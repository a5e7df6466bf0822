package runtime

import (
	"context"
	"fmt"

	"github.com/containerd/containerd"
	specs "github.com/opencontainers/runtime-spec/specs-go"
)

// UpdateContainerResources sets the CPU and memory limits of a running
// container's cgroup through containerd's task Update (runc update), as
// containerd's CRI UpdateContainerResources does for kubelet's in-place
// resize: cpu shares, CFS quota and period, memory limit. A zero quota or
// memory limit means "none" (-1 written to the cgroup). The container's
// stored OCI spec keeps its creation values: what a container has is read
// from its cgroup (package resize), not from the spec.
// A container without a running task is ErrFailedPrecondition.
func (r *Runtime) UpdateContainerResources(ctx context.Context, id string, res Resources) error {
	ctx, cancel := r.callCtx(ctx)
	defer cancel()
	c, err := r.client.LoadContainer(ctx, id)
	if err != nil {
		return fmt.Errorf("runtime: update %s: %w", id, convertErr(err))
	}
	task, err := c.Task(ctx, nil)
	if err != nil {
		return fmt.Errorf("runtime: update %s: %w: no running task: %w", id, ErrFailedPrecondition, convertErr(err))
	}
	lr := linuxResources(res)
	applySwap(lr, res, r.unified)
	if err := task.Update(ctx, containerd.WithResources(lr)); err != nil {
		return fmt.Errorf("runtime: update %s: %w", id, convertErr(err))
	}
	return nil
}

// UpdateContainerCPUSet sets a running container's cpuset.cpus and
// nothing else (runc update changes only what the update names), as the
// CPU manager's reconcile loop has kubelet's runtime do.
// A container without a running task is ErrFailedPrecondition.
func (r *Runtime) UpdateContainerCPUSet(ctx context.Context, id, cpus string) error {
	ctx, cancel := r.callCtx(ctx)
	defer cancel()
	c, err := r.client.LoadContainer(ctx, id)
	if err != nil {
		return fmt.Errorf("runtime: update cpuset of %s: %w", id, convertErr(err))
	}
	task, err := c.Task(ctx, nil)
	if err != nil {
		return fmt.Errorf("runtime: update cpuset of %s: %w: no running task: %w", id, ErrFailedPrecondition, convertErr(err))
	}
	lr := &specs.LinuxResources{CPU: &specs.LinuxCPU{Cpus: cpus}}
	if err := task.Update(ctx, containerd.WithResources(lr)); err != nil {
		return fmt.Errorf("runtime: update cpuset of %s: %w", id, convertErr(err))
	}
	return nil
}

// linuxResources is the OCI form of res for an update: every field set, so
// that a limit removed in res is removed from the cgroup (-1).
func linuxResources(res Resources) *specs.LinuxResources {
	shares := res.CPUShares
	quota := int64(-1)
	period := res.CPUPeriod
	if period == 0 {
		period = 100000 // kubelet's cpuCFSQuotaPeriod
	}
	if res.CPUQuota > 0 {
		quota = res.CPUQuota
	}
	mem := int64(-1)
	if res.MemoryLimitBytes > 0 {
		mem = res.MemoryLimitBytes
	}
	lr := &specs.LinuxResources{
		CPU:    &specs.LinuxCPU{Quota: &quota, Period: &period},
		Memory: &specs.LinuxMemory{Limit: &mem},
	}
	if shares > 0 {
		lr.CPU.Shares = &shares
	}
	return lr
}
