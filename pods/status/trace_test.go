package status

import (
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	testclock "k8s.io/utils/clock/testing"

	"github.com/nodeagent/nodeagent/internal/testing/testlog"
)

// The latency trace (-v=4): a status write logs how long it took from the
// status change (Set) to the API's answer, and where that went: waiting
// in the queue, reading the pod back, the PATCH itself. The durations come
// from the injected clock.
func TestStatusWriteTrace(t *testing.T) {
	clk := testclock.NewFakeClock(time.Date(2026, 11, 27, 21, 0, 0, 0, time.UTC))
	pod := apiPod("rv-1")
	client := fake.NewClientset(pod)
	client.PrependReactor("patch", "pods", func(clienttesting.Action) (bool, k8sruntime.Object, error) {
		clk.Step(7 * time.Millisecond) // the PATCH's round trip
		return false, nil, nil
	})
	var buf testlog.Buffer
	s := NewManager(fakePods(client), slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug})))
	s.SetClock(clk)
	s.SetLister(listerOf(t, pod))

	want := pod.Status
	want.Phase = v1.PodSucceeded
	s.Set(pod, want)
	clk.Step(3 * time.Millisecond) // queued
	if err := s.sync(context.Background(), pod.UID); err != nil {
		t.Fatal(err)
	}
	var rec map[string]any
	for _, l := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(l), &m) == nil && m["msg"] == "pod status write" {
			rec = m
		}
	}
	if rec == nil {
		t.Fatalf("no trace line in %s", buf.String())
	}
	for k, want := range map[string]time.Duration{"sinceChange": 10 * time.Millisecond, "queued": 3 * time.Millisecond, "patch": 7 * time.Millisecond, "read": 0} {
		if got, _ := rec[k].(float64); time.Duration(got) != want {
			t.Errorf("%s = %v, want %v (%v)", k, time.Duration(got), want, rec)
		}
	}
	if rec["phase"] != string(v1.PodSucceeded) || rec["podUID"] != string(pod.UID) {
		t.Errorf("trace line %v: want phase Succeeded of %s", rec, pod.UID)
	}
}
