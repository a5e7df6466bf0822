package nodestatus

import (
	"sort"
	"time"

	v1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ShouldReport decides whether the status is written at now:
//   - always when nothing was reported since start (lastReport is zero);
//   - when the status changed meaningfully (changed; see StatusChanged);
//   - otherwise once reportFrequency+jitter has passed since lastReport.
//
// jitter is the offset drawn by ReportJitter after a change or the first
// report, and 0 afterwards, so a fleet restarted at once spreads its
// unchanged reports over the period and then keeps a fixed cadence. It is
// bounded by ±reportFrequency/2 of the frequency in force, so a jitter drawn
// for an older, longer frequency (SetFrequencies lowering 5m to 10s) cannot
// hold the next report back by minutes.
func ShouldReport(now, lastReport time.Time, changed bool, reportFrequency, jitter time.Duration) bool {
	if lastReport.IsZero() || changed {
		return true
	}
	jitter = min(max(jitter, -reportFrequency/2), reportFrequency/2)
	return now.Sub(lastReport) >= reportFrequency+jitter
}

// ReportJitter maps r in [0,1) to an offset in [-reportFrequency/2,
// +reportFrequency/2), as kubelet does after a change.
func ReportJitter(reportFrequency time.Duration, r float64) time.Duration {
	return time.Duration(float64(reportFrequency) * (r - 0.5))
}

// StatusChanged reports whether new differs meaningfully from old: any field
// other than the conditions' lastHeartbeatTime, regardless of condition order.
func StatusChanged(old, new *v1.NodeStatus) bool {
	if old == nil || new == nil {
		return old != new
	}
	if len(old.Conditions) != len(new.Conditions) {
		return true
	}
	oc, nc := withoutHeartbeats(old.Conditions), withoutHeartbeats(new.Conditions)
	if !apiequality.Semantic.DeepEqual(oc, nc) {
		return true
	}
	o, n := *old, *new // shallow copies; only Conditions is replaced
	o.Conditions, n.Conditions = nil, nil
	return !apiequality.Semantic.DeepEqual(o, n)
}

func withoutHeartbeats(cs []v1.NodeCondition) []v1.NodeCondition {
	out := make([]v1.NodeCondition, len(cs))
	copy(out, cs)
	for i := range out {
		out[i].LastHeartbeatTime = metav1.Time{}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Type < out[j].Type })
	return out
}
