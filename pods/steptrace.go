package pods

import (
	"context"
	"time"

	"k8s.io/utils/clock"
)

// stepTrace is the latency trace of one sync (-v=4): how long each step
// took, as log attributes. A nil stepTrace records nothing, so the steps
// cost nothing while the trace is off.
type stepTrace struct {
	clock clock.PassiveClock
	last  time.Time
	attrs []any
}

func newStepTrace(c clock.PassiveClock) *stepTrace {
	return &stepTrace{clock: c, last: c.Now()}
}

// step records the time since the previous step under name.
func (t *stepTrace) step(name string) {
	if t == nil {
		return
	}
	now := t.clock.Now()
	t.attrs = append(t.attrs, name, now.Sub(t.last))
	t.last = now
}

type stepTraceKey struct{}

// withStepTrace carries a sync's trace to its steps.
func withStepTrace(ctx context.Context, t *stepTrace) context.Context {
	return context.WithValue(ctx, stepTraceKey{}, t)
}

// stepTraceFrom is the sync's trace (nil: off).
func stepTraceFrom(ctx context.Context) *stepTrace {
	t, _ := ctx.Value(stepTraceKey{}).(*stepTrace)
	return t
}
