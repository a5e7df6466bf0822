package resize

import (
	"fmt"
	"strings"

	v1 "k8s.io/api/core/v1"
	resourcehelper "k8s.io/component-helpers/resource"

	"github.com/nodeagent/nodeagent/kubetypes"
	"github.com/nodeagent/nodeagent/pods/admission"
)

// Reasons and messages of the PodResizePending condition, kubelet 1.34's
// (pkg/kubelet/allocation).
const (
	ReasonInfeasible = v1.PodReasonInfeasible // "Infeasible"
	ReasonDeferred   = v1.PodReasonDeferred   // "Deferred"
	// ReasonError is PodResizeInProgress's reason when actuating failed.
	ReasonError = v1.PodReasonError

	msgStaticPod = "In-place resize of static-pods is not supported"
	// msgQOSChange is the API server's validation message; kubelet relies
	// on it, nodeagent checks again since static and mirror sources differ.
	msgQOSChange = "Pod QOS Class may not change as a result of resizing"
	// msgPodLevelResources is the 1.34 API server's validation message
	// for a resize of a pod with pod-level resources (kubelet 1.34 has no
	// check of its own; the API server never lets one through).
	msgPodLevelResources = "pods with pod-level resources cannot be resized"
	// msgNonResizable: only CPU and memory of app containers and sidecars
	// change in place; the API server refuses other changes.
	msgNonResizable = "only cpu and memory resources of containers and restartable init containers are resizable"

	// msgStaticCPUs: kubelet 1.34 refuses a CPU resize of a Guaranteed
	// pod under the static CPU manager policy (without the alpha gate
	// InPlacePodVerticalScalingExclusiveCPUs).
	msgStaticCPUs = `Resize is infeasible for Guaranteed Pods alongside CPU Manager policy "static"`

	rejectedPrefix = "Pod was rejected: "
)

// Resizable reports whether a container of pod is resizable in place:
// app containers and sidecars (kubelet's IsResizableContainer).
func Resizable(c *v1.Container, isInit bool) bool {
	return !isInit || kubetypes.IsSidecar(c)
}

// Allocation is a pod's allocated (or actuated) resources by container name.
type Allocation map[string]v1.ResourceRequirements

// AllocationOf is pod's containers' resources as its spec has them.
func AllocationOf(pod *v1.Pod) Allocation {
	a := Allocation{}
	for _, cs := range [][]v1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for i := range cs {
			a[cs[i].Name] = *cs[i].Resources.DeepCopy()
		}
	}
	return a
}

// WithAllocation returns pod with its containers' resources replaced by a
// (a copy when anything changed) and whether a differs from the spec
// (kubelet's UpdatePodFromAllocation). Containers absent from a keep
// their spec.
func WithAllocation(pod *v1.Pod, a Allocation) (*v1.Pod, bool) {
	if a == nil {
		return pod, false
	}
	changed := false
	var out *v1.Pod
	for _, init := range []bool{true, false} {
		cs := pod.Spec.Containers
		if init {
			cs = pod.Spec.InitContainers
		}
		for i := range cs {
			c := &cs[i]
			r, ok := a[c.Name]
			if !ok || resourcesEqual(c.Resources, r) {
				continue
			}
			if out == nil {
				out = pod.DeepCopy()
			}
			changed = true
			if init {
				out.Spec.InitContainers[i].Resources = *r.DeepCopy()
			} else {
				out.Spec.Containers[i].Resources = *r.DeepCopy()
			}
		}
	}
	if out == nil {
		return pod, false
	}
	return out, changed
}

// resourcesEqual compares requests and limits by value.
func resourcesEqual(a, b v1.ResourceRequirements) bool {
	return listEqual(a.Requests, b.Requests) && listEqual(a.Limits, b.Limits)
}

func listEqual(a, b v1.ResourceList) bool {
	if len(a) != len(b) {
		return false
	}
	for k, q := range a {
		o, ok := b[k]
		if !ok || q.Cmp(o) != 0 {
			return false
		}
	}
	return true
}

// Decision is what Decide says of a pod whose spec may differ from its
// allocation.
type Decision struct {
	// Resize: the spec's resources differ from the allocation.
	Resize bool
	// Allocate: the spec's resources become the allocation.
	Allocate bool
	// Reason and Message of PodResizePending when Resize and not Allocate.
	Reason, Message string
}

