// Package devicemanager is kubelet's device manager: the device plugins'
// v1beta1 API (k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1).
//
// Plugins register on <dir>/kubelet.sock (Register: a supported version,
// an extended resource name); the manager dials the plugin's socket in
// <dir>, asks its options (GetDevicePluginOptions) and follows its
// ListAndWatch stream. Capacity reports each resource's devices (healthy
// and unhealthy) as capacity and its healthy ones as allocatable; when a
// plugin's stream ends its devices turn unhealthy (allocatable 0, capacity
// kept) and after kubelet's grace of 5 minutes the resource is dropped
// (reported once as removed: capacity 0).
//
// Allocate runs at pod admission, as kubelet's resource allocator admit
// handler: for each container requesting a plugin's resource it picks
// free healthy devices (the plugin's preferred ones first when it offers
// GetPreferredAllocation; devices of finished init containers are reused)
// and calls the plugin's Allocate. RunOptions, at container creation,
// calls PreStartContainer when the plugin asks for it and returns the
// devices, mounts, envs, annotations and CDI names of the responses.
//
// Allocations and registered devices are checkpointed in kubelet's
// format (<dir>/kubelet_internal_checkpoint) on every change and read at
// Start, so an agent restart keeps each container's devices; devices of
// pods no longer active are freed at the next Allocate (as kubelet).
//
// Differences from kubelet: no topology manager (the none policy: NUMA
// hints are recorded, not used for alignment); "container already running"
// (which keeps a re-admitted running container's devices before its
// plugin re-registers) is asked of Options.ContainerRunning without
// kubelet's sources-ready gate.
//
// All methods are safe for concurrent use; no RPC is made under the lock.
package devicemanager
