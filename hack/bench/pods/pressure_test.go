package main

import (
	"testing"
	"time"

	"github.com/nodeagent/nodeagent/internal/testing/fleetsim"
)

func TestParsePSISome(t *testing.T) {
	p, err := parsePSISome("some avg10=0.12 avg60=1.50 avg300=0.00 total=319142\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=21936\n")
	if err != nil {
		t.Fatal(err)
	}
	if p != (psi{Avg10: 0.12, Avg60: 1.5, TotalUs: 319142}) {
		t.Errorf("got %+v", p)
	}
	for _, bad := range []string{"", "full avg10=0 avg60=0 avg300=0 total=1\n", "some avg10=x avg60=0 avg300=0 total=1\n"} {
		if _, err := parsePSISome(bad); err == nil {
			t.Errorf("parsePSISome(%q): no error", bad)
		}
	}
}

// TestRenewalGaps: the hold counts a missed window for a gap of two
// intervals and the renewals still outstanding at the end, none for a
// regular cadence.
func TestRenewalGaps(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	missed := func(start time.Time, rs []time.Time, end time.Time) int {
		n := 0
		for _, g := range renewalGaps(start, rs, end) {
			n += fleetsim.ClassifyGap(leaseSchedule, g).Missed
		}
		return n
	}
	regular := []time.Time{at(3), at(13), at(23.3), at(33.5)}
	if got := missed(t0, regular, at(40)); got != 0 {
		t.Errorf("regular cadence: %d missed, want 0", got)
	}
	skipped := []time.Time{at(3), at(13), at(33.4), at(43.5)}
	if got := missed(t0, skipped, at(50)); got != 1 {
		t.Errorf("one window skipped: %d missed, want 1", got)
	}
	// Renewals due at ~23 s and ~33 s never came: two windows.
	if got := missed(t0, regular[:2], at(40)); got != 2 {
		t.Errorf("renewals stopped 27 s before the end: %d missed, want 2", got)
	}
}
