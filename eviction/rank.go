package eviction

import (
	"sort"

	v1 "k8s.io/api/core/v1"
	resourcehelper "k8s.io/component-helpers/resource"

	sig "github.com/nodeagent/nodeagent/internal/evictionapi"
	"github.com/nodeagent/nodeagent/kubetypes"
)

// Resources kubelet names in eviction messages besides memory and
// ephemeral-storage.
const (
	resourceInodes v1.ResourceName = "inodes"
	resourcePIDs   v1.ResourceName = "pids"
)

// signalResource is the resource each signal reclaims (kubelet's
// signalToResource).
var signalResource = map[string]v1.ResourceName{
	sig.SignalMemoryAvailable:            v1.ResourceMemory,
	sig.SignalAllocatableMemoryAvailable: v1.ResourceMemory,
	sig.SignalNodeFsAvailable:            v1.ResourceEphemeralStorage,
	sig.SignalImageFsAvailable:           v1.ResourceEphemeralStorage,
	sig.SignalContainerFsAvailable:       v1.ResourceEphemeralStorage,
	sig.SignalNodeFsInodesFree:           resourceInodes,
	sig.SignalImageFsInodesFree:          resourceInodes,
	sig.SignalContainerFsInodesFree:      resourceInodes,
	sig.SignalPIDAvailable:               resourcePIDs,
}

// isDiskSignal reports whether node-level disk reclaim (dead containers,
// unused images) may relieve the signal.
func isDiskSignal(s string) bool {
	r := signalResource[s]
	return r == v1.ResourceEphemeralStorage || r == resourceInodes
}

// ContainerUsage is one container's measured usage.
type ContainerUsage struct {
	Name string
	// Memory is the working set in bytes; Disk the bytes of its logs
	// (kubelet adds the writable layer, which lives in containerd's
	// snapshotter and is not measured here).
	Memory, Disk int64
}

// PodUsage is a pod's measured usage.
type PodUsage struct {
	Memory     int64 // working set of the pod's cgroup, bytes
	Disk       int64 // bytes of its local volumes and logs on the node filesystem
	Inodes     int64 // inodes of the same
	Processes  int64 // tasks in the pod's cgroup
	Containers []ContainerUsage
}

// UsageFunc returns a pod's usage; ok is false when it was not measured.
type UsageFunc func(pod *v1.Pod) (u PodUsage, ok bool)

// cmpFunc orders two pods: negative when p1 is evicted first.
type cmpFunc func(p1, p2 *v1.Pod) int

// Rank orders pods for eviction under signal, first to evict first, as
// kubelet does: memory by (usage above requests, lower priority, larger
// usage minus request); disk and inodes likewise with disk usage; PIDs by
// (lower priority, more processes). Pods without usage figures go first.
func Rank(signal string, pods []*v1.Pod, usage UsageFunc) {
	var cmps []cmpFunc
	switch signalResource[signal] {
	case v1.ResourceMemory:
		cmps = []cmpFunc{
			exceeds(usage, v1.ResourceMemory, func(u PodUsage) int64 { return u.Memory }),
			priority,
			larger(usage, v1.ResourceMemory, func(u PodUsage) int64 { return u.Memory }),
		}
	case v1.ResourceEphemeralStorage:
		cmps = []cmpFunc{
			exceeds(usage, v1.ResourceEphemeralStorage, func(u PodUsage) int64 { return u.Disk }),
			priority,
			larger(usage, v1.ResourceEphemeralStorage, func(u PodUsage) int64 { return u.Disk }),
		}
	case resourceInodes:
		// As kubelet: inodes are compared with the inodes request (none
		// exists, so any use exceeds it), then reduced by the
		// ephemeral-storage request.
		cmps = []cmpFunc{
			exceeds(usage, resourceInodes, func(u PodUsage) int64 { return u.Inodes }),
			priority,
			larger(usage, v1.ResourceEphemeralStorage, func(u PodUsage) int64 { return u.Inodes }),
		}
	case resourcePIDs:
		cmps = []cmpFunc{priority, func(p1, p2 *v1.Pod) int {
			u1, ok1 := usage(p1)
			u2, ok2 := usage(p2)
			if !ok1 || !ok2 {
				return cmpBool(!ok1, !ok2)
			}
			return cmpInt(u2.Processes, u1.Processes)
		}}
	}
	sort.SliceStable(pods, func(i, j int) bool {
		for _, c := range cmps {
			if r := c(pods[i], pods[j]); r != 0 {
				return r < 0
			}
		}
		return false
	})
}

// request is the pod's effective request for name (kubelet's
// GetResourceRequestQuantity: containers, init containers and overhead,
// the overhead only onto a request that is not zero). A pod with
// pod-level resources counts those alone: its containers' requests,
// ephemeral-storage included, do not count.
func request(pod *v1.Pod, name v1.ResourceName) int64 {
	q := resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{
		SkipContainerLevelResources: resourcehelper.IsPodLevelResourcesSet(pod),
		ExcludeOverhead:             true,
	})[name]
	if o, ok := pod.Spec.Overhead[name]; ok && !q.IsZero() {
		q.Add(o)
	}
	return q.Value()
}

// exceeds puts pods whose usage exceeds their request first.
func exceeds(usage UsageFunc, name v1.ResourceName, of func(PodUsage) int64) cmpFunc {
	return func(p1, p2 *v1.Pod) int {
		u1, ok1 := usage(p1)
		u2, ok2 := usage(p2)
		if !ok1 || !ok2 {
			return cmpBool(!ok1, !ok2)
		}
		return cmpBool(of(u1) > request(p1, name), of(u2) > request(p2, name))
	}
}

// larger puts pods using more above their request first.
func larger(usage UsageFunc, name v1.ResourceName, of func(PodUsage) int64) cmpFunc {
	return func(p1, p2 *v1.Pod) int {
		u1, ok1 := usage(p1)
		u2, ok2 := usage(p2)
		if !ok1 || !ok2 {
			return cmpBool(!ok1, !ok2)
		}
		return cmpInt(of(u2)-request(p2, name), of(u1)-request(p1, name))
	}
}

// priority puts lower-priority pods first.
func priority(p1, p2 *v1.Pod) int {
	return cmpInt(int64(kubetypes.Priority(p1)), int64(kubetypes.Priority(p2)))
}

// cmpBool puts true before false.
func cmpBool(a, b bool) int {
	switch {
	case a == b:
		return 0
	case a:
		return -1
	}
	return 1
}

func cmpInt(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
