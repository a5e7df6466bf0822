// Package eviction is kubelet's node-pressure eviction for the hard
// (evictionHard) and soft (evictionSoft) thresholds: when a signal
// (memory.available, nodefs.*, imagefs.*, containerfs.*, pid.available)
// is below a hard threshold, or below a soft one for its whole grace
// period (evictionSoftGracePeriod), the manager first reclaims
// node-level resources for disk signals (dead containers, unused images)
// and then evicts at most one pod per monitoring interval, ranked as
// kubelet ranks them, with kubelet's pod status (Failed, reason Evicted,
// its message and the DisruptionTarget condition) and events; a
// threshold acted on stays met until its signal is above it plus
// evictionMinimumReclaim. While the node reports a pressure condition,
// Admit refuses new pods as kubelet's eviction admit handler does.
//
// The manager does not measure the host itself: it reads the observation
// the node status sync made (package nodestatus, through Options.Observe),
// so the pressure conditions and the evictions rest on the same figures.
// Per-pod usage (cgroup memory, process count, disk under the pod's
// directory and logs) is measured only when a threshold is met.
//
// One goroutine (Run) owns the manager; Admit is a pure function of the
// pod and the node's pressure conditions.
package eviction
