package pods

import (
	"time"
)

// Crash-loop back-off, as kubelet: a container that exits and is to be
// restarted is restarted at once the first time, then after 10s, 20s, 40s,
// ... up to 5m; a container that ran for at least 10 minutes before it
// exited starts over.
const (
	crashLoopInitial = 10 * time.Second
	crashLoopMax     = 5 * time.Minute
	crashLoopReset   = 10 * time.Minute
)

// crashLoop is one container's restart back-off. The zero value means "no
// restart yet".
type crashLoop struct {
	delay time.Duration // delay before the next restart; 0 = none yet
}

// restartAt decides when a container that finished at finishedAt (after
// starting at startedAt) may be restarted. It returns the time of the
// restart (≤ now means now) and the back-off state to keep if the caller
// restarts it then.
func (b crashLoop) restartAt(startedAt, finishedAt time.Time) (time.Time, crashLoop) {
	if b.delay == 0 || (!startedAt.IsZero() && finishedAt.Sub(startedAt) >= crashLoopReset) {
		// First restart, or it ran long enough to be forgiven.
		return finishedAt, crashLoop{delay: crashLoopInitial}
	}
	next := b.delay * 2
	if next > crashLoopMax {
		next = crashLoopMax
	}
	return finishedAt.Add(b.delay), crashLoop{delay: next}
}

// retryBackoff is the delay before the n-th consecutive retry of a failed
// sync (n ≥ 1): 1s doubling to 1m.
func retryBackoff(n int) time.Duration {
	d := time.Second
	for i := 1; i < n && d < time.Minute; i++ {
		d *= 2
	}
	if d > time.Minute {
		d = time.Minute
	}
	return d
}
