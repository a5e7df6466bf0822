package nodestatus

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/nodeagent/nodeagent/internal/evictionapi"
)

// signalCondition maps each signal to the pressure condition it drives.
var signalCondition = map[string]v1.NodeConditionType{
	evictionapi.SignalMemoryAvailable:            v1.NodeMemoryPressure,
	evictionapi.SignalAllocatableMemoryAvailable: v1.NodeMemoryPressure,
	evictionapi.SignalNodeFsAvailable:            v1.NodeDiskPressure,
	evictionapi.SignalNodeFsInodesFree:           v1.NodeDiskPressure,
	evictionapi.SignalImageFsAvailable:           v1.NodeDiskPressure,
	evictionapi.SignalImageFsInodesFree:          v1.NodeDiskPressure,
	evictionapi.SignalContainerFsAvailable:       v1.NodeDiskPressure,
	evictionapi.SignalContainerFsInodesFree:      v1.NodeDiskPressure,
	evictionapi.SignalPIDAvailable:               v1.NodePIDPressure,
}

// threshold is one eviction threshold: the signal is met when its
// available amount is below quantity, or below percent × capacity.
type threshold struct {
	signal   string
	quantity *resource.Quantity
	percent  float64 // in (0,1) when quantity is nil
	soft     bool    // from evictionSoft
}

// parseThresholds parses kubelet's evictionHard syntax. "0%" and "100%"
// disable a signal, as in kubelet.
func parseThresholds(m map[string]string) ([]threshold, error) {
	var out []threshold
	for _, sig := range slices.Sorted(maps.Keys(m)) {
		val := strings.TrimSpace(m[sig])
		if _, ok := signalCondition[sig]; !ok {
			return nil, fmt.Errorf("unsupported eviction signal %q (supported: %s)", sig, strings.Join(slices.Sorted(maps.Keys(signalCondition)), ", "))
		}
		if strings.HasSuffix(val, "%") {
			if val == "0%" || val == "100%" {
				continue
			}
			f, err := strconv.ParseFloat(strings.TrimSuffix(val, "%"), 64)
			if err != nil {
				return nil, fmt.Errorf("%s: %q is not a percentage: %w", sig, val, err)
			}
			if f < 0 || f > 100 {
				return nil, fmt.Errorf("%s: percentage %q must be between 0%% and 100%%", sig, val)
			}
			out = append(out, threshold{signal: sig, percent: f / 100})
			continue
		}
		q, err := resource.ParseQuantity(val)
		if err != nil {
			return nil, fmt.Errorf("%s: %q is neither a quantity nor a percentage: %w", sig, val, err)
		}
		if q.Sign() <= 0 {
			return nil, fmt.Errorf("%s: threshold must be positive, got %q", sig, val)
		}
		out = append(out, threshold{signal: sig, quantity: &q})
	}
	return out, nil
}

// parseMinReclaims parses kubelet's evictionMinimumReclaim syntax: a
// quantity (0 allowed) or a positive percentage of capacity, per signal.
func parseMinReclaims(m map[string]string) (map[string]threshold, error) {
	out := map[string]threshold{}
	for _, sig := range slices.Sorted(maps.Keys(m)) {
		val := strings.TrimSpace(m[sig])
		if _, ok := signalCondition[sig]; !ok {
			return nil, fmt.Errorf("unsupported eviction signal %q", sig)
		}
		if pct, ok := strings.CutSuffix(val, "%"); ok {
			f, err := strconv.ParseFloat(pct, 64)
			if err != nil || f <= 0 || f > 100 {
				return nil, fmt.Errorf("%s: %q must be a percentage above 0%% and at most 100%%", sig, val)
			}
			out[sig] = threshold{signal: sig, percent: f / 100}
			continue
		}
		q, err := resource.ParseQuantity(val)
		if err != nil {
			return nil, fmt.Errorf("%s: %q is neither a quantity nor a percentage: %w", sig, val, err)
		}
		if q.Sign() < 0 {
			return nil, fmt.Errorf("%s: minimum reclaim must not be negative, got %q", sig, val)
		}
		out[sig] = threshold{signal: sig, quantity: &q}
	}
	return out, nil
}

// value returns the threshold's amount for a resource with the given capacity.
func (t threshold) value(capacity int64) int64 {
	if t.quantity != nil {
		return t.quantity.Value()
	}
	return int64(float64(capacity) * t.percent)
}

// observation is one signal's current value.
type observation struct {
	available, capacity int64
}

// thresholdsMet returns the pressure conditions whose thresholds the
// observations cross. Signals without an observation are skipped.
func thresholdsMet(ts []threshold, obs map[string]observation) map[v1.NodeConditionType]bool {
	met := map[v1.NodeConditionType]bool{}
	for _, t := range ts {
		o, ok := obs[t.signal]
		if !ok {
			continue
		}
		if o.available < t.value(o.capacity) {
			met[signalCondition[t.signal]] = true
		}
	}
	return met
}

// PressureActive reports whether a pressure condition is True at now when its
// signal last crossed the threshold at lastObserved: it stays True for
// transitionPeriod after the last crossing so a signal oscillating around a
// threshold does not flap the condition (kubelet's evictionPressureTransitionPeriod).
func PressureActive(now, lastObserved time.Time, transitionPeriod time.Duration) bool {
	if lastObserved.IsZero() {
		return false
	}
	return now.Sub(lastObserved) < transitionPeriod
}

// hardEvictionReservation returns what the hard thresholds take away from
// allocatable: memory.available from memory, nodefs.available from
// ephemeral-storage (kubelet's formula).
func hardEvictionReservation(ts []threshold, capacity v1.ResourceList) v1.ResourceList {
	out := v1.ResourceList{}
	for _, t := range ts {
		if t.soft {
			continue // kubelet reserves only for hard thresholds
		}
		var name v1.ResourceName
		switch t.signal {
		case evictionapi.SignalMemoryAvailable:
			name = v1.ResourceMemory
		case evictionapi.SignalNodeFsAvailable:
			name = v1.ResourceEphemeralStorage
		default:
			continue
		}
		c, ok := capacity[name]
		if !ok {
			continue
		}
		if t.quantity != nil {
			out[name] = t.quantity.DeepCopy()
		} else {
			out[name] = *resource.NewQuantity(t.value(c.Value()), resource.BinarySI)
		}
	}
	return out
}

// Allocatable computes kubelet's node allocatable: for every capacity,
// capacity − systemReserved − kubeReserved − hard eviction threshold, never
// negative; memory additionally loses all pre-allocated huge pages.
// reserved is systemReserved + kubeReserved.
func Allocatable(capacity, reserved v1.ResourceList, hardEviction v1.ResourceList) v1.ResourceList {
	out := v1.ResourceList{}
	for k, c := range capacity {
		v := c.DeepCopy()
		if r, ok := reserved[k]; ok {
			v.Sub(r)
		}
		if r, ok := hardEviction[k]; ok {
			v.Sub(r)
		}
		if v.Sign() < 0 {
			v.Set(0)
		}
		out[k] = v
	}
	for k, c := range capacity {
		if !strings.HasPrefix(string(k), v1.ResourceHugePagesPrefix) {
			continue
		}
		if mem, ok := out[v1.ResourceMemory]; ok {
			mem.Sub(c)
			if mem.Sign() < 0 {
				mem.Set(0)
			}
			out[v1.ResourceMemory] = mem
		}
	}
	return out
}
