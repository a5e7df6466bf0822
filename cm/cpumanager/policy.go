package cpumanager

import (
	"fmt"

	v1 "k8s.io/api/core/v1"
	"k8s.io/utils/cpuset"

	"github.com/nodeagent/nodeagent/cm/cpumanager/state"
	"github.com/nodeagent/nodeagent/cm/topologymanager"
	"github.com/nodeagent/nodeagent/kubetypes"
)

// static is kubelet's static policy over a state: exclusive CPUs for the
// containers of Guaranteed pods with integer CPU requests, taken from the
// shared pool (state.Default) and given back when released. The reserved
// CPUs stay in the shared pool and are never given exclusively.
type static struct {
	topo     Topology
	reserved cpuset.CPUSet
	st       *state.State
	// reuse are the CPUs of the init containers of the pod allocated last,
	// which its later containers may take again (kubelet's cpusToReuse).
	reuse map[string]cpuset.CPUSet
}

// validate checks a restored state against the node as kubelet's static
// policy does at start, and fills an empty state with all CPUs.
func (p *static) validate() error {
	all := p.topo.CPUs()
	def, assign := p.st.Default, p.st.Assign
	if def.IsEmpty() {
		if len(assign) != 0 {
			return fmt.Errorf("default cpuset cannot be empty")
		}
		p.st.Default = all
		return nil
	}
	if !p.reserved.Intersection(def).Equals(p.reserved) {
		return fmt.Errorf("not all reserved cpus: %q are present in defaultCpuSet: %q", p.reserved.String(), def.String())
	}
	known := def
	for pod, cs := range assign {
		for name, set := range cs {
			if !def.Intersection(set).IsEmpty() {
				return fmt.Errorf("pod: %s, container: %s cpuset: %q overlaps with default cpuset %q", pod, name, set.String(), def.String())
			}
			known = known.Union(set)
		}
	}
	if !known.Equals(all) {
		return fmt.Errorf("current set of available CPUs %q doesn't match with CPUs in state %q", all.String(), known.String())
	}
	return nil
}

// guaranteedCPUs is the number of exclusive CPUs c gets: its integer CPU
// request in a Guaranteed pod without pod-level resources, else 0.
func guaranteedCPUs(pod *v1.Pod, c *v1.Container) int {
	if kubetypes.PodQOSClass(pod) != v1.PodQOSGuaranteed || pod.Spec.Resources != nil {
		return 0
	}
	q, ok := c.Resources.Requests[v1.ResourceCPU]
	if !ok || q.Value()*1000 != q.MilliValue() {
		return 0
	}
	return int(q.Value())
}

// hints are kubelet's static policy hints for c on a machine with one
// NUMA node: none (nil) for a container without exclusive CPUs; node 0
// when c has its CPUs already (an empty list when their number is not its
// request: kubelet rejects a changed request under restricted and
// single-numa-node) or when the free CPUs outside the reserved set, with
// those the pod may reuse from its init containers, can hold the request;
// an empty list when they cannot.
func (p *static) hints(pod *v1.Pod, c *v1.Container) topologymanager.Hints {
	n := guaranteedCPUs(pod, c)
	if n == 0 {
		return nil
	}
	uid := string(pod.UID)
	if set, ok := p.st.Assign[uid][c.Name]; ok {
		if set.Size() != n {
			return topologymanager.Hints{string(v1.ResourceCPU): {}}
		}
		return topologymanager.Hints{string(v1.ResourceCPU): topologymanager.NodeHint()}
	}
	available := p.st.Default.Difference(p.reserved).Union(p.reuse[uid])
	if available.Size() < n {
		return topologymanager.Hints{string(v1.ResourceCPU): {}}
	}
	return topologymanager.Hints{string(v1.ResourceCPU): topologymanager.NodeHint()}
}

// podGuaranteedCPUs is kubelet's: the exclusive CPUs the pod holds at
// most at once, the larger of its app containers' and sidecars' sum and
// of each init container's with the sidecars started before it.
func podGuaranteedCPUs(pod *v1.Pod) int {
	inits, sidecars := 0, 0
	for i := range pod.Spec.InitContainers {
		c := &pod.Spec.InitContainers[i]
		n := guaranteedCPUs(pod, c)
		if kubetypes.IsSidecar(c) {
			sidecars += n
		} else if sidecars+n > inits {
			inits = sidecars + n
		}
	}
	apps := 0
	for i := range pod.Spec.Containers {
		apps += guaranteedCPUs(pod, &pod.Spec.Containers[i])
	}
	return max(inits, apps+sidecars)
}

// podHints are kubelet's pod-scope hints on one NUMA node: as hints, for
// the pod's podGuaranteedCPUs, counting the CPUs its containers hold
// already (an empty list when one holds other than its request).
func (p *static) podHints(pod *v1.Pod) topologymanager.Hints {
	n := podGuaranteedCPUs(pod)
	if n == 0 {
		return nil
	}
	uid := string(pod.UID)
	assigned := cpuset.New()
	for _, c := range append(append([]v1.Container(nil), pod.Spec.InitContainers...), pod.Spec.Containers...) {
		if set, ok := p.st.Assign[uid][c.Name]; ok {
			if set.Size() != guaranteedCPUs(pod, &c) {
				return topologymanager.Hints{string(v1.ResourceCPU): {}}
			}
			assigned = assigned.Union(set)
		}
	}
	available := p.st.Default.Difference(p.reserved).Union(p.reuse[uid]).Union(assigned)
	if assigned.Size() != n && available.Size() < n {
		return topologymanager.Hints{string(v1.ResourceCPU): {}}
	}
	return topologymanager.Hints{string(v1.ResourceCPU): topologymanager.NodeHint()}
}

// allocate gives c its exclusive CPUs, if it gets any and has none yet.
func (p *static) allocate(pod *v1.Pod, c *v1.Container, init bool) error {
	n := guaranteedCPUs(pod, c)
	if n == 0 {
		return nil
	}
	uid := string(pod.UID)
	if set, ok := p.st.Assign[uid][c.Name]; ok {
		p.updateReuse(uid, set, init)
		return nil
	}
	available := p.st.Default.Difference(p.reserved).Union(p.reuse[uid])
	set, err := takeByTopology(p.topo, available, n)
	if err != nil {
		return err
	}
	p.st.Default = p.st.Default.Difference(set)
	if p.st.Assign[uid] == nil {
		p.st.Assign[uid] = map[string]cpuset.CPUSet{}
	}
	p.st.Assign[uid][c.Name] = set
	p.updateReuse(uid, set, init)
	return nil
}

// updateReuse: the CPUs of a (non-sidecar) init container may be taken
// again by the pod's next containers, those of an app container or a
// sidecar not. Only the pod allocated last keeps reusable CPUs.
func (p *static) updateReuse(uid string, set cpuset.CPUSet, init bool) {
	for other := range p.reuse {
		if other != uid {
			delete(p.reuse, other)
		}
	}
	if init {
		p.reuse[uid] = p.reuse[uid].Union(set)
		return
	}
	p.reuse[uid] = p.reuse[uid].Difference(set)
}

// release gives a container's exclusive CPUs back to the shared pool, but
// those another container of its pod still holds (reused from an init
// container).
func (p *static) release(uid, name string) {
	set, ok := p.st.Assign[uid][name]
	if !ok {
		return
	}
	delete(p.st.Assign[uid], name)
	for _, other := range p.st.Assign[uid] {
		set = set.Difference(other)
	}
	if len(p.st.Assign[uid]) == 0 {
		delete(p.st.Assign, uid)
	}
	p.st.Default = p.st.Default.Union(set)
}
