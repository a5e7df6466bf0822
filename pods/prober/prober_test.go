package prober

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/nodeagent/nodeagent/runtime"
)

var t0 = time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)

// The decisions of kubelet's probe worker, round by round.
func TestStateBeginEnd(t *testing.T) {
	spec := &v1.Probe{InitialDelaySeconds: 5, FailureThreshold: 3, SuccessThreshold: 1}
	run := Container{Name: "c", ID: "id1", Running: true, StartedAt: t0}
	tests := []struct {
		desc                string
		kind                Kind
		c                   Container
		started, deleting   bool
		restartable         bool
		now                 time.Time
		wantSet             *Result
		wantProbe, wantStop bool
	}{
		{desc: "no container yet", kind: Liveness, c: Container{Name: "c"}, now: t0},
		{desc: "new container: readiness starts Failure, inside the initial delay", kind: Readiness, c: run, started: true, now: t0.Add(4 * time.Second), wantSet: ptr(Failure)},
		{desc: "new container: liveness starts Success", kind: Liveness, c: run, started: true, now: t0.Add(4 * time.Second), wantSet: ptr(Success)},
		{desc: "new container: startup starts Unknown, probes after the delay", kind: Startup, c: run, now: t0.Add(5 * time.Second), wantSet: ptr(Unknown), wantProbe: true},
		{desc: "liveness waits for the startup probe", kind: Liveness, c: run, started: false, now: t0.Add(time.Minute), wantSet: ptr(Success)},
		{desc: "startup stops probing once started", kind: Startup, c: run, started: true, now: t0.Add(time.Minute), wantSet: ptr(Unknown)},
		{desc: "exited, restartable: Failure, keeps going", kind: Readiness, c: Container{Name: "c", ID: "id1", Terminated: true}, restartable: true, now: t0, wantSet: ptr(Failure)},
		{desc: "exited for good: stop", kind: Readiness, c: Container{Name: "c", ID: "id1", Terminated: true}, now: t0, wantSet: ptr(Failure), wantStop: true},
		{desc: "deleting: liveness says Success and stops", kind: Liveness, c: run, started: true, deleting: true, now: t0.Add(time.Minute), wantSet: ptr(Success), wantStop: true},
		{desc: "deleting: readiness keeps probing", kind: Readiness, c: run, started: true, deleting: true, now: t0.Add(time.Minute), wantSet: ptr(Failure), wantProbe: true},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			var s state
			r := s.begin(tc.kind, spec, tc.c, tc.started, tc.deleting, tc.restartable, tc.now)
			if (r.set == nil) != (tc.wantSet == nil) || (r.set != nil && *r.set != *tc.wantSet) || r.probe != tc.wantProbe || r.stop != tc.wantStop {
				t.Errorf("round %+v (set %v), want set %v probe %v stop %v", r, deref(r.set), deref(tc.wantSet), tc.wantProbe, tc.wantStop)
			}
		})
	}
}

func ptr(r Result) *Result { return &r }

func deref(r *Result) any {
	if r == nil {
		return nil
	}
	return *r
}

// Thresholds: a result is published once it came threshold times in a
// row; a liveness failure holds until the container changes.
func TestStateThresholds(t *testing.T) {
	spec := &v1.Probe{FailureThreshold: 3, SuccessThreshold: 2}
	var s state
	c := Container{Name: "c", ID: "a", Running: true, StartedAt: t0}
	s.begin(Readiness, spec, c, true, false, true, t0)
	seq := []struct {
		res  Result
		want *Result
	}{
		{Success, nil}, {Success, ptr(Success)}, {Failure, nil}, {Failure, nil}, {Success, nil}, {Failure, nil}, {Failure, nil}, {Failure, ptr(Failure)}, {Failure, ptr(Failure)},
	}
	for i, x := range seq {
		got := s.end(Readiness, spec, x.res)
		if deref(got) != deref(x.want) {
			t.Fatalf("readiness step %d (%v): published %v, want %v", i, x.res, deref(got), deref(x.want))
		}
	}
	var l state
	l.begin(Liveness, spec, c, true, false, true, t0)
	for i := 0; i < 2; i++ {
		if got := l.end(Liveness, spec, Failure); got != nil {
			t.Fatalf("liveness failure %d published early", i+1)
		}
	}
	if got := l.end(Liveness, spec, Failure); deref(got) != Failure {
		t.Fatal("third liveness failure not published")
	}
	if r := l.begin(Liveness, spec, c, true, false, true, t0.Add(time.Minute)); r.probe {
		t.Error("liveness probes again after its failure, before the container changed")
	}
	c.ID = "b"
	if r := l.begin(Liveness, spec, c, true, false, true, t0.Add(time.Minute)); !r.probe || deref(r.set) != Success {
		t.Errorf("new attempt: %+v", r)
	}
}

