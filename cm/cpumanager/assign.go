package cpumanager

import (
	"fmt"
	"sort"

	"k8s.io/utils/cpuset"
)

// takeByTopology picks n CPUs of available, packed as kubelet's static
// policy packs them (takeByTopologyNUMAPacked, sockets first): whole
// sockets when n needs at least a socket's worth, then whole cores when
// n needs at least a core's worth, then single threads, the threads of
// partly used cores and of the fullest sockets first, so that free cores
// stay whole. Kubelet's NUMA-first order (NUMA nodes smaller than
// sockets), uncore-cache alignment and topology-manager hints are not
// applied.
func takeByTopology(topo Topology, available cpuset.CPUSet, n int) (cpuset.CPUSet, error) {
	a := &accumulator{topo: topo, free: available, need: n, result: cpuset.New()}
	if a.need < 1 {
		return a.result, nil
	}
	if a.need > a.free.Size() {
		return cpuset.New(), fmt.Errorf("not enough cpus available to satisfy request: requested=%d, available=%d", n, available.Size())
	}
	// Whole sockets.
	for _, s := range a.sortedSockets() {
		all := topo.CPUsInSocket(s)
		if a.need >= all.Size() && a.free.Intersection(all).Equals(all) {
			a.take(all)
		}
	}
	// Whole cores.
	if per := topo.CPUsPerCore(); per > 0 {
		for _, c := range a.sortedCores() {
			all := topo.CPUsInCore(c)
			if a.need >= all.Size() && all.Size() == per && a.free.Intersection(all).Equals(all) {
				a.take(all)
			}
		}
	}
	// Single threads.
	for _, c := range a.sortedCores() {
		for _, cpu := range a.free.Intersection(topo.CPUsInCore(c)).List() {
			if a.need < 1 {
				return a.result, nil
			}
			a.take(cpuset.New(cpu))
		}
	}
	if a.need > 0 {
		return cpuset.New(), fmt.Errorf("failed to allocate cpus")
	}
	return a.result, nil
}

type accumulator struct {
	topo   Topology
	free   cpuset.CPUSet
	need   int
	result cpuset.CPUSet
}

func (a *accumulator) take(cpus cpuset.CPUSet) {
	a.result = a.result.Union(cpus)
	a.free = a.free.Difference(cpus)
	a.need -= cpus.Size()
}

// sortByFree orders ids by their free CPUs, fewest first, then by ID
// (kubelet's packing order).
func (a *accumulator) sortByFree(ids []int, cpusOf func(int) cpuset.CPUSet) {
	sort.SliceStable(ids, func(i, j int) bool {
		fi, fj := a.free.Intersection(cpusOf(ids[i])).Size(), a.free.Intersection(cpusOf(ids[j])).Size()
		if fi != fj {
			return fi < fj
		}
		return ids[i] < ids[j]
	})
}

// sortedSockets are the sockets with free CPUs, packing order.
func (a *accumulator) sortedSockets() []int {
	s := a.topo.ids(a.free, func(i CPUInfo) int { return i.Socket })
	a.sortByFree(s, a.topo.CPUsInSocket)
	return s
}

// sortedCores are the cores with free CPUs, socket by socket in packing
// order, each socket's cores in packing order.
func (a *accumulator) sortedCores() []int {
	var out []int
	for _, s := range a.sortedSockets() {
		cores := a.topo.ids(a.free.Intersection(a.topo.CPUsInSocket(s)), func(i CPUInfo) int { return i.Core })
		a.sortByFree(cores, a.topo.CPUsInCore)
		out = append(out, cores...)
	}
	return out
}
