// Package nodestatus registers this host as a Kubernetes Node and keeps the
// Node's status true while writing to the control plane as little as possible.
//
// # What it promises
//
//   - Register creates the Node <NodeName> if it is missing, with the labels
//     kubernetes.io/hostname, kubernetes.io/os and kubernetes.io/arch plus the
//     configured node labels, the configured registration taints and nothing
//     else, and with a fully computed status (so a new node is Ready with one
//     write). If the Node exists it reconciles those labels and nothing else
//     (NodeRestriction forbids a node from changing its taints). It retries
//     with exponential backoff until it succeeds or ctx is done.
//   - The status is computed every UpdateFrequency by composable setters
//     (addresses, capacity/allocatable, nodeInfo, images, the MemoryPressure,
//     DiskPressure, PIDPressure and Ready conditions), and at once when
//     SyncSoon asks (the volumes in use changed). It is written (a
//     strategic-merge patch of the status subresource holding only the changed
//     fields) when it changed meaningfully (heartbeat timestamps are ignored),
//     when ReportFrequency (with jitter) has passed since the last write, and
//     always once after start. See ShouldReport and StatusChanged.
//   - Up to 5 tries per report: the first against the cached Node (the
//     Manager watches its own Node, field-selected, so changes made by others
//     such as the node lifecycle controller setting Ready=Unknown are seen),
//     the later ones against a fresh GET.
//   - lastTransitionTime of a condition changes only when its status flips.
//     A pressure condition stays True for EvictionPressureTransitionPeriod after
//     its signal last crossed a threshold (hard or soft: a soft one sets it
//     whatever its grace period), as kubelet's eviction manager does.
//   - Ready does not flap: every call into the runtime (RuntimeVersion,
//     ListImages, RuntimeHealthy, PLEGHealthy) runs with a timeout, at most one
//     call of each kind is in flight, and the last good answer is used until it
//     is older than RuntimeGracePeriod. A failed status write changes nothing
//     in the computed status; the next period simply tries again.
//   - NetworkReady (the CNI network's readiness, an in-memory answer) is
//     reported without a grace period: with no usable network configuration
//     Ready is False with kubelet's NetworkPluginNotReady message.
//   - CSINodeReady (the CSINode's initialization, with the migrated-plugins
//     annotation; package csi) likewise: until it is done Ready is False
//     with kubelet's "CSINode is not yet initialized".
//
// # What it assumes
//
// The client carries the node's own credentials (CN=system:node:<name>,
// O=system:nodes) under the Node authorizer and NodeRestriction admission:
// the Manager only reads and writes its own Node, and New rejects labels that
// NodeRestriction would refuse (the node-restriction.kubernetes.io/ prefix and
// kubernetes.io / k8s.io labels outside kubelet's allowed set).
//
// The package does not import the runtime or the PLEG: everything it needs
// from them is a function value in Options, wired by cmd/nodeagent. Host
// facts are read through Host, whose paths can be rooted in a temporary
// directory for tests.
//
// # Concurrency
//
// Register, SyncOnce and Run's loop body serialize on one lock, which guards
// all of the Manager's mutable state; Run calls SyncOnce itself, so tests
// call SyncOnce directly instead of running Run. SetFrequencies and
// LastReport are safe to call from any goroutine at any time.
package nodestatus
