package main

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/kubernetes/fake"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/nodeagent/nodeagent/heartbeat"
)

// The health server's /healthz is kubelet's healthz port's: the ping check
// alone (kubelet 1.34 installs no other there), ok while the agent serves
// even when its liveness fails; /livez still reports that failure, and the
// node API's syncloop check is healthy before the pod sync loop runs.
func TestHealthPortHealthzIsKubelets(t *testing.T) {
	clk := testingclock.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	cs := fake.NewClientset()
	hb, err := heartbeat.New(heartbeat.Options{
		NodeName: "n", Leases: cs.CoordinationV1().Leases(heartbeat.Namespace), Nodes: cs.CoreV1().Nodes(),
		Clock: clk, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	// The heartbeat loop never renewed, an hour after the start: not live.
	a := &agent{clock: clk, hb: hb, started: clk.Now().Add(-time.Hour), reg: prometheus.NewRegistry(),
		log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	if a.live() == nil {
		t.Fatal("the agent is live without a heartbeat; the test shows nothing")
	}
	mux := a.healthMux()
	get := func(path string) (int, string) {
		w := httptest.NewRecorder()
		mux.ServeHTTP(w, httptest.NewRequest("GET", path, nil))
		return w.Code, w.Body.String()
	}
	for _, tc := range []struct {
		path string
		code int
		body string
	}{
		{"/healthz", 200, "ok"},
		{"/healthz?verbose", 200, "[+]ping ok\nhealthz check passed\n"},
		{"/healthz/ping", 200, "ok"},
		{"/healthz/syncloop", 404, "404 page not found\n"},
	} {
		if code, body := get(tc.path); code != tc.code || body != tc.body {
			t.Errorf("%s: %d %q, want %d %q", tc.path, code, body, tc.code, tc.body)
		}
	}
	if code, body := get("/livez"); code != http.StatusInternalServerError || !strings.Contains(body, "lease renew loop") {
		t.Errorf("/livez: %d %q, want 500 naming the heartbeat loop", code, body)
	}
	if err := a.syncLoopHealthy(); err != nil {
		t.Errorf("syncloop before the pod sync loop runs: %v", err)
	}
}
