package fleetsim

import (
	"math"
	"slices"
	"time"
)

// Schedule is a heartbeat's cadence, the yardstick of the renewal accounting.
type Schedule struct {
	Interval      time.Duration // renew interval (leaseDuration × 0.25)
	Jitter        float64       // the controller stretches each interval by up to this fraction
	Slack         time.Duration // tolerated lateness beyond Interval × (1 + Jitter)
	LeaseDuration time.Duration // a gap longer than this lets the Lease expire
}

// MaxGap is the longest gap between two renewals the controller's own
// schedule allows: one interval stretched by the full jitter.
func (s Schedule) MaxGap() time.Duration {
	return s.Interval + time.Duration(float64(s.Interval)*s.Jitter)
}

// GapClass classifies the time between two successful renewals of a node.
type GapClass struct {
	// Late: the renewal landed more than Slack after MaxGap.
	Late bool
	// Missed is the number of renewals the schedule expected in the gap,
	// rounded to the nearest window of MaxGap, less the one that landed.
	Missed int
	// Expired: the gap exceeded the lease duration; the node lifecycle
	// controller would see the Lease as stale.
	Expired bool
}

// ClassifyGap classifies the gap between two renewals against s.
func ClassifyGap(s Schedule, gap time.Duration) GapClass {
	maxGap := s.MaxGap()
	var c GapClass
	c.Late = gap > maxGap+s.Slack
	if c.Late && maxGap > 0 {
		c.Missed = max(int(math.Floor(float64(gap-s.Slack)/float64(maxGap)+0.5))-1, 0)
	}
	c.Expired = s.LeaseDuration > 0 && gap > s.LeaseDuration
	return c
}

// openGap classifies the time since a node's last renewal when no renewal
// ended it: every window of MaxGap (after Slack) that passed is missed.
func openGap(s Schedule, gap time.Duration) GapClass {
	var c GapClass
	if maxGap := s.MaxGap(); maxGap > 0 && gap > s.Slack {
		c.Missed = int((gap - s.Slack) / maxGap)
	}
	c.Expired = s.LeaseDuration > 0 && gap > s.LeaseDuration
	return c
}

// Tally accumulates the renewal accounting of one or more nodes.
type Tally struct {
	Renewals int           // successful renewals observed
	Late     int           // renewals that came late (ClassifyGap)
	Missed   int           // renewal windows without a renewal
	Expired  int           // gaps longer than the lease duration
	MaxGap   time.Duration // longest gap seen
}

// Observe accounts a successful renewal at t after the previous one at prev
// (zero for the node's first renewal, which only counts).
func (t *Tally) Observe(s Schedule, prev, at time.Time) {
	t.Renewals++
	if prev.IsZero() {
		return
	}
	t.gap(s, at.Sub(prev), true)
}

// Close accounts the open gap from a node's last renewal (or its start,
// when it never renewed) to end: windows that passed without a renewal are
// missed, and an expired Lease counts; nothing is late, nothing landed.
func (t *Tally) Close(s Schedule, last, end time.Time) {
	if last.IsZero() || !end.After(last) {
		return
	}
	t.gap(s, end.Sub(last), false)
}

func (t *Tally) gap(s Schedule, gap time.Duration, landed bool) {
	c := openGap(s, gap)
	if landed {
		c = ClassifyGap(s, gap)
	}
	if c.Late {
		t.Late++
	}
	t.Missed += c.Missed
	if c.Expired {
		t.Expired++
	}
	t.MaxGap = max(t.MaxGap, gap)
}

// Add merges o into t.
func (t *Tally) Add(o Tally) {
	t.Renewals += o.Renewals
	t.Late += o.Late
	t.Missed += o.Missed
	t.Expired += o.Expired
	t.MaxGap = max(t.MaxGap, o.MaxGap)
}

// Percentile returns the p-th percentile (0 < p ≤ 100) of samples by the
// nearest-rank method, sorting a copy; 0 for no samples.
func Percentile(samples []time.Duration, p float64) time.Duration {
	if len(samples) == 0 {
		return 0
	}
	s := slices.Clone(samples)
	slices.Sort(s)
	rank := int(math.Ceil(p / 100 * float64(len(s))))
	rank = min(max(rank, 1), len(s))
	return s[rank-1]
}

// PerNodeHour divides a count (writes, bytes, CPU seconds) observed over d
// for nodes nodes into a rate per node-hour; 0 when nodes or d is zero.
func PerNodeHour(v float64, nodes int, d time.Duration) float64 {
	if nodes <= 0 || d <= 0 {
		return 0
	}
	return v / float64(nodes) / d.Hours()
}

// PerThousandNodes scales a fleet-wide figure to 1,000 nodes; 0 for no nodes.
func PerThousandNodes(v float64, nodes int) float64 {
	if nodes <= 0 {
		return 0
	}
	return v * 1000 / float64(nodes)
}

// Ratio is a/b, or 0 when b is zero.
func Ratio(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return a / b
}

// Recovery summarizes how nodes came back after an outage: the offset of
// each node's first successful renewal from a reference time (the API
// server's restart), and how spread out those renewals are.
type Recovery struct {
	Nodes, Recovered   int
	Min, P50, P99, Max time.Duration
	// Busiest is the most renewals that landed in any one second, a herd's
	// signature (a fleet spread over the interval lands Nodes/Interval·s).
	// Early renewals are not counted in it.
	Busiest int
	// Early is how many first renewals came before from (an API server
	// answers requests before its /readyz does); they count as 0 in
	// Min..Max.
	Early int
}

// Recover computes the Recovery of nodes whose first renewal after from is
// in first (zero: not renewed yet).
func Recover(from time.Time, first []time.Time) Recovery {
	r := Recovery{Nodes: len(first)}
	var offs []time.Duration
	perSecond := map[int64]int{}
	for _, t := range first {
		if t.IsZero() {
			continue
		}
		d := t.Sub(from)
		if d < 0 {
			r.Early++
			offs = append(offs, 0)
			continue
		}
		offs = append(offs, d)
		perSecond[int64(d/time.Second)]++
	}
	r.Recovered = len(offs)
	if len(offs) == 0 {
		return r
	}
	r.Min, r.Max = slices.Min(offs), slices.Max(offs)
	r.P50, r.P99 = Percentile(offs, 50), Percentile(offs, 99)
	for _, n := range perSecond {
		r.Busiest = max(r.Busiest, n)
	}
	return r
}