type fakeExec struct {
	code  int
	out   string
	block bool
	cmds  [][]string
	mu    sync.Mutex
}

func (f *fakeExec) Exec(ctx context.Context, id string, o runtime.ExecOptions) (int, error) {
	f.mu.Lock()
	f.cmds = append(f.cmds, o.Cmd)
	f.mu.Unlock()
	if f.block {
		<-ctx.Done()
		return 0, ctx.Err()
	}
	_, _ = io.WriteString(o.Stdout, f.out)
	return f.code, nil
}

func TestExecProbe(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		desc string
		ex   *fakeExec
		want Result
		out  string
	}{
		{"exit 0", &fakeExec{out: "fine"}, Success, "fine"},
		{"exit 1", &fakeExec{code: 1, out: "cat: can't open"}, Failure, "cat: can't open"},
		{"timeout", &fakeExec{block: true}, Failure, `command timed out: "cat /x" timed out after 1s`},
	} {
		r := newRunner(tc.ex)
		o := r.probe(ctx, &v1.Probe{TimeoutSeconds: 1, ProbeHandler: v1.ProbeHandler{Exec: &v1.ExecAction{Command: []string{"cat", "/x"}}}}, target{containerID: "c1"})
		if o.result != tc.want || o.output != tc.out || o.err != nil {
			t.Errorf("%s: %+v", tc.desc, o)
		}
	}
}

func hostPort(t *testing.T, u string) (string, int) {
	h, p, err := net.SplitHostPort(strings.TrimPrefix(strings.TrimPrefix(u, "http://"), "https://"))
	if err != nil {
		t.Fatal(err)
	}
	n, _ := strconv.Atoi(p)
	return h, n
}

// HTTP probes: kubelet's request (User-Agent, headers, named port),
// success on 2xx, redirects followed on the same host only, failures with
// the status code, HTTPS without verification.
func TestHTTPProbe(t *testing.T) {
	var mu sync.Mutex
	var seen http.Header
	mux := http.NewServeMux()
	mux.HandleFunc("/ok", func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = r.Header.Clone()
		mu.Unlock()
		_, _ = io.WriteString(w, "fine")
	})
	mux.HandleFunc("/bad", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(503) })
	mux.HandleFunc("/local", func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, "/ok", http.StatusFound) })
	mux.HandleFunc("/away", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "http://localhost:1/x", http.StatusFound)
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()
	tlsSrv := httptest.NewTLSServer(mux)
	defer tlsSrv.Close()
	host, port := hostPort(t, srv.URL)
	_, tlsPort := hostPort(t, tlsSrv.URL)
	c := &v1.Container{Ports: []v1.ContainerPort{{Name: "web", ContainerPort: int32(port)}}}
	r := newRunner(&fakeExec{})
	probe := func(path string, p intstr.IntOrString, scheme v1.URIScheme) outcome {
		return r.probe(context.Background(), &v1.Probe{TimeoutSeconds: 2, ProbeHandler: v1.ProbeHandler{HTTPGet: &v1.HTTPGetAction{
			Path: path, Port: p, Scheme: scheme, HTTPHeaders: []v1.HTTPHeader{{Name: "X-Test", Value: "1"}},
		}}}, target{container: c, podIP: host})
	}
	if o := probe("/ok", intstr.FromString("web"), ""); o.result != Success || o.output != "fine" {
		t.Errorf("/ok: %+v", o)
	}
	mu.Lock()
	if seen.Get("User-Agent") != "kube-probe/1.34" || seen.Get("X-Test") != "1" || seen.Get("Accept") != "*/*" {
		t.Errorf("request headers %v", seen)
	}
	mu.Unlock()
	if o := probe("/bad", intstr.FromInt32(int32(port)), ""); o.result != Failure || o.output != "HTTP probe failed with statuscode: 503" {
		t.Errorf("/bad: %+v", o)
	}
	if o := probe("/local", intstr.FromInt32(int32(port)), ""); o.result != Success || o.warning {
		t.Errorf("/local: %+v", o)
	}
	if o := probe("/away", intstr.FromInt32(int32(port)), ""); o.result != Success || !o.warning || !strings.HasPrefix(o.output, "Probe terminated redirects") {
		t.Errorf("/away: %+v", o)
	}
	if o := probe("/ok", intstr.FromInt32(int32(tlsPort)), v1.URISchemeHTTPS); o.result != Success {
		t.Errorf("https: %+v", o)
	}
	if o := probe("/ok", intstr.FromString("nope"), ""); o.err == nil {
		t.Errorf("unknown port name: %+v", o)
	}
}

