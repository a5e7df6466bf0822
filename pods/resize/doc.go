// Package resize is kubelet's in-place pod resize (InPlacePodVerticalScaling,
// on by default in Kubernetes 1.34): the resources admitted for each
// container (the allocation), the decision whether a changed spec can be
// allocated, the actions that bring running containers to their allocation,
// and what their cgroups really have.
//
// It promises, as kubelet 1.34 (pkg/kubelet/allocation,
// pkg/kubelet/kuberuntime computePodResizeAction/doPodResizeAction,
// pkg/kubelet/status resize conditions):
//
//   - Store keeps the allocated and the actuated resources per pod and
//     container in rootDir/allocated_pods_state and
//     rootDir/actuated_pods_state (kubelet's file names and data layout;
//     the checksum is nodeagent's, so the files are not interchangeable
//     with kubelet's), so that an agent restart keeps them.
//   - Decide is a pure function: a spec whose CPU or memory differ from the
//     allocation is allocated when it fits; otherwise PodResizePending with
//     reason Infeasible (static pods, a QoS class change, more than the
//     node's allocatable) or Deferred (it does not fit next to the other
//     pods' allocations: kubelet's admission message).
//   - ComputeActions is a pure function: a running container whose actuated
//     resources differ from its allocation is updated in place
//     (resizePolicy NotRequired, the default) or restarted
//     (RestartContainer for a resource that changed); decreases are applied
//     before increases.
//   - Apply sets the pod cgroup and the containers' cgroups in kubelet's
//     order (per resource, memory first: a pod limit that grows before the
//     containers, one that shrinks after them) and refuses a memory limit
//     below current usage with kubelet's error.
//   - ReadCgroup reads back what a cgroup (v1 or v2) really has, which the
//     status reports in containerStatuses[].resources.
//
// Only CPU and memory of app containers and sidecars are resizable; init
// containers, ephemeral containers and other resources keep what they were
// admitted with. Pods with pod-level resources (spec.resources) cannot be
// resized: the 1.34 API server refuses it, and Decide marks one that
// arrives anyway Infeasible with the API server's message.
package resize
