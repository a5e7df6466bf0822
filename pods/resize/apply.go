package resize

import (
	"context"
	"errors"
	"fmt"
	"math"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/nodeagent/nodeagent/cm"
)

// PodCgroup is the pod's cgroup as Apply uses it.
type PodCgroup interface {
	// ReadPod is what the pod's cgroup has now.
	ReadPod(pod *v1.Pod) (Cgroup, error)
	// SetPod writes the fields of rc that are set to the pod's cgroup.
	SetPod(pod *v1.Pod, rc cm.ResourceConfig) error
}

// ContainerCgroups updates one running container's cgroup (containerd's
// task update); Values are the container's new CPU and memory (pod and
// the container's name are for what follows from them, such as its swap
// limit, or no CFS quota for exclusive CPUs).
type ContainerCgroups interface {
	UpdateContainer(ctx context.Context, pod *v1.Pod, name, id string, v Values) error
}

// Apply is kubelet's doPodResizeAction for the in-place updates of acts
// and the pod's cgroup (restarts are the caller's, first: it stops those
// containers, as kubelet kills them before it resizes, and starts them
// again with their allocation). pod is the pod with its allocation; usage
// is each running container's current memory usage by name (for the
// check of memory limit decreases). Per resource, memory first: a pod
// cgroup limit (or CPU shares) that grows is set before the containers, one
// that shrinks after them; the first error stops it (the next sync tries
// again). actuated is called after each container update that succeeded,
// with what the container now has. noQuota: the pod's cgroup keeps no CFS
// quota (exclusive CPUs, cpuCFSQuota false), as kubelet's resize leaves it.
func Apply(ctx context.Context, pod *v1.Pod, noQuota bool, acts Actions, pc PodCgroup, cc ContainerCgroups, usage map[string]int64, actuated func(name string, v Values) error) error {
	cur, err := pc.ReadPod(pod)
	if err != nil {
		return fmt.Errorf("unable to get pod cgroup config for pod %q: %w", pod.Namespace+"/"+pod.Name, err)
	}
	want := cm.PodResourceConfig(pod, 0)
	if noQuota {
		want = cm.WithoutCPUQuota(want)
	}
	// The pod's cgroup is reconciled too when no running container needs
	// an update (a container stopped for a RestartContainer resize starts
	// again inside it).
	memory := len(acts.Update[v1.ResourceMemory]) > 0 || (want.Memory != nil && *want.Memory != cur.MemoryLimit)
	cpu := len(acts.Update[v1.ResourceCPU]) > 0 || !sameCPU(want, cur)
	if memory {
		if err := checkMemoryDecrease(want, cur, acts.Update[v1.ResourceMemory], usage); err != nil {
			return err
		}
	}
	// A limit's "none" is larger than any limit.
	lim := func(v int64) int64 {
		if v <= 0 {
			return math.MaxInt64
		}
		return v
	}
	// What each container has now, across both resources (kubelet's
	// currentContainerResources).
	now := map[string]Values{}
	for _, us := range acts.Update {
		for _, u := range us {
			now[u.Name] = u.Current
		}
	}
	update := func(name v1.ResourceName) error {
		for _, u := range acts.Update[name] {
			next := now[u.Name]
			if name == v1.ResourceMemory {
				next.MemoryLimit, next.MemoryRequest = u.Desired.MemoryLimit, u.Desired.MemoryRequest
			} else {
				next.CPULimit, next.CPURequest = u.Desired.CPULimit, u.Desired.CPURequest
			}
			if err := cc.UpdateContainer(ctx, pod, u.Name, u.ID, next); err != nil {
				return fmt.Errorf("update container %q resources: %w", u.Name, err)
			}
			now[u.Name] = next
			if err := actuated(u.Name, next); err != nil {
				return err
			}
		}
		return nil
	}
	if memory {
		newLim := cur.MemoryLimit
		if want.Memory != nil {
			newLim = *want.Memory
		}
		set := func() error { return pc.SetPod(pod, cm.ResourceConfig{Memory: &newLim}) }
		if err := ordered(lim(newLim) > lim(cur.MemoryLimit), lim(newLim) < lim(cur.MemoryLimit), set, func() error { return update(v1.ResourceMemory) }); err != nil {
			return err
		}
	}
	if cpu {
		newQuota, period := cur.CPUQuota, uint64(cm.QuotaPeriod)
		if want.CPUQuota != nil {
			newQuota = *want.CPUQuota
		}
		shares := *want.CPUShares
		setQuota := func() error {
			q := newQuota
			if q <= 0 {
				q = -1
			}
			return pc.SetPod(pod, cm.ResourceConfig{CPUQuota: &q, CPUPeriod: &period})
		}
		setShares := func() error { return pc.SetPod(pod, cm.ResourceConfig{CPUShares: &shares}) }
		quotaUp, quotaDown := lim(newQuota) > lim(cur.CPUQuota), lim(newQuota) < lim(cur.CPUQuota)
		sharesUp, sharesDown := shares > cur.CPUShares, shares < cur.CPUShares
		steps := []struct {
			do bool
			f  func() error
		}{
			{quotaUp, setQuota}, {sharesUp, setShares},
			{true, func() error { return update(v1.ResourceCPU) }},
			{sharesDown, setShares}, {quotaDown, setQuota},
		}
		for _, s := range steps {
			if s.do {
				if err := s.f(); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// sameCPU: the pod cgroup has the CPU shares (weight on cgroup v2) and
// quota of want.
func sameCPU(want cm.ResourceConfig, cur Cgroup) bool {
	if want.CPUShares != nil {
		if cur.CPUWeight != 0 {
			if cm.SharesToWeight(*want.CPUShares) != cur.CPUWeight {
				return false
			}
		} else if *want.CPUShares != cur.CPUShares {
			return false
		}
	}
	if want.CPUQuota != nil && *want.CPUQuota <= 0 {
		return cur.CPUQuota <= 0 // none either way
	}
	return want.CPUQuota == nil || (*want.CPUQuota == cur.CPUQuota && cur.CPUPeriod == cm.QuotaPeriod)
}

// ordered sets the pod's value before the containers' update when it
// grows, after it when it shrinks.
func ordered(up, down bool, setPod, containers func() error) error {
	if up {
		if err := setPod(); err != nil {
			return err
		}
	}
	if err := containers(); err != nil {
		return err
	}
	if down {
		return setPod()
	}
	return nil
}

// checkMemoryDecrease is kubelet's validateMemoryResizeAction: a memory
// limit (pod or container) may not be set at or below current usage.
func checkMemoryDecrease(want cm.ResourceConfig, cur Cgroup, updates []ContainerUpdate, usage map[string]int64) error {
	var errs []error
	if want.Memory != nil && (cur.MemoryLimit == 0 || *want.Memory < cur.MemoryLimit) && cur.MemoryUsage >= *want.Memory {
		errs = append(errs, fmt.Errorf("attempting to set pod memory limit (%d) below current usage (%d)", *want.Memory, cur.MemoryUsage))
	}
	for _, u := range updates {
		d := u.Desired.MemoryLimit
		if d == 0 || (u.Current.MemoryLimit != 0 && d >= u.Current.MemoryLimit) {
			continue
		}
		used, ok := usage[u.Name]
		if !ok {
			errs = append(errs, fmt.Errorf("missing container %q memory usage", u.Name))
		} else if used >= d {
			errs = append(errs, fmt.Errorf("attempting to set container %q memory limit (%d) below current usage (%d)", u.Name, d, used))
		}
	}
	switch len(errs) {
	case 0:
		return nil
	case 1:
		return fmt.Errorf("cannot decrease memory limits: %w", errs[0])
	}
	return fmt.Errorf("cannot decrease memory limits: [%w]", joinComma(errs))
}

// joinComma joins errors as apimachinery's aggregate prints them.
func joinComma(errs []error) error {
	msg := ""
	for i, e := range errs {
		if i > 0 {
			msg += ", "
		}
		msg += e.Error()
	}
	return errors.New(msg)
}

// Requirements is base (a container's allocation) with its CPU and memory
// set to v: what an actuated record holds.
func Requirements(base v1.ResourceRequirements, v Values) v1.ResourceRequirements {
	out := *base.DeepCopy()
	out.Claims = nil
	set := func(l *v1.ResourceList, name v1.ResourceName, q resource.Quantity, zero bool) {
		if zero {
			delete(*l, name)
			return
		}
		if *l == nil {
			*l = v1.ResourceList{}
		}
		(*l)[name] = q
	}
	set(&out.Requests, v1.ResourceCPU, *resource.NewMilliQuantity(v.CPURequest, resource.DecimalSI), v.CPURequest == 0)
	set(&out.Limits, v1.ResourceCPU, *resource.NewMilliQuantity(v.CPULimit, resource.DecimalSI), v.CPULimit == 0)
	set(&out.Requests, v1.ResourceMemory, *resource.NewQuantity(v.MemoryRequest, resource.BinarySI), v.MemoryRequest == 0)
	set(&out.Limits, v1.ResourceMemory, *resource.NewQuantity(v.MemoryLimit, resource.BinarySI), v.MemoryLimit == 0)
	return out
}
