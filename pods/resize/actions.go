package resize

import (
	"encoding/json"
	"fmt"

	v1 "k8s.io/api/core/v1"
)

// Values are the resizable resources of a container: CPU in millicores,
// memory in bytes (kubelet's containerResources).
type Values struct {
	CPURequest, CPULimit       int64
	MemoryRequest, MemoryLimit int64
}

// ValuesOf is r's CPU and memory requests and limits.
func ValuesOf(r v1.ResourceRequirements) Values {
	return Values{
		CPURequest:    r.Requests.Cpu().MilliValue(),
		CPULimit:      r.Limits.Cpu().MilliValue(),
		MemoryRequest: r.Requests.Memory().Value(),
		MemoryLimit:   r.Limits.Memory().Value(),
	}
}

// ContainerUpdate is one running container to update in place.
type ContainerUpdate struct {
	Name, ID         string
	Current, Desired Values
}

// Restart is one running container to restart because its resizePolicy
// says RestartContainer for a resource that changed.
type Restart struct {
	Name, ID string
	// Message is kubelet's kill message ("Container %s resize requires
	// restart").
	Message string
}

// Actions are what bring a pod's running containers to their allocation
// (kubelet's ContainersToUpdate and the resize part of ContainersToKill).
type Actions struct {
	// Update holds, per resource (cpu, memory), the containers to update,
	// decreases before increases.
	Update  map[v1.ResourceName][]ContainerUpdate
	Restart []Restart
}

// Empty: nothing to do.
func (a Actions) Empty() bool { return len(a.Update) == 0 && len(a.Restart) == 0 }

// ComputeActions is kubelet's computePodResizeAction for every resizable
// container of allocated (the pod with its allocation) that runs: running
// maps container names to the IDs of their running containers, actuated
// is what each was last set to (a running container absent there counts
// as zero, so it is updated: the update is idempotent). A pure function.
func ComputeActions(allocated *v1.Pod, running map[string]string, actuated Allocation) Actions {
	a := Actions{Update: map[v1.ResourceName][]ContainerUpdate{}}
	visit := func(c *v1.Container, isInit bool) {
		id, ok := running[c.Name]
		if !ok || !Resizable(c, isInit) {
			return
		}
		desired, current := ValuesOf(c.Resources), ValuesOf(actuated[c.Name])
		if desired == current {
			return
		}
		restart := false
		changed := func(name v1.ResourceName, d, cur int64) bool {
			if d == cur {
				return false
			}
			if policyOf(c, name) == v1.RestartContainer {
				restart = true
			}
			return true
		}
		memLim := changed(v1.ResourceMemory, desired.MemoryLimit, current.MemoryLimit)
		memReq := changed(v1.ResourceMemory, desired.MemoryRequest, current.MemoryRequest)
		cpuLim := changed(v1.ResourceCPU, desired.CPULimit, current.CPULimit)
		cpuReq := changed(v1.ResourceCPU, desired.CPURequest, current.CPURequest)
		if restart {
			a.Restart = append(a.Restart, Restart{Name: c.Name, ID: id, Message: fmt.Sprintf("Container %s resize requires restart", c.Name)})
			return
		}
		u := ContainerUpdate{Name: c.Name, ID: id, Current: current, Desired: desired}
		switch {
		case memLim:
			a.add(v1.ResourceMemory, u, desired.MemoryLimit < current.MemoryLimit)
		case memReq:
			a.add(v1.ResourceMemory, u, desired.MemoryRequest < current.MemoryRequest)
		}
		switch {
		case cpuLim:
			a.add(v1.ResourceCPU, u, desired.CPULimit < current.CPULimit)
		case cpuReq:
			a.add(v1.ResourceCPU, u, desired.CPURequest < current.CPURequest)
		}
	}
	for i := range allocated.Spec.InitContainers {
		visit(&allocated.Spec.InitContainers[i], true)
	}
	for i := range allocated.Spec.Containers {
		visit(&allocated.Spec.Containers[i], false)
	}
	if len(a.Update) == 0 {
		a.Update = nil
	}
	return a
}

// add puts u first (a decrease) or last (an increase) among name's updates.
func (a *Actions) add(name v1.ResourceName, u ContainerUpdate, decrease bool) {
	if decrease {
		a.Update[name] = append([]ContainerUpdate{u}, a.Update[name]...)
		return
	}
	a.Update[name] = append(a.Update[name], u)
}

// policyOf is c's resizePolicy for resource name; NotRequired when unset.
func policyOf(c *v1.Container, name v1.ResourceName) v1.ResourceResizeRestartPolicy {
	for _, p := range c.ResizePolicy {
		if p.ResourceName == name {
			return p.RestartPolicy
		}
	}
	return v1.NotRequired
}

// InProgress reports whether a running resizable container's actuated CPU
// or memory differ from its allocation (kubelet's isPodResizeInProgress).
func InProgress(allocated *v1.Pod, running map[string]string, actuated Allocation) bool {
	a := ComputeActions(allocated, running, actuated)
	return !a.Empty()
}

// CompletedMessage is the message of kubelet's ResizeCompleted event: the
// pod's containers with their (allocated) resources as JSON.
func CompletedMessage(pod *v1.Pod) string {
	type container struct {
		Name      string                  `json:"name"`
		Resources v1.ResourceRequirements `json:"resources,omitempty"`
	}
	var sum struct {
		InitContainers []container `json:"initContainers,omitempty"`
		Containers     []container `json:"containers,omitempty"`
	}
	for _, c := range pod.Spec.InitContainers {
		sum.InitContainers = append(sum.InitContainers, container{c.Name, c.Resources})
	}
	for _, c := range pod.Spec.Containers {
		sum.Containers = append(sum.Containers, container{c.Name, c.Resources})
	}
	b, err := json.Marshal(sum)
	if err != nil {
		return "Pod resize completed"
	}
	return "Pod resize completed: " + string(b)
}
