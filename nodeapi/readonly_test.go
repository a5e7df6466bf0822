package nodeapi

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// serveReadOnly serves s's read-only server on a free port of 127.0.0.1
// until the test ends and returns its base URL.
func serveReadOnly(t *testing.T, s *Server) string {
	t.Helper()
	ln, err := s.ListenReadOnly(0)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.ServeReadOnly(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Error(err)
			}
		case <-time.After(5 * time.Second):
			t.Error("read-only server did not stop")
		}
	})
	return "http://" + ln.Addr().String()
}

func roGet(t *testing.T, method, url string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	c := &http.Client{Timeout: 10 * time.Second}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestReadOnlyServer: kubelet's readOnlyPort server over a real listener.
// Without any credentials it serves /pods, /metrics, /metrics/probes and
// /healthz (no TokenReview or SubjectAccessReview is made), answers
// kubelet's debugging paths with 405 "Debug endpoints are disabled." and
// has no /configz, /checkpoint or /debug/flags/v, however the
// authenticated server's debugging handlers are configured; it speaks
// plain HTTP, not TLS.
func TestReadOnlyServer(t *testing.T) {
	e := newTestEnv(t, func(o *Options) {
		o.Metrics = http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "agent_metric 1") })
		o.ProbeMetrics = http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "prober_probe_total 2") })
		o.Configz = func() ([]byte, error) { return []byte(`{"kubeletconfig":{}}`), nil }
		d := DefaultDebugOptions()
		o.Debug = &d
	})
	e.pods.pods = []*v1.Pod{{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web", UID: "u1"}}}
	base := serveReadOnly(t, e.s)

	code, body := roGet(t, "GET", base+"/pods")
	if code != http.StatusOK {
		t.Fatalf("GET /pods = %d %s", code, body)
	}
	var list v1.PodList
	if err := json.Unmarshal([]byte(body), &list); err != nil || len(list.Items) != 1 || list.Items[0].Name != "web" {
		t.Fatalf("GET /pods = %s (%v), want the pod web", body, err)
	}
	for path, want := range map[string]string{"/metrics": "agent_metric 1", "/metrics/probes": "prober_probe_total 2", "/healthz": "ok"} {
		if code, body := roGet(t, "GET", base+path); code != http.StatusOK || !strings.Contains(body, want) {
			t.Errorf("GET %s = %d %q, want 200 with %q", path, code, body, want)
		}
	}
	for _, r := range [][2]string{
		{"POST", "/exec/ns/web/c?command=id"}, {"GET", "/exec/ns/web/c?command=id"}, {"POST", "/attach/ns/web/c"},
		{"POST", "/portForward/ns/web"}, {"POST", "/run/ns/web/c?cmd=id"}, {"GET", "/containerLogs/ns/web/c"},
		{"GET", "/runningpods/"}, {"GET", "/debug/pprof/"}, {"GET", "/debug/pprof/heap"}, {"GET", "/logs/"},
	} {
		if code, body := roGet(t, r[0], base+r[1]); code != http.StatusMethodNotAllowed || strings.TrimSpace(body) != "Debug endpoints are disabled." {
			t.Errorf("%s %s = %d %q, want 405 Debug endpoints are disabled.", r[0], r[1], code, body)
		}
	}
	for _, r := range [][2]string{{"GET", "/configz"}, {"POST", "/checkpoint/ns/web/c"}, {"PUT", "/debug/flags/v"}, {"GET", "/spec/"}} {
		if code, body := roGet(t, r[0], base+r[1]); code != http.StatusNotFound {
			t.Errorf("%s %s = %d %q, want 404", r[0], r[1], code, body)
		}
	}
	if n, m := e.api.tokenReviews.Load(), e.api.sars.Load(); n != 0 || m != 0 {
		t.Errorf("read-only requests made %d TokenReviews and %d SubjectAccessReviews, want none", n, m)
	}
	// The authenticated server still refuses the same request without
	// credentials.
	if w := e.do("GET", "/pods", nil); w.Code != http.StatusUnauthorized {
		t.Errorf("authenticated server: GET /pods without credentials = %d, want 401", w.Code)
	}
	// Plain HTTP: a TLS client fails its handshake.
	conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", strings.TrimPrefix(base, "http://"), &tls.Config{InsecureSkipVerify: true})
	if err == nil {
		conn.Close()
		t.Error("a TLS handshake with the read-only server succeeded")
	}
}

// TestNewReadOnly: with enableServer false the read-only server needs no
// certificate, client CA or API client, and the server cannot serve the
// authenticated API.
func TestNewReadOnly(t *testing.T) {
	pods := &fakePods{pods: []*v1.Pod{{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "db"}}}}
	s, err := NewReadOnly(Options{NodeName: "node-a", Address: "127.0.0.1", Pods: pods, Containers: &fakeContainers{},
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	base := serveReadOnly(t, s)
	if code, body := roGet(t, "GET", base+"/pods"); code != http.StatusOK || !strings.Contains(body, `"name":"db"`) {
		t.Errorf("GET /pods = %d %s", code, body)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	if err := s.Serve(context.Background(), ln); err == nil {
		t.Error("Serve of a read-only server succeeded")
	}
}
