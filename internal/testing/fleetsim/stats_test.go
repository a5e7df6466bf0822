package fleetsim

import (
	"math"
	"testing"
	"time"
)

var sched = Schedule{Interval: 10 * time.Second, Jitter: 0.04, Slack: time.Second, LeaseDuration: 40 * time.Second}

func TestClassifyGap(t *testing.T) {
	for _, tc := range []struct {
		desc string
		gap  time.Duration
		want GapClass
	}{
		{"on time", 10 * time.Second, GapClass{}},
		{"full jitter", 10400 * time.Millisecond, GapClass{}},
		{"within slack", 11400 * time.Millisecond, GapClass{}},
		{"just late", 11401 * time.Millisecond, GapClass{Late: true}},
		{"one window missed", 21 * time.Second, GapClass{Late: true, Missed: 1}},
		{"late by less than half a window", 15 * time.Second, GapClass{Late: true}},
		{"late by more than half a window", 17 * time.Second, GapClass{Late: true, Missed: 1}},
		{"two windows missed", 35 * time.Second, GapClass{Late: true, Missed: 2}},
		{"at the lease duration", 40 * time.Second, GapClass{Late: true, Missed: 3}},
		{"expired", 41 * time.Second, GapClass{Late: true, Missed: 3, Expired: true}},
		{"early (a duration change)", 2 * time.Second, GapClass{}},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			if got := ClassifyGap(sched, tc.gap); got != tc.want {
				t.Errorf("ClassifyGap(%v) = %+v, want %+v", tc.gap, got, tc.want)
			}
		})
	}
}

func TestTally(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	for _, tc := range []struct {
		desc     string
		renewals []time.Time
		end      time.Time
		want     Tally
	}{
		{"steady", []time.Time{at(0), at(10), at(20.4), at(30.5)}, at(35), Tally{Renewals: 4, MaxGap: 10400 * time.Millisecond}},
		{"one late", []time.Time{at(0), at(12), at(22)}, at(25), Tally{Renewals: 3, Late: 1, MaxGap: 12 * time.Second}},
		{"a missed window", []time.Time{at(0), at(21), at(31)}, at(36), Tally{Renewals: 3, Late: 1, Missed: 1, MaxGap: 21 * time.Second}},
		{"stopped renewing: open gap counts missed windows, not late", []time.Time{at(0), at(10)}, at(55),
			Tally{Renewals: 2, Missed: 4, Expired: 1, MaxGap: 45 * time.Second}},
		{"never renewed", nil, at(30), Tally{}},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			var got Tally
			var prev time.Time
			for _, r := range tc.renewals {
				got.Observe(sched, prev, r)
				prev = r
			}
			got.Close(sched, prev, tc.end)
			if got != tc.want {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestTallyAdd(t *testing.T) {
	a := Tally{Renewals: 3, Late: 1, Missed: 2, Expired: 0, MaxGap: time.Second}
	a.Add(Tally{Renewals: 4, Late: 2, Missed: 1, Expired: 1, MaxGap: 3 * time.Second})
	want := Tally{Renewals: 7, Late: 3, Missed: 3, Expired: 1, MaxGap: 3 * time.Second}
	if a != want {
		t.Errorf("got %+v, want %+v", a, want)
	}
}

func TestPercentile(t *testing.T) {
	ms := func(v ...int) []time.Duration {
		var out []time.Duration
		for _, x := range v {
			out = append(out, time.Duration(x)*time.Millisecond)
		}
		return out
	}
	hundred := make([]time.Duration, 100)
	for i := range hundred {
		hundred[i] = time.Duration(100-i) * time.Millisecond // reversed: Percentile sorts
	}
	for _, tc := range []struct {
		desc    string
		samples []time.Duration
		p       float64
		want    time.Duration
	}{
		{"empty", nil, 50, 0},
		{"one sample", ms(7), 99, 7 * time.Millisecond},
		{"median of odd count", ms(5, 1, 3), 50, 3 * time.Millisecond},
		{"median of even count is the lower", ms(4, 1, 3, 2), 50, 2 * time.Millisecond},
		{"p99 of 100", hundred, 99, 99 * time.Millisecond},
		{"p50 of 100", hundred, 50, 50 * time.Millisecond},
		{"p100 is the max", hundred, 100, 100 * time.Millisecond},
		{"p99 of 10 is the max", ms(1, 2, 3, 4, 5, 6, 7, 8, 9, 10), 99, 10 * time.Millisecond},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			if got := Percentile(tc.samples, tc.p); got != tc.want {
				t.Errorf("Percentile(%v) = %v, want %v", tc.p, got, tc.want)
			}
		})
	}
	in := ms(3, 1, 2)
	Percentile(in, 50)
	if in[0] != 3*time.Millisecond {
		t.Error("Percentile sorted its input in place")
	}
}

func TestPerNodeHour(t *testing.T) {
	for _, tc := range []struct {
		desc  string
		v     float64
		nodes int
		d     time.Duration
		want  float64
	}{
		{"360 renewals of one node in an hour", 360, 1, time.Hour, 360},
		{"10 nodes for 6 minutes", 360, 10, 6 * time.Minute, 360},
		{"bytes of 200 nodes over 3 minutes", 1_200_000, 200, 3 * time.Minute, 120_000},
		{"no nodes", 5, 0, time.Hour, 0},
		{"no time", 5, 3, 0, 0},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			if got := PerNodeHour(tc.v, tc.nodes, tc.d); math.Abs(got-tc.want) > 1e-9 {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
	if got := PerThousandNodes(2.5, 200); got != 12.5 {
		t.Errorf("PerThousandNodes(2.5, 200) = %v, want 12.5", got)
	}
	if got := PerThousandNodes(2.5, 0); got != 0 {
		t.Errorf("PerThousandNodes(2.5, 0) = %v, want 0", got)
	}
}

func TestRecover(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	got := Recover(t0, []time.Time{at(100), at(900), at(1500), at(9000), {}})
	want := Recovery{Nodes: 5, Recovered: 4, Min: 100 * time.Millisecond, P50: 900 * time.Millisecond,
		P99: 9 * time.Second, Max: 9 * time.Second, Busiest: 2}
	if got != want {
		t.Errorf("got %+v, want %+v", got, want)
	}
	if got := Recover(t0, []time.Time{{}, {}}); got != (Recovery{Nodes: 2}) {
		t.Errorf("nobody recovered: got %+v", got)
	}
	// A renewal before the reference counts as at it.
	// Renewals before the reference (before /readyz) are counted apart,
	// not piled into a second of their own: that looked like a herd.
	if got := Recover(t0, []time.Time{at(-500), at(-1500), at(200)}); got.Early != 2 || got.Busiest != 1 || got.Recovered != 3 {
		t.Errorf("with early renewals: %+v, want 2 early, busiest second 1", got)
	}
	if got := Recover(t0, []time.Time{at(-500)}); got.Max != 0 || got.Recovered != 1 {
		t.Errorf("early renewal: got %+v", got)
	}
}
