package shutdown

import (
	"fmt"
	"time"

	"github.com/nodeagent/nodeagent/kubetypes"
	v1 "k8s.io/api/core/v1"
)

// SystemCriticalPriority is the priority from which a pod is stopped with
// the critical pods. Unlike eviction, shutdown goes by priority alone, as
// kubelet's groupByPriority does: a static pod without a critical
// priority is stopped with the regular pods.
const SystemCriticalPriority = kubetypes.SystemCriticalPriority

// Group is a set of pods stopped together, with at most Grace each; the
// group is waited for at most Grace.
type Group struct {
	Critical bool
	Grace    time.Duration
	Pods     []*v1.Pod
}

// Groups splits pods into the order they are stopped in, as kubelet's
// migrateConfig and groupByPriority do for shutdownGracePeriod and
// shutdownGracePeriodCriticalPods: first the regular pods (priority below
// SystemCriticalPriority, no priority counting as 0) with total -
// critical, then the critical pods with critical. Grace periods are whole
// seconds, as kubelet's. Empty groups are left out; total 0 or critical
// above total gives no groups (the feature is off).
func Groups(pods []*v1.Pod, total, critical time.Duration) []Group {
	if total <= 0 || critical < 0 || critical > total {
		return nil
	}
	regular := Group{Grace: (total - critical).Truncate(time.Second)}
	crit := Group{Critical: true, Grace: critical.Truncate(time.Second)}
	for _, p := range pods {
		if kubetypes.Priority(p) >= SystemCriticalPriority {
			crit.Pods = append(crit.Pods, p)
		} else {
			regular.Pods = append(regular.Pods, p)
		}
	}
	var out []Group
	for _, g := range []Group{regular, crit} {
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
// wanted one (shutdownGracePeriod), as kubelet's start does.
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
	return fmt.Sprintf("# Written by nodeagent for graceful node shutdown (shutdownGracePeriod).\n[Login]\nInhibitDelayMaxSec=%d\n", secs)
}
