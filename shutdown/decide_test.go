package shutdown

import (
	"reflect"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func pod(name string, prio *int32) *v1.Pod {
	return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: v1.PodSpec{Priority: prio}}
}

func prio(p int32) *int32 { return &p }

func TestGroups(t *testing.T) {
	pods := []*v1.Pod{
		pod("none", nil),
		pod("negative", prio(-5)),
		pod("high", prio(SystemCriticalPriority-1)),
		pod("cluster-critical", prio(SystemCriticalPriority)),
		pod("node-critical", prio(SystemCriticalPriority+1000)),
	}
	type want struct {
		critical bool
		grace    time.Duration
		names    []string
	}
	for _, tc := range []struct {
		desc            string
		pods            []*v1.Pod
		total, critical time.Duration
		want            []want
	}{
		{desc: "disabled", pods: pods, total: 0},
		{desc: "critical above total", pods: pods, total: 10 * time.Second, critical: 20 * time.Second},
		{desc: "regular first, then critical", pods: pods, total: 20 * time.Second, critical: 5 * time.Second, want: []want{
			{false, 15 * time.Second, []string{"none", "negative", "high"}},
			{true, 5 * time.Second, []string{"cluster-critical", "node-critical"}},
		}},
		{desc: "no critical part: critical pods with 0", pods: pods, total: 30 * time.Second, want: []want{
			{false, 30 * time.Second, []string{"none", "negative", "high"}},
			{true, 0, []string{"cluster-critical", "node-critical"}},
		}},
		{desc: "only regular pods", pods: pods[:2], total: 20 * time.Second, critical: 5 * time.Second, want: []want{
			{false, 15 * time.Second, []string{"none", "negative"}},
		}},
		{desc: "only critical pods", pods: pods[3:], total: 20 * time.Second, critical: 5 * time.Second, want: []want{
			{true, 5 * time.Second, []string{"cluster-critical", "node-critical"}},
		}},
		{desc: "whole seconds", pods: pods[:1], total: 20500 * time.Millisecond, critical: 5 * time.Second, want: []want{
			{false, 15 * time.Second, []string{"none"}},
		}},
		{desc: "no pods", total: 20 * time.Second, critical: 5 * time.Second},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			var got []want
			for _, g := range Groups(tc.pods, MigrateBands(tc.total, tc.critical)) {
				w := want{critical: g.Critical(), grace: g.Grace}
				for _, p := range g.Pods {
					w.names = append(w.names, p.Name)
				}
				got = append(got, w)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("Groups = %+v, want %+v", got, tc.want)
			}
		})
	}
}

