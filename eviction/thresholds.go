package eviction

import (
	"time"

	v1 "k8s.io/api/core/v1"

	sig "github.com/nodeagent/nodeagent/internal/evictionapi"
)

// threshold names one configured threshold: a signal's hard
// (evictionHard) or soft (evictionSoft) one.
type threshold struct {
	Signal string
	Soft   bool
}

// thresholdState is what the manager carries from one pass to the next,
// as kubelet's thresholdsFirstObservedAt and thresholdsMet.
type thresholdState struct {
	// firstMet is when each threshold met at the last pass was first
	// seen met; a threshold not met at a pass drops out, so its grace
	// period starts again.
	firstMet map[threshold]time.Time
	// acted are the thresholds whose grace periods had passed at the
	// last pass: they stay met until the signal is above threshold +
	// minimum reclaim.
	acted []threshold
}

// gracePeriod is how long threshold t must be met before it is acted on:
// 0 for a hard threshold, the signal's evictionSoftGracePeriod for a soft
// one.
func gracePeriod(t threshold, soft map[string]time.Duration) time.Duration {
	if !t.Soft {
		return 0
	}
	return soft[t.Signal]
}

// decideThresholds is one pass of kubelet's threshold bookkeeping at now.
// A threshold is met when its signal is below it, or, if it was acted on
// at the last pass, below it plus the signal's minimum reclaim. It
// returns the met thresholds whose grace periods have passed (hard ones
// at once, soft ones after being met continuously for their
// evictionSoftGracePeriod), memory signals first, a signal's hard
// threshold before its soft one, and the state for the next pass.
//
// Kubelet sets the pressure conditions from the thresholds met before the
// grace periods are applied; here the node status does that from the same
// observation (package nodestatus).
func decideThresholds(now time.Time, obs sig.Observation, soft map[string]time.Duration, prev thresholdState) ([]threshold, thresholdState) {
	acted := map[threshold]bool{}
	for _, t := range prev.acted {
		acted[t] = true
	}
	next := thresholdState{firstMet: map[threshold]time.Time{}}
	var out []threshold
	for _, s := range sig.Signals() {
		o, ok := obs.Signals[s]
		if !ok {
			continue
		}
		for _, t := range []threshold{{s, false}, {s, true}} {
			met := o.Met()
			if t.Soft {
				met = o.SoftMet()
			}
			if !met && !(acted[t] && o.Unresolved(t.Soft)) {
				continue
			}
			first, seen := prev.firstMet[t]
			if !seen {
				first = now
			}
			next.firstMet[t] = first
			if now.Sub(first) >= gracePeriod(t, soft) {
				out = append(out, t)
			}
		}
	}
	next.acted = out
	return out, next
}

// anyUnresolved reports whether any threshold, hard or soft, is still met
// counting its signal's minimum reclaim: after node-level reclaim, pods
// are evicted unless every signal is above its thresholds plus minimum
// reclaim (kubelet's reclaimNodeLevelResources).
func anyUnresolved(obs sig.Observation) bool {
	for _, o := range obs.Signals {
		if o.Unresolved(false) || o.Unresolved(true) {
			return true
		}
	}
	return false
}

// observedFor is the signal's observation with the threshold acted on as
// its threshold, for the eviction message (kubelet names the quantity of
// the threshold it acts on).
func observedFor(t threshold, obs sig.Observation) sig.Observed {
	o := obs.Signals[t.Signal]
	if t.Soft {
		o.Threshold, o.ThresholdText = o.Soft, o.SoftText
	}
	return o
}

// podGracePeriod is the grace period a pod evicted for threshold t is
// killed with: kubelet's immediate 1 s for a hard threshold (and for a
// soft one whose grace period is 0, which kubelet treats as hard);
// otherwise min(evictionMaxPodGracePeriod, the pod's
// terminationGracePeriodSeconds). As in kubelet, a result below 1 s
// (evictionMaxPodGracePeriod 0, its default, or negative) becomes 1 s:
// kubelet's pod worker never kills with less.
func podGracePeriod(t threshold, soft map[string]time.Duration, maxPodGraceSeconds int64, pod *v1.Pod) time.Duration {
	secs := int64(hardEvictionGracePeriodSecs)
	if gracePeriod(t, soft) != 0 {
		secs = maxPodGraceSeconds
		if g := pod.Spec.TerminationGracePeriodSeconds; g != nil {
			secs = min(secs, *g)
		}
	}
	return time.Duration(max(secs, 1)) * time.Second
}