// Decide is kubelet's handlePodResourcesResize and canResizePod as a pure
// function: desired is the pod as its source has it, allocated the same
// pod with its allocation (WithAllocation), others the other admitted pods
// with theirs, allocatable the node's; staticCPUs: the node's CPU manager
// policy is static (kubelet 1.34 refuses CPU resizes of pods with
// exclusive CPUs).
func Decide(desired, allocated *v1.Pod, others []*v1.Pod, allocatable v1.ResourceList, staticCPUs bool) Decision {
	if !differs(desired, allocated) {
		return Decision{}
	}
	d := Decision{Resize: true, Reason: ReasonInfeasible}
	if kubetypes.IsStaticPod(desired) {
		d.Message = msgStaticPod
		return d
	}
	// The 1.34 API server refuses every resize of a pod with pod-level
	// resources (its message); one that arrives anyway (a newer control
	// plane) is not applied, and says so, rather than half applied.
	if resourcehelper.IsPodLevelResourcesSet(desired) || resourcehelper.IsPodLevelResourcesSet(allocated) {
		d.Message = msgPodLevelResources
		return d
	}
	if !onlyResizableChanged(desired, allocated) {
		d.Message = msgNonResizable
		return d
	}
	if kubetypes.PodQOSClass(desired) != kubetypes.PodQOSClass(allocated) {
		d.Message = msgQOSChange
		return d
	}
	if staticCPUs && kubetypes.PodQOSClass(desired) == v1.PodQOSGuaranteed && cpuRequestChanged(desired, allocated) {
		d.Message = msgStaticCPUs
		return d
	}
	reqs := resourcehelper.PodRequests(desired, resourcehelper.PodResourcesOptions{})
	cpuReq, memReq := reqs.Cpu().MilliValue(), reqs.Memory().Value()
	cpuCap, memCap := allocatable.Cpu().MilliValue(), allocatable.Memory().Value()
	switch {
	case memReq > memCap:
		d.Message = fmt.Sprintf("Node didn't have enough capacity: memory, requested: %d, capacity: %d", memReq, memCap)
		return d
	case cpuReq > cpuCap:
		d.Message = fmt.Sprintf("Node didn't have enough capacity: cpu, requested: %d, capacity: %d", cpuReq, cpuCap)
		return d
	}
	if ok, _, msg := admission.FitsNode(desired, others, allocatable, 0); !ok {
		return Decision{Resize: true, Reason: ReasonDeferred, Message: strings.TrimPrefix(msg, rejectedPrefix)}
	}
	return Decision{Resize: true, Allocate: true}
}

// cpuRequestChanged: a resizable container's CPU request differs.
func cpuRequestChanged(desired, allocated *v1.Pod) bool {
	want := AllocationOf(allocated)
	for _, init := range []bool{true, false} {
		cs := desired.Spec.Containers
		if init {
			cs = desired.Spec.InitContainers
		}
		for i := range cs {
			if !Resizable(&cs[i], init) {
				continue
			}
			a := want[cs[i].Name].Requests[v1.ResourceCPU]
			if d := cs[i].Resources.Requests[v1.ResourceCPU]; !d.Equal(a) {
				return true
			}
		}
	}
	return false
}

// differs: some container's resources differ between the two pods.
func differs(a, b *v1.Pod) bool {
	_, changed := WithAllocation(a, AllocationOf(b))
	return changed
}

// onlyResizableChanged: only CPU and memory of resizable containers differ.
func onlyResizableChanged(desired, allocated *v1.Pod) bool {
	want := AllocationOf(allocated)
	for _, init := range []bool{true, false} {
		cs := desired.Spec.Containers
		if init {
			cs = desired.Spec.InitContainers
		}
		for i := range cs {
			c := &cs[i]
			r, ok := want[c.Name]
			if !ok || resourcesEqual(c.Resources, r) {
				continue
			}
			if !Resizable(c, init) || !resourcesEqual(withoutCPUMemory(c.Resources), withoutCPUMemory(r)) {
				return false
			}
		}
	}
	return true
}

func withoutCPUMemory(r v1.ResourceRequirements) v1.ResourceRequirements {
	out := v1.ResourceRequirements{Requests: v1.ResourceList{}, Limits: v1.ResourceList{}}
	for k, q := range r.Requests {
		if k != v1.ResourceCPU && k != v1.ResourceMemory {
			out.Requests[k] = q
		}
	}
	for k, q := range r.Limits {
		if k != v1.ResourceCPU && k != v1.ResourceMemory {
			out.Limits[k] = q
		}
	}
	return out
}
