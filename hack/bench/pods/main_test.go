package main

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/nodeagent/nodeagent/cm"
	corev1 "k8s.io/api/core/v1"
)

func TestSummarize(t *testing.T) {
	msList := func(vs ...int) []time.Duration {
		var ds []time.Duration
		for _, v := range vs {
			ds = append(ds, time.Duration(v)*time.Millisecond)
		}
		return ds
	}
	hundred := make([]int, 100)
	for i := range hundred {
		hundred[i] = 100 - i // unsorted on purpose: 100..1
	}
	for _, tc := range []struct {
		desc string
		in   []time.Duration
		want stats
	}{
		{desc: "empty", in: nil, want: stats{}},
		{desc: "one", in: msList(7), want: stats{N: 1, P50: 7, P90: 7, P99: 7, Max: 7, Mean: 7}},
		// Nearest rank: p50 of 1..4 is the 2nd value, p90 and p99 the 4th.
		{desc: "four", in: msList(4, 1, 3, 2), want: stats{N: 4, P50: 2, P90: 4, P99: 4, Max: 4, Mean: 2.5}},
		{desc: "hundred", in: msList(hundred...), want: stats{N: 100, P50: 50, P90: 90, P99: 99, Max: 100, Mean: 50.5}},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			if got := summarize(tc.in); got != tc.want {
				t.Errorf("summarize = %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestMergeLatency(t *testing.T) {
	batch := func(running ...time.Duration) latencyResult {
		var l latencyResult
		l.raw.running, l.raw.started = running, running
		l.AllRunningMs = 10
		return l
	}
	got := mergeLatency(modeEvent, "p", []latencyResult{batch(time.Second, 3*time.Second), batch(2 * time.Second)})
	if got.Running.N != 3 || got.Running.P50 != 2000 || got.Running.Max != 3000 || got.Started.N != 3 || got.FirstStatus.N != 0 || got.AllRunningMs != 20 {
		t.Errorf("mergeLatency = %+v", got)
	}
}

func TestProcFields(t *testing.T) {
	path := filepath.Join(t.TempDir(), "status")
	content := "Name:\tnodeagent\nVmRSS:\t   85404 kB\nRss:  100 kB\nAnonymous:   25 kB\nThreads:\t12\nbroken line\nEmpty:\n"
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := procFields(path)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]float64{"VmRSS": 85404, "Rss": 100, "Anonymous": 25, "Threads": 12}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("procFields = %v, want %v", got, want)
	}
	if _, err := procFields(filepath.Join(t.TempDir(), "missing")); err == nil {
		t.Error("procFields of a missing file: no error")
	}
}

func TestScrape(t *testing.T) {
	body := `# HELP go_goroutines Number of goroutines.
# TYPE go_goroutines gauge
go_goroutines 158
go_memstats_heap_inuse_bytes 1.5515648e+07
go_gc_duration_seconds{quantile="0.5"} 0.0001
`
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/metrics" {
			http.NotFound(w, r)
			return
		}
		fmt.Fprint(w, body)
	}))
	defer srv.Close()
	got, err := scrape(context.Background(), srv.URL+"/metrics")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]float64{"go_goroutines": 158, "go_memstats_heap_inuse_bytes": 15515648}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("scrape = %v, want %v", got, want)
	}
	if _, err := scrape(context.Background(), srv.URL+"/other"); err == nil {
		t.Error("scrape of a 404: no error")
	}
}

func TestAgentLogParsing(t *testing.T) {
	path := filepath.Join(t.TempDir(), "agent.log")
	lines := `{"time":"2026-11-22T10:18:19.350084714Z","level":"INFO","msg":"started container","pod":"default/a","container":"c","attempt":0}
{"time":"2026-11-22T10:18:21.000000000Z","level":"INFO","msg":"started container","pod":"default/a","container":"c","attempt":1}
{"time":"2026-11-22T10:18:20.000000000Z","level":"INFO","msg":"started container","pod":"default/b","container":"c","attempt":0}
{"time":"2026-11-22T10:18:22.000000000Z","level":"WARN","msg":"pod sync failed; retrying","pod":"default/b"}
{"time":"2026-11-22T10:18:23.000000000Z","level":"WARN","msg":"pod sync failed; retrying","pod":"default/b"}
{"time":"2026-11-22T10:18:24.000000000Z","level":"ERROR","msg":"relist failed"}
not json
`
	if err := os.WriteFile(path, []byte(lines), 0o644); err != nil {
		t.Fatal(err)
	}
	started, err := startedTimes(path)
	if err != nil {
		t.Fatal(err)
	}
	wantA := time.Date(2026, 11, 22, 10, 18, 19, 350084714, time.UTC)
	if len(started) != 2 || !started["default/a"].Equal(wantA) || !started["default/b"].Equal(time.Date(2026, 11, 22, 10, 18, 20, 0, time.UTC)) {
		t.Errorf("startedTimes = %v (want the first attempt of a and b)", started)
	}
	ws, err := warnings(path)
	if err != nil {
		t.Fatal(err)
	}
	if want := map[string]int{"pod sync failed; retrying": 2, "relist failed": 1}; !reflect.DeepEqual(ws, want) {
		t.Errorf("warnings = %v, want %v", ws, want)
	}
}

func TestPodRunning(t *testing.T) {
	pod := func(phase corev1.PodPhase, states ...corev1.ContainerState) *corev1.Pod {
		p := &corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "a"}, {Name: "b"}}}}
		p.Status.Phase = phase
		for _, s := range states {
			p.Status.ContainerStatuses = append(p.Status.ContainerStatuses, corev1.ContainerStatus{State: s})
		}
		return p
	}
	run := corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}
	wait := corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ContainerCreating"}}
	for _, tc := range []struct {
		desc string
		pod  *corev1.Pod
		want bool
	}{
		{"all running", pod(corev1.PodRunning, run, run), true},
		{"one waiting", pod(corev1.PodRunning, run, wait), false},
		{"a status missing", pod(corev1.PodRunning, run), false},
		{"pending", pod(corev1.PodPending, run, run), false},
	} {
		if got := podRunning(tc.pod); got != tc.want {
			t.Errorf("%s: podRunning = %v, want %v", tc.desc, got, tc.want)
		}
	}
}

// The agent's memory cgroup is not where its pods' cgroups go: the working
// set would count the pods (a 100-pod run measured 87 MiB that way).
func TestAgentMemCgroupIsNotThePodsRoot(t *testing.T) {
	mode, runID := "event", "123"
	ns := "bench-pods-" + mode + "-" + runID // as startAgent names it
	if got, pods := "/"+agentMemCgroupName(mode, runID), cm.RootForNamespace(ns).ToCgroupfs(); got == pods || strings.HasPrefix(pods, got+"/") {
		t.Errorf("agent memory cgroup %s holds the pods' root %s", got, pods)
	}
}
