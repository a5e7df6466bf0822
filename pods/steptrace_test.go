package pods

import (
	"testing"
	"time"

	testclock "k8s.io/utils/clock/testing"
)

// A step that may follow unnamed work (settleExits after syncFinished's
// release) counts from its own start; the next step counts from its end.
func TestStepTraceStepSince(t *testing.T) {
	clk := testclock.NewFakeClock(time.Date(2026, 11, 28, 10, 0, 0, 0, time.UTC))
	tr := newStepTrace(clk)
	clk.Step(time.Second)
	tr.step("a")
	clk.Step(5 * time.Second) // unnamed work
	start := tr.now()
	clk.Step(2 * time.Millisecond)
	tr.stepSince("drain", start)
	clk.Step(3 * time.Millisecond)
	tr.step("status")
	want := []any{"a", time.Second, "drain", 2 * time.Millisecond, "status", 3 * time.Millisecond}
	if len(tr.attrs) != len(want) {
		t.Fatalf("attrs %v, want %v", tr.attrs, want)
	}
	for i := range want {
		if tr.attrs[i] != want[i] {
			t.Fatalf("attrs %v, want %v", tr.attrs, want)
		}
	}
	var off *stepTrace
	off.stepSince("drain", off.now()) // the trace off: nothing, no panic
}
