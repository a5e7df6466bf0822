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

// stepSince records the time since start under name, for a step that
// may follow work no step names (the time before start is left out).
func (t *stepTrace) stepSince(name string, start time.Time) {
	if t == nil {
		return
	}
	now := t.clock.Now()
	t.attrs = append(t.attrs, name, now.Sub(start))
	t.last = now
}

// now is the trace's clock (zero while the trace is off).
func (t *stepTrace) now() time.Time {
	if t == nil {
		return time.Time{}
	}
	return t.clock.Now()
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