// shutdownGracePeriodByPodPriority: bands in any order are stopped from
// the lowest priority up; a pod goes to the band with the highest
// priority not above its own, below every band to the lowest, above every
// band to the highest; empty bands are left out. Bands sharing a priority
// split as kubelet's groupByPriority splits them.
func TestGroupsByPodPriority(t *testing.T) {
	bands := []Band{
		{Priority: 100000, Grace: 20 * time.Second},
		{Priority: SystemCriticalPriority, Grace: 10 * time.Second},
		{Priority: 1000, Grace: 30 * time.Second},
		{Priority: 500, Grace: 7 * time.Second}, // no pod in it
		{Priority: 0, Grace: 40 * time.Second},
	}
	pods := []*v1.Pod{
		pod("critical", prio(SystemCriticalPriority)),
		pod("none", nil),
		pod("negative", prio(-5)),
		pod("at-1000", prio(1000)),
		pod("between", prio(99999)),
		pod("at-100000", prio(100000)),
		pod("node-critical", prio(SystemCriticalPriority+1000)),
		pod("below-critical", prio(SystemCriticalPriority-1)),
	}
	type want struct {
		prio  int32
		grace time.Duration
		names []string
	}
	names := func(gs []Group) []want {
		var got []want
		for _, g := range gs {
			w := want{g.Priority, g.Grace, nil}
			for _, p := range g.Pods {
				w.names = append(w.names, p.Name)
			}
			got = append(got, w)
		}
		return got
	}
	got := names(Groups(pods, bands))
	exp := []want{
		{0, 40 * time.Second, []string{"none", "negative"}},
		{1000, 30 * time.Second, []string{"at-1000", "between"}},
		{100000, 20 * time.Second, []string{"at-100000", "below-critical"}},
		{SystemCriticalPriority, 10 * time.Second, []string{"critical", "node-critical"}},
	}
	if !reflect.DeepEqual(got, exp) {
		t.Errorf("Groups = %+v\nwant %+v", got, exp)
	}
	if bands[0].Priority != 100000 {
		t.Error("Groups sorted the caller's bands")
	}
	if TotalGrace(bands) != 107*time.Second {
		t.Errorf("TotalGrace = %v, want 107s", TotalGrace(bands))
	}

	// Pods below the lowest band go to it.
	got = names(Groups(pods[:3], []Band{{Priority: 10, Grace: time.Second}, {Priority: 20, Grace: 2 * time.Second}}))
	if want := []want{{10, time.Second, []string{"none", "negative"}}, {20, 2 * time.Second, []string{"critical"}}}; !reflect.DeepEqual(got, want) {
		t.Errorf("below the lowest band: %+v, want %+v", got, want)
	}
	// Bands sharing a priority: the first takes the pods at that
	// priority, the last those above it (kubelet's sort.Search).
	got = names(Groups([]*v1.Pod{pod("at", prio(10)), pod("above", prio(15))},
		[]Band{{Priority: 10, Grace: time.Second}, {Priority: 10, Grace: 2 * time.Second}, {Priority: 20, Grace: 3 * time.Second}}))
	if want := []want{{10, time.Second, []string{"at"}}, {10, 2 * time.Second, []string{"above"}}}; !reflect.DeepEqual(got, want) {
		t.Errorf("shared priority: %+v, want %+v", got, want)
	}
	if Groups(pods, nil) != nil {
		t.Error("groups without bands")
	}
}

func TestMigrateBands(t *testing.T) {
	if got, want := MigrateBands(30*time.Second, 10*time.Second), []Band{{0, 20 * time.Second}, {SystemCriticalPriority, 10 * time.Second}}; !reflect.DeepEqual(got, want) {
		t.Errorf("MigrateBands(30s, 10s) = %v, want %v", got, want)
	}
	for _, c := range [][2]time.Duration{{0, 0}, {10 * time.Second, 20 * time.Second}, {10 * time.Second, -time.Second}} {
		if got := MigrateBands(c[0], c[1]); got != nil {
			t.Errorf("MigrateBands(%v, %v) = %v, want none", c[0], c[1], got)
		}
	}
}

func TestDecideDelay(t *testing.T) {
	for _, tc := range []struct {
		current, wanted time.Duration
		want            delayAction
	}{
		{5 * time.Second, 20 * time.Second, delayRaise}, // logind's default is 5s
		{20 * time.Second, 20 * time.Second, delayEnough},
		{30 * time.Second, 20 * time.Second, delayEnough},
	} {
		if got := decideDelay(tc.current, tc.wanted); got != tc.want {
			t.Errorf("decideDelay(%v, %v) = %v, want %v", tc.current, tc.wanted, got, tc.want)
		}
	}
}

func TestDropIn(t *testing.T) {
	for d, want := range map[time.Duration]string{
		20 * time.Second:         "InhibitDelayMaxSec=20\n",
		20500 * time.Millisecond: "InhibitDelayMaxSec=21\n",
	} {
		got := dropIn(d)
		if !strings.HasSuffix(got, want) || !strings.Contains(got, "[Login]\n") {
			t.Errorf("dropIn(%v) = %q, want a [Login] section ending in %q", d, got, want)
		}
	}
}
