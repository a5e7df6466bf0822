package imagegc

import (
	"reflect"
	"testing"
	"time"
)

var t0 = time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)

func at(m int) time.Time { return t0.Add(time.Duration(m) * time.Minute) }

func ids(rs []Record) []string {
	var out []string
	for _, r := range rs {
		out = append(out, r.ID)
	}
	return out
}

func TestUsage(t *testing.T) {
	p := Policy{HighThresholdPercent: 85, LowThresholdPercent: 80}
	for _, tc := range []struct {
		u       Usage
		percent int
		free    int64
	}{
		{Usage{Capacity: 1000, Available: 500}, 50, 0},
		{Usage{Capacity: 1000, Available: 151}, 85, 49}, // 84.9% rounds up to 85 as kubelet's integer division does
		{Usage{Capacity: 1000, Available: 150}, 85, 50},
		{Usage{Capacity: 1000, Available: 0}, 100, 200},
		{Usage{Capacity: 1000, Available: 2000}, 0, 0}, // available above capacity counts as capacity
		{Usage{Capacity: 0, Available: 0}, 0, 0},
	} {
		if got := tc.u.Percent(); got != tc.percent {
			t.Errorf("%+v: Percent = %d, want %d", tc.u, got, tc.percent)
		}
		if got := p.BytesToFree(tc.u); got != tc.free {
			t.Errorf("%+v: BytesToFree = %d, want %d", tc.u, got, tc.free)
		}
	}
}

func TestPolicyDisabled(t *testing.T) {
	for _, tc := range []struct {
		p    Policy
		want bool
	}{
		{Policy{HighThresholdPercent: 85}, false},
		{Policy{HighThresholdPercent: 100}, true},
		{Policy{HighThresholdPercent: 100, MaxAge: time.Hour}, false},
	} {
		if got := tc.p.Disabled(); got != tc.want {
			t.Errorf("%+v: Disabled = %v", tc.p, got)
		}
	}
}

func TestForSpace(t *testing.T) {
	p := Policy{HighThresholdPercent: 85, LowThresholdPercent: 80, MinAge: 2 * time.Minute}
	records := []Record{
		{ID: "used-now", FirstDetected: at(0), LastUsed: at(10), Size: 100, InUse: true},
		{ID: "pinned", FirstDetected: at(0), Size: 100, Pinned: true},
		{ID: "lru", FirstDetected: at(0), LastUsed: at(3), Size: 10},
		{ID: "mru", FirstDetected: at(0), LastUsed: at(8), Size: 10},
		{ID: "never-old", FirstDetected: at(1), Size: 10},
		{ID: "never-older", FirstDetected: at(0), Size: 10},
		{ID: "young", FirstDetected: at(9), Size: 1000},
	}
	for _, tc := range []struct {
		name string
		need int64
		want []string
		sum  int64
	}{
		{"nothing to free", 0, nil, 0},
		{"one image is enough", 5, []string{"never-older"}, 10},
		{"least recently used first, never used before used", 25, []string{"never-older", "never-old", "lru"}, 30},
		{"not enough: every eligible one, never in use, pinned or young", 10000, []string{"never-older", "never-old", "lru", "mru"}, 40},
	} {
		got, sum := p.ForSpace(at(10), tc.need, records)
		if !reflect.DeepEqual(ids(got), tc.want) || sum != tc.sum {
			t.Errorf("%s: ForSpace = %v (%d bytes), want %v (%d)", tc.name, ids(got), sum, tc.want, tc.sum)
		}
	}
}

func TestTooOld(t *testing.T) {
	p := Policy{HighThresholdPercent: 85, LowThresholdPercent: 80, MinAge: 2 * time.Minute, MaxAge: time.Hour}
	records := []Record{
		{ID: "in-use", FirstDetected: at(0), LastUsed: at(100), InUse: true},
		{ID: "pinned", FirstDetected: at(0), Pinned: true},
		{ID: "used-long-ago", FirstDetected: at(0), LastUsed: at(30)},
		{ID: "used-recently", FirstDetected: at(0), LastUsed: at(60)},
		{ID: "never-used-old", FirstDetected: at(0)},
		{ID: "never-used-new", FirstDetected: at(50)},
	}
	if got := p.TooOld(at(100), at(0), records); !reflect.DeepEqual(ids(got), []string{"never-used-old", "used-long-ago"}) {
		t.Errorf("TooOld = %v", ids(got))
	}
	// Before the collector has run for MaxAge, nothing is too old.
	if got := p.TooOld(at(100), at(41), records); got != nil {
		t.Errorf("TooOld soon after start = %v", ids(got))
	}
	p.MaxAge = 0
	if got := p.TooOld(at(1000), at(0), records); got != nil {
		t.Errorf("TooOld without MaxAge = %v", ids(got))
	}
}
