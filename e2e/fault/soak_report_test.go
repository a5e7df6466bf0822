package fault

import (
	"strings"
	"testing"
	"time"
)

// TestSoakJudgement checks the soak's verdicts on made-up timelines: a
// renewal gap is a missed window unless a fault excuses it, and NotReady is
// false unless a long API outage explains it.
func TestSoakJudgement(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	renewals := func(ss ...float64) []time.Time {
		var out []time.Time
		for _, s := range ss {
			out = append(out, at(s))
		}
		return out
	}
	for _, tc := range []struct {
		name     string
		faults   []soakFault
		renewals []time.Time
		missed   int
	}{
		{"on time", nil, renewals(0, 10, 20.5, 31), 0},
		{"late without a fault", nil, renewals(0, 10, 23), 1},
		{"CPU quota gives no extra", []soakFault{{kind: "cpu-5pct", start: at(5), end: at(60)}}, renewals(0, 10, 23), 1},
		{"blackholed established: 2 intervals", []soakFault{{kind: "blackhole-established", start: at(1), end: at(60), extra: renewInterval}}, renewals(0, 16, 26), 0},
		{"API cut: renewed within 12s of the end", []soakFault{{kind: "apiserver-down", start: at(5), end: at(50), apiCut: true}}, renewals(0, 55), 0},
		{"API cut: renewed late after the end", []soakFault{{kind: "apiserver-down", start: at(5), end: at(50), apiCut: true}}, renewals(0, 65), 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := &soak{faults: tc.faults}
			missed, _ := s.missedWindows(tc.renewals)
			if len(missed) != tc.missed {
				t.Errorf("missed %v, want %d", missed, tc.missed)
			}
		})
	}

	s := &soak{faults: []soakFault{
		{kind: "apiserver-down", start: at(100), end: at(150), apiCut: true}, // 50s: excuses
		{kind: "etcd-frozen", start: at(300), end: at(320), apiCut: true},    // 20s: does not
	}}
	for _, sec := range []float64{151, 151.5, 152, 200, 310, 310.5, 400, 400.5} {
		s.notReady = append(s.notReady, soakSighting{at(sec), "Ready=Unknown"})
	}
	s.notReady = append(s.notReady, soakSighting{at(500), "Ready=False"})
	// Renewals seen: none within 35s of the sightings at 200 and 310; one
	// 20s before 400 (the controller's view was stale) and 5s before 500
	// (but Ready=False is the agent's own word).
	false_, excused, stale := s.notReadyEpisodes(renewals(0, 100, 160, 380, 495))
	if len(stale) != 1 || !strings.Contains(stale[0], "renewed at") || !strings.Contains(stale[0], "20s before") {
		t.Errorf("stale %q, want the one Unknown episode 20s after a renewal", stale)
	}
	if len(excused) != 1 || !strings.Contains(excused[0], "3 sightings") || !strings.Contains(excused[0], "Ready again 2s after") {
		t.Errorf("excused %q, want the one episode after the 50s outage", excused)
	}
	if len(false_) != 3 {
		t.Errorf("false NotReady %q, want 3 episodes (one 50s after the outage's end, one during a 20s freeze, a Ready=False)", false_)
	}
}