func TestTCPAndGRPCProbes(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer()
	hs := health.NewServer()
	healthpb.RegisterHealthServer(gs, hs)
	hs.SetServingStatus("db", healthpb.HealthCheckResponse_NOT_SERVING)
	go func() { _ = gs.Serve(l) }()
	defer gs.Stop()
	_, port := hostPort(t, l.Addr().String())
	r := newRunner(&fakeExec{})
	ctx := context.Background()
	tcp := func(p int) outcome {
		return r.probe(ctx, &v1.Probe{TimeoutSeconds: 1, ProbeHandler: v1.ProbeHandler{TCPSocket: &v1.TCPSocketAction{Port: intstr.FromInt32(int32(p))}}}, target{podIP: "127.0.0.1"})
	}
	if o := tcp(port); o.result != Success {
		t.Errorf("tcp open: %+v", o)
	}
	closed, _ := net.Listen("tcp", "127.0.0.1:0")
	_, cport := hostPort(t, closed.Addr().String())
	closed.Close()
	if o := tcp(cport); o.result != Failure || !strings.Contains(o.output, "connection refused") {
		t.Errorf("tcp closed: %+v", o)
	}
	g := func(service string) outcome {
		return r.probe(ctx, &v1.Probe{TimeoutSeconds: 2, ProbeHandler: v1.ProbeHandler{GRPC: &v1.GRPCAction{Port: int32(port), Service: &service}}}, target{podIP: "127.0.0.1"})
	}
	if o := g(""); o.result != Success || o.output != "service healthy" {
		t.Errorf("grpc serving: %+v", o)
	}
	if o := g("db"); o.result != Failure || o.output != `service unhealthy (responded with "NOT_SERVING")` {
		t.Errorf("grpc not serving: %+v", o)
	}
}

