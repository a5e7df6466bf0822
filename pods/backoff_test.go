package pods

import (
	"fmt"
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
		at, d, nb := b.restartAt(started, finished)
		if at.Sub(finished) != d {
			t.Fatalf("restart %d: at +%v, delay %v", i, at.Sub(finished), d)
		}
		waits = append(waits, d)
		b = nb
		started = at
	}
	want := []time.Duration{0, 10 * time.Second, 20 * time.Second, 40 * time.Second, 80 * time.Second, 160 * time.Second, 300 * time.Second, 300 * time.Second}
	if fmt.Sprint(waits) != fmt.Sprint(want) {
		t.Fatalf("waits = %v, want %v", waits, want)
	}
	// Ten minutes of running forgives the past: at once, then 10s again.
	at, _, nb := b.restartAt(t0, t0.Add(crashLoopReset))
	if !at.Equal(t0.Add(crashLoopReset)) {
		t.Fatalf("after a long run: restart at +%v", at.Sub(t0))
	}
	if _, d, _ := nb.restartAt(t0, t0.Add(time.Second)); d != 10*time.Second {
		t.Fatalf("after a long run, the next delay is %v, want 10s", d)
	}
	// Nine minutes do not.
	at, _, _ = b.restartAt(t0, t0.Add(9*time.Minute))
	if at.Sub(t0.Add(9*time.Minute)) != 5*time.Minute {
		t.Fatalf("after a short run: restart in %v", at.Sub(t0.Add(9*time.Minute)))
	}
}

func TestSyncRetry(t *testing.T) {
	b := syncRetry
	var got []time.Duration
	for i := 0; i < 9; i++ {
		got = append(got, b.Step())
	}
	want := "[1s 2s 4s 8s 16s 32s 1m0s 1m0s 1m0s]"
	if fmt.Sprint(got) != want {
		t.Errorf("sync retry delays %v, want %s", got, want)
	}
}
