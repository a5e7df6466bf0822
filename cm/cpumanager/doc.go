// Package cpumanager is kubelet's CPU manager (cpuManagerPolicy none or
// static).
//
// With the static policy, containers of Guaranteed pods whose CPU request
// is an integer (and whose pod has no pod-level resources) get that many
// CPUs of their own, assigned at pod admission (Allocate), init containers
// first; the CPUs of a finished init container are given again to the
// pod's later containers (not a sidecar's). Every other container runs on
// the shared pool: all CPUs but the exclusive ones. The reserved CPUs
// (reservedSystemCPUs, or kubeReserved + systemReserved cpu rounded up,
// taken lowest cores first) are never given exclusively and stay in the
// shared pool. A request the free CPUs cannot meet fails with kubelet's
// "not enough cpus available to satisfy request: requested=N,
// available=M"; the caller rejects the pod with UnexpectedAdmissionError.
//
// A container is created with its cpuset (CPUSet); every
// ReconcilePeriod the manager releases the CPUs of containers no longer in
// an active pod (kubelet releases them then, not at container stop) and
// pushes each running container its cpuset when it changed, so that
// shared containers leave CPUs just given exclusively and get back freed
// ones within a period.
//
// The assignments are checkpointed in kubelet's format and file
// (<rootDir>/cpu_manager_state, package state) on every change and read
// at Start: an agent restart keeps them. A checkpoint written for another
// policy, or one that does not fit the node's CPUs or reservation,
// refuses the start with kubelet's message (drain the node, delete the
// file). The none policy writes its checkpoint too, as kubelet does.
//
// With a topology manager (Options.Align), each container's hints are
// checked before its CPUs are allocated: on one NUMA node, node 0 when the
// free CPUs can hold its request, none when they cannot (the topology
// manager's restricted and single-numa-node policies then reject the pod
// with TopologyAffinityError).
//
// Not done, as kubelet does it: NUMA hints on machines with more than one
// NUMA node, the NUMA-first order on machines whose NUMA nodes are smaller than their
// sockets, and every cpuManagerPolicyOptions option (refused by config).
// CPU allocation packs sockets, then whole cores, then threads, as
// kubelet's takeByTopology on a machine with a NUMA node per socket.
package cpumanager
