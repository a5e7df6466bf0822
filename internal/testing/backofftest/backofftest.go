// Package backofftest checks, on a fake clock, the delays a retry loop
// waits between its attempts. It is for tests only.
//
// The loop under test must wait on the fake clock (clock.After or
// NewTimer), and be the only waiter on it while ExpectDelays runs. Real time
// is used only to wait, boundedly, for the loop to make progress; that
// nothing happens before a delay has passed is checked without waiting,
// since the loop cannot move while its timer has not fired.
package backofftest

import (
	"testing"
	"time"

	testingclock "k8s.io/utils/clock/testing"
)

// progressTimeout bounds how long ExpectDelays waits (in real time) for the
// loop to make its next attempt and to wait on the clock again.
const progressTimeout = 10 * time.Second

// ExpectDelays checks that the loop waits exactly want[0] after the attempt
// it has made when it first waits on clk, then want[1] after the next one,
// and so on, and returns once the attempt after the last delay has
// happened. attempts reports how many attempts the loop has made so far.
func ExpectDelays(t testing.TB, clk *testingclock.FakeClock, attempts func() int, want ...time.Duration) {
	t.Helper()
	n := 0
	for i, d := range want {
		WaitWaiting(t, clk)
		if i == 0 {
			n = attempts()
		}
		if got := attempts(); got != n {
			t.Fatalf("delay %d: %d attempts before the loop waited, want %d", i, got, n)
		}
		if d > time.Nanosecond {
			clk.Step(d - time.Nanosecond)
			if got := attempts(); got != n || clk.Waiters() == 0 {
				t.Fatalf("delay %d: attempt %d came before %s had passed", i, n+1, d)
			}
		}
		clk.Step(min(d, time.Nanosecond))
		WaitFor(t, func() bool { return attempts() > n }, "attempt after delay %d (%s)", i, d)
		if got := attempts(); got != n+1 {
			t.Fatalf("delay %d: %d attempts after %s, want %d", i, got, d, n+1)
		}
		n++
	}
}

// WaitWaiting waits until something waits on clk.
func WaitWaiting(t testing.TB, clk *testingclock.FakeClock) {
	t.Helper()
	WaitFor(t, clk.HasWaiters, "the loop to wait on the clock")
}

// WaitFor polls cond until it holds, failing the test after a while.
func WaitFor(t testing.TB, cond func() bool, format string, args ...any) {
	t.Helper()
	deadline := time.Now().Add(progressTimeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for "+format, args...)
		}
		time.Sleep(time.Millisecond)
	}
}
