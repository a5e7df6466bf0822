package shutdown

import (
	"cmp"
	"fmt"
	"slices"
	"time"

	"github.com/nodeagent/nodeagent/kubetypes"
	v1 "k8s.io/api/core/v1"
)

// SystemCriticalPriority is the priority from which a pod is stopped with
// the critical pods. Unlike eviction, shutdown goes by priority alone, as
// kubelet's groupByPriority does: a static pod without a critical
// priority is stopped with the regular pods.
const SystemCriticalPriority = kubetypes.SystemCriticalPriority

// Band is one entry of shutdownGracePeriodByPodPriority: the pods whose
// priority is at least Priority, and below the next band's, are stopped
// together with at most Grace (whole seconds).
type Band struct {
	Priority int32
	Grace    time.Duration
}

// MigrateBands turns shutdownGracePeriod and
// shutdownGracePeriodCriticalPods into bands, as kubelet's migrateConfig
// does: priority 0 with total - critical, SystemCriticalPriority with
// critical, each in whole seconds. total 0, or critical above total, gives
// none (the feature is off).
func MigrateBands(total, critical time.Duration) []Band {
	if total <= 0 || critical < 0 || critical > total {
		return nil
	}
	regular := total - critical
	return []Band{
		{Priority: 0, Grace: regular.Truncate(time.Second)},
		{Priority: SystemCriticalPriority, Grace: (total - regular).Truncate(time.Second)},
	}
}

// TotalGrace is how long the node's shutdown is delayed for bands: the sum
// of their grace periods (kubelet's periodRequested).
func TotalGrace(bands []Band) time.Duration {
	var sum time.Duration
	for _, b := range bands {
		sum += b.Grace
	}
	return sum
}

// sortedBands returns bands sorted by priority, lowest first (the order
// they are stopped in); bands of the same priority keep their order.
func sortedBands(bands []Band) []Band {
	out := slices.Clone(bands)
	slices.SortStableFunc(out, func(a, b Band) int { return cmp.Compare(a.Priority, b.Priority) })
	return out
}

// Group is the pods of one band, stopped together with at most Grace
// each; the group is waited for at most Grace.
type Group struct {
	Priority int32 // the band's
	Grace    time.Duration
	Pods     []*v1.Pod
}

// Critical reports whether the group's band is of critical pods.
func (g Group) Critical() bool { return g.Priority >= SystemCriticalPriority }

// Groups splits pods into the order they are stopped in, as kubelet's
// groupByPriority does: bands from the lowest priority upward, a pod (no
// priority counting as 0) in the band with the highest priority not above
// its own, a pod below every band in the lowest. Unlike eviction, shutdown
// goes by priority alone: a static pod without a critical priority is not
// critical here. Empty groups are left out (kubelet does not wait for
// them); no bands gives no groups.
func Groups(pods []*v1.Pod, bands []Band) []Group {
	if len(bands) == 0 {
		return nil
	}
	bands = sortedBands(bands)
	groups := make([]Group, len(bands))
	for i, b := range bands {
		groups[i] = Group{Priority: b.Priority, Grace: b.Grace}
	}
	for _, p := range pods {
		prio := kubetypes.Priority(p)
		// The first band at or above the pod's priority: that band if
		// equal, else the one below it (the last band if none is at or
		// above, the lowest if all are above). Bands sharing a priority
		// thus split as in kubelet: the first takes pods of exactly that
		// priority, the last those above it.
		i := slices.IndexFunc(groups, func(g Group) bool { return g.Priority >= prio })
		switch {
		case i < 0:
			i = len(groups) - 1
		case i > 0 && groups[i].Priority > prio:
			i--
		}
		groups[i].Pods = append(groups[i].Pods, p)
	}
	var out []Group
	for _, g := range groups {
		if len(g.Pods) > 0 {
			out = append(out, g)
		}
	}
	return out
}

// delayAction is what to do about logind's InhibitDelayMaxSec.
type delayAction int

const (
	delayEnough delayAction = iota // current >= wanted: nothing
	delayRaise                     // write the drop-in and reload logind
)

// decideDelay compares logind's current maximum inhibitor delay with the
// wanted one (the bands' total), as kubelet's start does.
func decideDelay(current, wanted time.Duration) delayAction {
	if wanted > current {
		return delayRaise
	}
	return delayEnough
}

// dropInName is the logind drop-in the agent writes. kubelet's is
// 99-kubelet.conf; logind takes the value of the drop-in that sorts last,
// which is the agent's if both exist.
const dropInName = "99-nodeagent.conf"

// dropIn is the content of the logind drop-in raising InhibitDelayMaxSec
// to d (whole seconds, rounded up).
func dropIn(d time.Duration) string {
	secs := int64((d + time.Second - 1) / time.Second)
	return fmt.Sprintf("# Written by nodeagent for graceful node shutdown (shutdownGracePeriod, or the sum of shutdownGracePeriodByPodPriority).\n[Login]\nInhibitDelayMaxSec=%d\n", secs)
}