// The Manager on a fake clock: a readiness probe runs at once when its
// container starts and then every period; results reach OnChange and
// Status; a liveness failure makes the container Unhealthy.
func TestManager(t *testing.T) {
	clk := testingclock.NewFakeClock(t0)
	ex := &fakeExec{}
	changed := make(chan types.UID, 100)
	reg := prometheus.NewRegistry()
	m := NewManager(Options{Exec: ex, OnChange: func(uid types.UID) { changed <- uid }, Clock: clk, Metrics: NewMetrics(reg)})
	pod := &v1.Pod{}
	pod.UID, pod.Name, pod.Namespace = "u1", "p", "default"
	cmd := v1.ProbeHandler{Exec: &v1.ExecAction{Command: []string{"check"}}}
	pod.Spec.Containers = []v1.Container{{Name: "c",
		ReadinessProbe: &v1.Probe{ProbeHandler: cmd, PeriodSeconds: 10, TimeoutSeconds: 1, SuccessThreshold: 1, FailureThreshold: 1},
		LivenessProbe:  &v1.Probe{ProbeHandler: cmd, PeriodSeconds: 10, TimeoutSeconds: 1, SuccessThreshold: 1, FailureThreshold: 2},
	}}
	clk.Step(time.Minute) // past the start-up jitter
	m.start = t0
	defer m.RemovePod(pod.UID)
	m.SetPod(pod, "10.0.0.1", []Container{{Name: "c"}})
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		for end := time.Now().Add(5 * time.Second); time.Now().Before(end); time.Sleep(5 * time.Millisecond) {
			if cond() {
				return
			}
		}
		t.Fatalf("%s: not within 5s", what)
	}
	m.SetPod(pod, "10.0.0.1", []Container{{Name: "c", ID: "id1", Running: true, StartedAt: clk.Now()}})
	waitFor("ready at once", func() bool { p, _ := m.Status(pod.UID, "c", "id1"); return p.Ready })
	if p, ok := m.Status(pod.UID, "c", "id1"); !ok || !p.Started {
		t.Errorf("status %+v %v", p, ok)
	}
	ex.mu.Lock()
	ex.code = 1
	ex.mu.Unlock()
	// Two failed liveness rounds (one period apart) make it unhealthy;
	// readiness (threshold 1) goes at the first.
	waitTicker := func() {
		waitFor("tickers armed", func() bool { return clk.HasWaiters() })
		clk.Step(10 * time.Second)
	}
	waitTicker()
	waitFor("unready", func() bool { p, _ := m.Status(pod.UID, "c", "id1"); return !p.Ready })
	if k := m.Unhealthy(pod.UID); len(k) != 0 {
		t.Fatalf("unhealthy after one liveness failure: %+v", k)
	}
	waitTicker()
	waitFor("unhealthy", func() bool { return len(m.Unhealthy(pod.UID)) == 1 })
	k := m.Unhealthy(pod.UID)[0]
	if k.ID != "id1" || k.Kind != Liveness {
		t.Errorf("kill %+v", k)
	}
	select {
	case <-changed:
	default:
		t.Error("OnChange never called")
	}
	// kubelet's prober_probe_total counted each run by type and result.
	count := func(kind, result string) (float64, bool) {
		fams, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range fams {
			if f.GetName() != "prober_probe_total" {
				continue
			}
			for _, mt := range f.Metric {
				l := map[string]string{}
				for _, p := range mt.Label {
					l[p.GetName()] = p.GetValue()
				}
				if l["probe_type"] == kind && l["result"] == result && l["container"] == "c" && l["pod"] == "p" && l["namespace"] == "default" && l["pod_uid"] == "u1" {
					return mt.Counter.GetValue(), true
				}
			}
		}
		return 0, false
	}
	if n, _ := count("Readiness", "successful"); n < 1 {
		t.Errorf("Readiness successful = %v", n)
	}
	if n, _ := count("Liveness", "failed"); n < 2 {
		t.Errorf("Liveness failed = %v", n)
	}
	// A new attempt starts over.
	m.SetPod(pod, "10.0.0.1", []Container{{Name: "c", ID: "id2", Running: true, StartedAt: clk.Now()}})
	if len(m.Unhealthy(pod.UID)) != 0 {
		t.Error("the new attempt is unhealthy at once")
	}
	// The pod's series go with its workers, as kubelet's.
	m.RemovePod(pod.UID)
	waitFor("series deleted", func() bool {
		_, a := count("Readiness", "successful")
		_, b := count("Liveness", "failed")
		return !a && !b
	})
}

// Network probes of a pod without an IP fail rather than reach the
// agent's own network namespace.
func TestNetworkProbeWithoutPodIP(t *testing.T) {
	r := newRunner(&fakeExec{})
	o := r.probe(context.Background(), &v1.Probe{ProbeHandler: v1.ProbeHandler{TCPSocket: &v1.TCPSocketAction{Port: intstr.FromInt32(80)}}}, target{})
	if o.err == nil {
		t.Errorf("%+v, want an error", o)
	}
}
