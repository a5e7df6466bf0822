package pods

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodeagent/nodeagent/cm"
	"github.com/nodeagent/nodeagent/pleg"
	"github.com/nodeagent/nodeagent/pods/containerspec"
	"github.com/nodeagent/nodeagent/pods/resize"
	"github.com/nodeagent/nodeagent/runtime"
)

// ResizeCgroups is what an in-place resize needs of the pod cgroups;
// *cm.Manager implements it.
type ResizeCgroups interface {
	PodDir(pod *v1.Pod) (string, bool)
	SetPod(pod *v1.Pod, rc cm.ResourceConfig) error
}

// ContainerUpdater updates a running container's cgroup;
// *runtime.Runtime implements it.
type ContainerUpdater interface {
	UpdateContainerResources(ctx context.Context, id string, res runtime.Resources) error
}

// podResizer is kubelet's in-place pod resize for the workers (package
// resize holds the decisions and the allocation store): it allocates a
// changed spec when it fits, brings running containers to their
// allocation and says what the status reports. One serves every worker;
// its state is in the store. A nil *podResizer does nothing: the pod's
// spec is what runs (unit tests without cgroups).
type podResizer struct {
	// staticCPUs: the CPU manager's policy is static; cpus is the CPU
	// manager (nil: none).
	staticCPUs bool
	cpus       CPUs
	// noCPUQuota: cpuCFSQuota is false; no container or pod cgroup gets
	// a CFS quota in a resize either.
	noCPUQuota bool
	store      *resize.Store
	cgroups    ResizeCgroups    // nil: no pod cgroups, resizes are Infeasible
	rt         ContainerUpdater // nil: resizes are Infeasible
	fs         resize.CgroupFS
	// others are the admitted pods but uid, with their allocations.
	others func(uid types.UID) []*v1.Pod
	// allocatable is the node's allocatable (nil: unknown).
	allocatable func(ctx context.Context) v1.ResourceList
	event       eventFunc // nil: no events
	// swap is a container's swap limit for its new memory (nil: none set).
	swap func(pod *v1.Pod, c *v1.Container) *int64
	log  *slog.Logger
}

// newPodResizer is the resizer of m's workers: allocations checkpointed
// in o.RootDir, pod cgroups from o.Cgroups, container updates through
// o.Runtime. An unreadable checkpoint is logged and starts empty, as
// kubelet does.
func newPodResizer(o Options, m *Manager) *podResizer {
	store, err := resize.Open(o.RootDir)
	if err != nil {
		o.Logger.Error("cannot read the pod allocation checkpoint; starting empty", "err", err)
	}
	r := &podResizer{staticCPUs: o.CPUs != nil && o.CPUs.Static(), cpus: o.CPUs, noCPUQuota: o.NoCPUQuota, store: store, fs: resize.HostCgroupFS(), others: m.admittedOthers, event: m.deps.event, log: o.Logger}
	if c, ok := o.Cgroups.(ResizeCgroups); ok {
		r.cgroups = c
	}
	if o.Cgroups != nil {
		r.swap = o.Cgroups.SwapMax
	}
	if u, ok := o.Runtime.(ContainerUpdater); ok {
		r.rt = u
	}
	r.allocatable = func(ctx context.Context) v1.ResourceList {
		if n := o.Node(); n != nil {
			return n.Status.Allocatable
		}
		ctx, cancel := context.WithTimeout(ctx, nodeAnywayTimeout)
		defer cancel()
		if n, err := o.NodeAnyway(ctx); err == nil && n != nil {
			return n.Status.Allocatable
		}
		return nil
	}
	return r
}

// msgNoPodCgroups: resizing needs the pod cgroups (cgroupsPerQOS) and a
// runtime that updates containers.
const msgNoPodCgroups = "In-place resize needs pod cgroups (cgroupsPerQOS: true) on this node"

// withAllocation is pod with its allocated resources.
func (r *podResizer) withAllocation(pod *v1.Pod) *v1.Pod {
	if r == nil {
		return pod
	}
	a, ok := r.store.Allocated(pod.UID)
	if !ok {
		return pod
	}
	p, _ := resize.WithAllocation(pod, a)
	return p
}

// admitted records an admitted pod's allocation unless it has one (an
// agent restart keeps what was allocated before).
func (r *podResizer) admitted(pod *v1.Pod) {
	if r == nil {
		return
	}
	if _, ok := r.store.Allocated(pod.UID); ok {
		return
	}
	if err := r.store.SetAllocated(pod); err != nil {
		r.log.Error("cannot checkpoint a pod's allocation", "pod", pod.Namespace+"/"+pod.Name, "podUID", pod.UID, "err", err)
	}
}

// remove forgets a pod that is gone.
func (r *podResizer) remove(uid types.UID) {
	if r == nil {
		return
	}
	if err := r.store.Remove(uid); err != nil {
		r.log.Error("cannot checkpoint allocations", "podUID", uid, "err", err)
	}
}

