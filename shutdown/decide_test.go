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
			for _, g := range Groups(tc.pods, tc.total, tc.critical) {
				w := want{critical: g.Critical, grace: g.Grace}
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
