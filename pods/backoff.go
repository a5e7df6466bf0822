package pods

import (
	"math"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
)

// crashLoopBackoff is kubelet's crash-loop back-off: a container that exits
// and is to be restarted is restarted at once the first time, then after
// 10s, 20s, 40s, ... up to 5m (kubelet's backOffPeriod and
// MaxContainerBackOff).
var crashLoopBackoff = wait.Backoff{Duration: 10 * time.Second, Factor: 2, Cap: 5 * time.Minute, Steps: math.MaxInt32}

// crashLoopReset: a container that ran this long before it exited starts
// its back-off over.
const crashLoopReset = 10 * time.Minute

// syncRetry is the delay before the next retry of a failed sync, and of a
// worker that keeps acting without settling: 1s doubling to 1m.
var syncRetry = wait.Backoff{Duration: time.Second, Factor: 2, Cap: time.Minute, Steps: math.MaxInt32}

// crashLoop is one container's restart back-off, a value: restartAt is a
// pure function of it and the container's run. The zero value means "no
// restart yet".
type crashLoop struct {
	started bool         // restarted at least once
	next    wait.Backoff // the delays still to come
}

// restartAt decides when a container that finished at finishedAt (after
// starting at startedAt) may be restarted: the time of the restart (≤ now
// means now), the delay that puts it there, and the back-off state to keep
// if the caller restarts it then.
func (b crashLoop) restartAt(startedAt, finishedAt time.Time) (time.Time, time.Duration, crashLoop) {
	if !b.started || (!startedAt.IsZero() && finishedAt.Sub(startedAt) >= crashLoopReset) {
		// First restart, or it ran long enough to be forgiven.
		return finishedAt, 0, crashLoop{started: true, next: crashLoopBackoff}
	}
	next := b.next
	d := next.Step()
	return finishedAt.Add(d), d, crashLoop{started: true, next: next}
}

// resyncJitterFactor is kubelet's workerResyncIntervalJitterFactor: after
// a successful sync a pod worker waits its resync period plus up to half
// of it, so that pods started together do not resync together.
const resyncJitterFactor = 0.5

func resyncJitter(d time.Duration) time.Duration { return wait.Jitter(d, resyncJitterFactor) }