// removeOrphans forgets the allocations of pods that are not known (gone
// while the agent was down), as kubelet's RemoveOrphanedPods.
func (r *podResizer) removeOrphans(known func(types.UID) bool) {
	if r == nil {
		return
	}
	for _, uid := range r.store.UIDs() {
		if !known(uid) {
			r.remove(uid)
		}
	}
}

// deferred reports whether pod uid's resize waits for room on the node.
func (r *podResizer) deferred(uid types.UID) bool { return r != nil && r.store.Deferred(uid) }

// allocate is kubelet's handlePodResourcesResize: when pod's spec differs
// from its allocation, the spec becomes the allocation if it fits (and
// PodResizeInProgress is set), else PodResizePending says why. It returns
// the pod with its allocation, which is what runs.
func (r *podResizer) allocate(ctx context.Context, pod *v1.Pod, now time.Time) *v1.Pod {
	if r == nil {
		return pod
	}
	a, ok := r.store.Allocated(pod.UID)
	if !ok {
		r.admitted(pod)
		return pod
	}
	allocated, changed := resize.WithAllocation(pod, a)
	if !changed {
		r.store.SetPending(pod.UID, "", "", 0, now)
		return pod
	}
	var alloc v1.ResourceList
	if r.allocatable != nil {
		alloc = r.allocatable(ctx)
	}
	d := resize.Decide(pod, allocated, r.others(pod.UID), alloc, r.staticCPUs)
	if d.Resize && alloc == nil {
		d.Allocate, d.Reason, d.Message = false, resize.ReasonDeferred, "the node's allocatable is not known yet"
	}
	if d.Resize && d.Allocate && !r.canActuate(pod) {
		d.Allocate, d.Reason, d.Message = false, resize.ReasonInfeasible, msgNoPodCgroups
	}
	switch {
	case !d.Resize:
		r.store.SetPending(pod.UID, "", "", 0, now)
		return allocated
	case !d.Allocate:
		r.store.SetPending(pod.UID, d.Reason, d.Message, pod.Generation, now)
		return allocated
	}
	if err := r.store.SetAllocated(pod); err != nil {
		r.log.Error("cannot checkpoint a pod's allocation", "podUID", pod.UID, "err", err)
		return allocated
	}
	r.log.Info("resize allocated", "podUID", pod.UID)
	r.store.SetPending(pod.UID, "", "", 0, now)
	// A new resize: a new condition with this generation, no old error.
	r.store.ClearInProgress(pod.UID)
	r.store.SetInProgress(pod.UID, "", "", pod.Generation, now)
	return pod
}

// canActuate: the node can change pod's cgroups in place.
func (r *podResizer) canActuate(pod *v1.Pod) bool {
	if r.cgroups == nil || r.rt == nil {
		return false
	}
	_, ok := r.cgroups.PodDir(pod)
	return ok
}

// actuate brings the running containers of pod (with its allocation) to
// their allocation: in-place updates now; the containers whose
// resizePolicy needs a restart are returned for the caller to stop (the
// plan starts them again with their allocation). PodResizeInProgress stays
// while anything differs and says Error with the failure's message.
func (r *podResizer) actuate(ctx context.Context, pod *v1.Pod, rs pleg.PodStatus, now time.Time) ([]resize.Restart, error) {
	if r == nil || !r.canActuate(pod) {
		return nil, nil
	}
	running := map[string]string{}
	byID := map[string]runtime.Container{}
	for _, c := range rs.Containers {
		if c.State == runtime.StateRunning {
			if _, seen := running[c.Name]; !seen {
				running[c.Name] = c.ID
				byID[c.ID] = c
			}
		}
	}
	acts := resize.ComputeActions(pod, running, r.store.Actuated(pod.UID))
	if acts.Empty() && !r.store.InProgress(pod.UID) {
		return nil, nil
	}
	r.store.SetInProgress(pod.UID, "", "", pod.Generation, now)
	if len(acts.Restart) > 0 {
		// As kubelet, the containers to restart stop before the pod's
		// cgroup shrinks (a child's CPU quota may not exceed its
		// parent's); the next sync resizes the rest.
		return acts.Restart, nil
	}
	usage := map[string]int64{}
	for _, u := range acts.Update[v1.ResourceMemory] {
		if dir, err := resize.Dir(byID[u.ID].CgroupsPath); err == nil {
			if cg, err := r.fs.Read(dir); err == nil {
				usage[u.Name] = cg.MemoryUsage
			}
		}
	}
	alloc := resize.AllocationOf(pod)
	noQuota := r.noCPUQuota || (r.cpus != nil && r.cpus.PodExclusive(pod))
	err := resize.Apply(ctx, pod, noQuota, acts, podCgroupOf{r}, containerCgroupsOf{r}, usage, func(name string, v resize.Values) error {
		return r.store.SetActuated(pod.UID, name, resize.Requirements(alloc[name], v))
	})
	if err != nil {
		r.store.SetInProgress(pod.UID, resize.ReasonError, err.Error(), pod.Generation, now)
		return nil, fmt.Errorf("resize: %w", err)
	}
	if resize.ComputeActions(pod, running, r.store.Actuated(pod.UID)).Empty() {
		r.completed(pod)
	}
	return nil, nil
}

