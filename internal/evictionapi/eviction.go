// Package evictionapi is kubelet's eviction vocabulary (kubelet's
// pkg/kubelet/eviction/api, whose name it takes), shared by config (which
// validates and defaults evictionHard), nodestatus (which turns thresholds
// into pressure conditions) and eviction: the signal names and the default
// hard thresholds.
//
// It holds data only and imports nothing of the agent, so that both sides
// can depend on it without depending on each other. The names and values are
// kubelet 1.34's (pkg/kubelet/eviction/api and
// pkg/kubelet/eviction/defaults_linux.go).
package evictionapi

import (
	"time"

	v1 "k8s.io/api/core/v1"
)

// Eviction signals, with kubelet's names.
const (
	SignalMemoryAvailable            = "memory.available"
	SignalAllocatableMemoryAvailable = "allocatableMemory.available"
	SignalNodeFsAvailable            = "nodefs.available"
	SignalNodeFsInodesFree           = "nodefs.inodesFree"
	SignalImageFsAvailable           = "imagefs.available"
	SignalImageFsInodesFree          = "imagefs.inodesFree"
	SignalContainerFsAvailable       = "containerfs.available"
	SignalContainerFsInodesFree      = "containerfs.inodesFree"
	SignalPIDAvailable               = "pid.available"
)

// Signals returns every signal evictionHard may name, in a fixed order
// (memory, nodefs, imagefs, containerfs, pid). The caller may modify it.
func Signals() []string {
	return []string{
		SignalMemoryAvailable, SignalAllocatableMemoryAvailable,
		SignalNodeFsAvailable, SignalNodeFsInodesFree,
		SignalImageFsAvailable, SignalImageFsInodesFree,
		SignalContainerFsAvailable, SignalContainerFsInodesFree,
		SignalPIDAvailable,
	}
}

// DefaultHard returns kubelet's default hard eviction thresholds on Linux,
// the evictionHard used when the configuration does not set one. The caller
// may modify the map.
func DefaultHard() map[string]string {
	return map[string]string{
		SignalMemoryAvailable:   "100Mi",
		SignalNodeFsAvailable:   "10%",
		SignalNodeFsInodesFree:  "5%",
		SignalImageFsAvailable:  "15%",
		SignalImageFsInodesFree: "5%",
	}
}

// Observed is one signal as measured, with its hard and soft thresholds.
type Observed struct {
	// Available and Capacity are in the signal's unit (bytes, inodes or
	// process IDs).
	Available, Capacity int64
	// Threshold is the hard threshold's amount for this capacity (a
	// percentage resolved against Capacity); zero without a threshold.
	Threshold int64
	// ThresholdText is the threshold as kubelet prints it in eviction
	// messages ("100Mi", or the resolved quantity of a percentage).
	ThresholdText string
	// Soft and SoftText are the soft threshold (evictionSoft) likewise;
	// zero without one.
	Soft     int64
	SoftText string
	// MinReclaim is evictionMinimumReclaim's amount for this capacity:
	// once the signal's threshold is acted on, it counts as met until
	// the signal is above threshold + MinReclaim. Zero without one.
	MinReclaim int64
}

// Met reports whether the signal is below its hard threshold.
func (o Observed) Met() bool { return o.Threshold > 0 && o.Available < o.Threshold }

// SoftMet reports whether the signal is below its soft threshold,
// whatever its grace period.
func (o Observed) SoftMet() bool { return o.Soft > 0 && o.Available < o.Soft }

// Unresolved reports whether the signal, whose hard (soft false) or soft
// threshold was acted on, is still below that threshold plus its minimum
// reclaim (kubelet's thresholdsMet with enforceMinReclaim).
func (o Observed) Unresolved(soft bool) bool {
	t := o.Threshold
	if soft {
		t = o.Soft
	}
	return t > 0 && o.Available < t+o.MinReclaim
}

// Observation is one measurement of the eviction signals, shared by the
// node status (pressure conditions) and the eviction manager (which pods
// to evict): the host is measured once for both.
type Observation struct {
	Time    time.Time
	Signals map[string]Observed
	// Pressure holds the pressure conditions (MemoryPressure,
	// DiskPressure, PIDPressure) that are true after
	// evictionPressureTransitionPeriod, as the node reports them.
	Pressure map[v1.NodeConditionType]bool
}
