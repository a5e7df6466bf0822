package pods

import (
	"testing"
	"time"
)

func TestCrashLoopBackoff(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var b crashLoop
	var waits []time.Duration
	started := t0
	for i := 0; i < 8; i++ {
		finished := started.Add(time.Second)
		at, nb := b.restartAt(started, finished)
		waits = append(waits, at.Sub(finished))
		b = nb
		started = at
	}
	want := []time.Duration{0, 10 * time.Second, 20 * time.Second, 40 * time.Second, 80 * time.Second, 160 * time.Second, 300 * time.Second, 300 * time.Second}
	for i := range want {
		if waits[i] != want[i] {
			t.Fatalf("waits = %v, want %v", waits, want)
		}
	}
	// Ten minutes of running forgives the past.
	at, nb := b.restartAt(t0, t0.Add(crashLoopReset))
	if !at.Equal(t0.Add(crashLoopReset)) || nb.delay != crashLoopInitial {
		t.Fatalf("after a long run: restart at +%v, next delay %v", at.Sub(t0), nb.delay)
	}
	// Nine minutes do not.
	at, _ = b.restartAt(t0, t0.Add(9*time.Minute))
	if at.Sub(t0.Add(9*time.Minute)) != crashLoopMax {
		t.Fatalf("after a short run: restart in %v", at.Sub(t0.Add(9*time.Minute)))
	}
}

func TestRetryBackoff(t *testing.T) {
	for n, want := range map[int]time.Duration{1: time.Second, 2: 2 * time.Second, 3: 4 * time.Second, 7: time.Minute, 50: time.Minute} {
		if got := retryBackoff(n); got != want {
			t.Errorf("retryBackoff(%d) = %v, want %v", n, got, want)
		}
	}
}