// completed clears PodResizeInProgress and records kubelet's
// ResizeCompleted event if it was set.
func (r *podResizer) completed(pod *v1.Pod) {
	if r.store.ClearInProgress(pod.UID) && r.event != nil {
		r.event(pod, v1.EventTypeNormal, "ResizeCompleted", resize.CompletedMessage(pod))
	}
}

// started records what a container was started with (its allocation).
func (r *podResizer) started(pod *v1.Pod, c *v1.Container) {
	if r == nil {
		return
	}
	if err := r.store.SetActuated(pod.UID, c.Name, c.Resources); err != nil {
		r.log.Error("cannot checkpoint actuated resources", "podUID", pod.UID, "container", c.Name, "err", err)
	}
}

// statusInputs are, for the status of pod (with its allocation), what each
// running container's cgroup has (by container ID) and the resize
// conditions.
func (r *podResizer) statusInputs(pod *v1.Pod, rs pleg.PodStatus) (map[string]v1.ResourceRequirements, []v1.PodCondition) {
	if r == nil {
		return nil, nil
	}
	alloc := resize.AllocationOf(pod)
	actuated := r.store.Actuated(pod.UID)
	out := map[string]v1.ResourceRequirements{}
	for _, c := range rs.Containers {
		if c.State != runtime.StateRunning {
			continue
		}
		a, ok := alloc[c.Name]
		if !ok {
			continue
		}
		dir, err := resize.Dir(c.CgroupsPath)
		var cg resize.Cgroup
		if err == nil {
			cg, err = r.fs.Read(dir)
		}
		if err != nil {
			// The container may have just exited. What was last set on
			// it is reported, never an allocation not applied yet.
			r.log.Debug("cannot read a container's cgroup", "containerID", c.ID, "err", err)
			if act, ok := actuated[c.Name]; ok {
				out[c.ID] = act
			}
			continue
		}
		out[c.ID] = resize.Applied(a, actuated[c.Name], cg, r.fs.V2)
	}
	return out, r.store.Conditions(pod.UID)
}

// podCgroupOf reads and sets a pod's cgroup.
type podCgroupOf struct{ r *podResizer }

func (p podCgroupOf) ReadPod(pod *v1.Pod) (resize.Cgroup, error) {
	dir, ok := p.r.cgroups.PodDir(pod)
	if !ok {
		return resize.Cgroup{}, errors.New("no pod cgroup")
	}
	return p.r.fs.Read(dir)
}

func (p podCgroupOf) SetPod(pod *v1.Pod, rc cm.ResourceConfig) error {
	return p.r.cgroups.SetPod(pod, rc)
}

// containerCgroupsOf updates a container to Values through the runtime,
// with the cgroup settings containerspec makes of them and the swap limit
// that follows from its new memory (kubelet's resize sets it too; on
// cgroup v1 memory+swap must move with the memory limit).
type containerCgroupsOf struct{ r *podResizer }

func (c containerCgroupsOf) UpdateContainer(ctx context.Context, pod *v1.Pod, name, id string, v resize.Values) error {
	ct := v1.Container{Resources: resize.Requirements(v1.ResourceRequirements{}, v)}
	res := containerspec.Resources(&ct)
	if c.r.noCPUQuota {
		res.CPUQuota, res.CPUPeriod = 0, 0 // cpuCFSQuota: false
	} else if c.r.cpus != nil {
		// A container with exclusive CPUs keeps no CFS quota.
		for _, cs := range [][]v1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
			for i := range cs {
				if cs[i].Name == name && c.r.cpus.ContainerExclusive(pod, &cs[i]) {
					res.CPUQuota, res.CPUPeriod = 0, 0
				}
			}
		}
	}
	if c.r.swap != nil {
		res.SwapMax = c.r.swap(pod, &ct)
	}
	return c.r.rt.UpdateContainerResources(ctx, id, res)
}

// resizeRunning brings the pod's running containers to their allocation
// (podResizer.actuate) and stops those whose resizePolicy says
// RestartContainer; the plan starts them again with their allocation. It
// reports whether it stopped any (the caller syncs again once the PLEG saw
// it). A failed in-place update is returned after the stops: the
// condition says it, the next sync tries again.
func (w *worker) resizeRunning(ctx context.Context, pod *v1.Pod, rs pleg.PodStatus, now time.Time) (bool, error) {
	restarts, err := w.d.resize.actuate(ctx, pod, rs, now)
	byID := map[string]runtime.Container{}
	for _, c := range rs.Containers {
		byID[c.ID] = c
	}
	acted := false
	var errs []error
	if err != nil {
		errs = append(errs, err)
	}
	for _, r := range restarts {
		c, ok := byID[r.ID]
		if !ok || w.tasks.reaped[r.ID] {
			continue
		}
		acted = true
		w.log.Info("restarting container to resize it", "container", r.Name, "containerID", r.ID)
		if err := w.killer.kill(ctx, pod, c, gracePeriod(pod), r.Message, w.podIP(pod)); err != nil {
			errs = append(errs, err)
			continue
		}
		w.tasks.reaped[r.ID] = true
	}
	return acted, errors.Join(errs...)
}
