package nodeapi

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/pprof/profile"
	v1 "k8s.io/api/core/v1"

	"github.com/nodeagent/nodeagent/runtime"
)

// doBody is do with a request body.
func (e *testEnv) doBody(method, path, body string, setup func(*http.Request)) *httptest.ResponseRecorder {
	r := httptest.NewRequest(method, path, strings.NewReader(body))
	if setup != nil {
		setup(r)
	}
	w := httptest.NewRecorder()
	e.s.Handler().ServeHTTP(w, r)
	return w
}

// The profiling, flags and system log handlers with kubelet's paths,
// answers and authorization: nodes/proxy for /debug (verb update for a
// PUT), nodes/log for /logs.
func TestDebuggingHandlers(t *testing.T) {
	logDir := t.TempDir()
	if err := os.WriteFile(filepath.Join(logDir, "syslog"), []byte("line one\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(logDir, "journal"), 0o755); err != nil {
		t.Fatal(err)
	}
	var verbosity []uint32
	e := newTestEnv(t, func(o *Options) {
		d := DefaultDebugOptions()
		d.SystemLogDir = logDir
		d.SetVerbosity = func(v uint32) error { verbosity = append(verbosity, v); return nil }
		o.Debug = &d
	})
	admin, nobody, logReader := bearer("good-admin"), bearer("good-nobody"), bearer("good-log-reader")
	for _, tc := range []struct {
		name, method, path, body string
		who                      func(*http.Request)
		code                     int
		want                     string
	}{
		{"pprof index", "GET", "/debug/pprof/", "", admin, 200, "Types of profiles available"},
		{"goroutine profile as text", "GET", "/debug/pprof/goroutine?debug=1", "", admin, 200, "goroutine profile: total"},
		{"heap profile as text", "GET", "/debug/pprof/heap?debug=1", "", admin, 200, "heap profile:"},
		{"cmdline", "GET", "/debug/pprof/cmdline", "", admin, 200, os.Args[0]},
		{"symbol", "GET", "/debug/pprof/symbol", "", admin, 200, "num_symbols: 1"},
		{"unknown profile", "GET", "/debug/pprof/nothing", "", admin, 404, "Unknown profile"},
		{"pprof without nodes/proxy", "GET", "/debug/pprof/heap", "", nobody, 403, "Forbidden (user=nobody, verb=get, resource=nodes, subresource(s)=[proxy])"},
		{"pprof with nodes/log only", "GET", "/debug/pprof/heap", "", logReader, 403, "subresource(s)=[proxy]"},

		{"set verbosity", "PUT", "/debug/flags/v", "4", admin, 200, "successfully set klog.logging.verbosity to 4\n"},
		{"verbosity not a number", "PUT", "/debug/flags/v", "high", admin, 400, `strconv.ParseUint: parsing "high": invalid syntax`},
		{"verbosity read", "GET", "/debug/flags/v", "", admin, 406, "unsupported http method"},
		{"verbosity without nodes/proxy", "PUT", "/debug/flags/v", "9", nobody, 403, "verb=update, resource=nodes, subresource(s)=[proxy]"},

		{"log directory", "GET", "/logs/", "", logReader, 200, `<a href="syslog">syslog</a>`},
		{"log subdirectory in the listing", "GET", "/logs/", "", admin, 200, `<a href="journal/">journal/</a>`},
		{"log file", "GET", "/logs/syslog", "", logReader, 200, "line one\n"},
		{"missing log file", "GET", "/logs/nothing", "", admin, 404, "404 page not found"},
		{"logs without nodes/log", "GET", "/logs/", "", nobody, 403, "subresource(s)=[log]"},
		// the node log query off (kubelet's default): its parameters are ignored
		{"node log query off", "GET", "/logs/?query=kubelet", "", admin, 200, `<a href="syslog">syslog</a>`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := e.doBody(tc.method, tc.path, tc.body, tc.who)
			if w.Code != tc.code || !strings.Contains(w.Body.String(), tc.want) {
				t.Fatalf("%s %s: %d %.500q, want %d with %q", tc.method, tc.path, w.Code, w.Body.String(), tc.code, tc.want)
			}
		})
	}
	if !reflect.DeepEqual(verbosity, []uint32{4}) {
		t.Errorf("verbosity set to %v, want [4]", verbosity)
	}
	for _, p := range []string{"/logs/../../etc/passwd", "/logs/..%2f..%2fetc/passwd", "/logs/journal/../../../etc/passwd"} {
		if w := e.do("GET", p, admin); w.Code == 200 || strings.Contains(w.Body.String(), "root:") {
			t.Errorf("%s: %d %.200q: a file outside the log directory", p, w.Code, w.Body.String())
		}
	}
}

// The binary profiles are pprof's protobuf, as `go tool pprof` reads them.
func TestPprofProfiles(t *testing.T) {
	e := newTestEnv(t, nil)
	for _, tc := range []struct {
		path, sampleType string
	}{
		{"/debug/pprof/heap", "inuse_space"},
		{"/debug/pprof/allocs", "alloc_space"},
		{"/debug/pprof/goroutine", "goroutine"},
		{"/debug/pprof/profile?seconds=1", "cpu"},
	} {
		w := e.do("GET", tc.path, bearer("good-admin"))
		if w.Code != 200 {
			t.Fatalf("%s: %d %s", tc.path, w.Code, w.Body.String())
		}
		p, err := profile.Parse(bytes.NewReader(w.Body.Bytes()))
		if err != nil {
			t.Fatalf("%s: not a profile: %v", tc.path, err)
		}
		var types []string
		for _, st := range p.SampleType {
			types = append(types, st.Type)
		}
		if !strings.Contains(strings.Join(types, " "), tc.sampleType) {
			t.Errorf("%s: sample types %v, want %s", tc.path, types, tc.sampleType)
		}
	}
	w := e.do("GET", "/debug/pprof/trace?seconds=0.1", bearer("good-admin"))
	if w.Code != 200 || !strings.HasPrefix(w.Body.String(), "go 1.") {
		t.Errorf("trace: %d %.40q", w.Code, w.Body.String())
	}
}

// Each switch off gives kubelet's 405 and message; without the debugging
// handlers kubelet's list of paths answers "Debug endpoints are disabled."
// and configz, checkpoint and flags are not served.
func TestDebuggingHandlersDisabled(t *testing.T) {
	admin := bearer("good-admin")
	for _, tc := range []struct {
		name   string
		mutate func(*DebugOptions)
		method string
		path   string
		code   int
		want   string
	}{
		{"profiling off", func(d *DebugOptions) { d.Profiling = false }, "GET", "/debug/pprof/heap", 405, "profiling endpoint is disabled.\n"},
		{"flags off", func(d *DebugOptions) { d.Flags = false }, "PUT", "/debug/flags/v", 405, "flags endpoint is disabled.\n"},
		{"system log off", func(d *DebugOptions) { d.SystemLog = false }, "GET", "/logs/syslog", 405, "logs endpoint is disabled.\n"},
		{"checkpoint gate off", func(d *DebugOptions) { d.Checkpoint = false }, "POST", "/checkpoint/default/web/app", 404, "404 page not found"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newTestEnv(t, func(o *Options) {
				d := DefaultDebugOptions()
				d.SetVerbosity = func(uint32) error { return nil }
				tc.mutate(&d)
				o.Debug = &d
			})
			e.pods.pods = []*v1.Pod{testPod()}
			if w := e.doBody(tc.method, tc.path, "1", admin); w.Code != tc.code || w.Body.String() != tc.want && !strings.Contains(w.Body.String(), tc.want) {
				t.Fatalf("%d %q, want %d %q", w.Code, w.Body.String(), tc.code, tc.want)
			}
		})
	}

	off := newTestEnv(t, func(o *Options) {
		o.Debug = &DebugOptions{Profiling: true, Flags: true, SystemLog: true, Checkpoint: true, SetVerbosity: func(uint32) error { return nil }}
		o.Configz = func() ([]byte, error) { return []byte(`{}`), nil }
		o.Exec = &fakeExec{}
	})
	off.pods.pods = []*v1.Pod{testPod()}
	for _, r := range []struct{ method, path string }{
		{"POST", "/run/default/web/app?cmd=ls"}, {"POST", "/exec/default/web/app?command=ls"},
		{"GET", "/attach/default/web/app"}, {"POST", "/portForward/default/web"},
		{"GET", "/containerLogs/default/web/app"}, {"GET", "/runningpods/"},
		{"GET", "/debug/pprof/heap"}, {"GET", "/logs/"},
	} {
		if w := off.do(r.method, r.path, admin); w.Code != 405 || w.Body.String() != "Debug endpoints are disabled.\n" {
			t.Errorf("debugging handlers off: %s %s: %d %q", r.method, r.path, w.Code, w.Body.String())
		}
	}
	for _, r := range []struct{ method, path string }{
		{"GET", "/configz"}, {"POST", "/checkpoint/default/web/app"}, {"PUT", "/debug/flags/v"},
	} {
		if w := off.do(r.method, r.path, admin); w.Code != 404 {
			t.Errorf("debugging handlers off: %s %s: %d %q, want 404", r.method, r.path, w.Code, w.Body.String())
		}
	}
	// What does not depend on them stays.
	for _, p := range []string{"/healthz", "/pods", "/stats/summary", "/metrics/resource"} {
		if w := off.do("GET", p, admin); w.Code != 200 {
			t.Errorf("debugging handlers off: %s: %d %q", p, w.Code, w.Body.String())
		}
	}
}

// runExec answers /run's exec with fixed output and exit code.
type runExec struct {
	stdout, stderr string
	code           int
	mu             sync.Mutex
	cmd            []string
	id             string
}

func (f *runExec) Exec(_ context.Context, id string, o runtime.ExecOptions) (int, error) {
	f.mu.Lock()
	f.cmd, f.id = o.Cmd, id
	f.mu.Unlock()
	io.WriteString(o.Stdout, f.stdout)
	io.WriteString(o.Stderr, f.stderr)
	return f.code, nil
}

// /run (kubelet's legacy one-shot exec, nodes/proxy) and /checkpoint
// (nodes/checkpoint; the runtime does not checkpoint, answered as kubelet
// answers with such a runtime).
func TestRunAndCheckpoint(t *testing.T) {
	fe := &runExec{stdout: "out\n", stderr: "err\n"}
	e := newTestEnv(t, func(o *Options) { o.Exec = fe })
	pod := testPod()
	e.pods.pods = []*v1.Pod{pod}
	e.conts.cs = []runtime.Container{{ID: "c1", Pod: runtime.PodRef{UID: pod.UID}, Name: "app", State: runtime.StateRunning}}
	admin := bearer("good-admin")

	w := e.do("POST", "/run/default/web/app?cmd=echo%20a%20b", admin)
	if w.Code != 200 || w.Body.String() != "out\nerr\n" || w.Header().Get("Content-Type") != "application/json" {
		t.Fatalf("run: %d %q %v", w.Code, w.Body.String(), w.Header())
	}
	if !reflect.DeepEqual(fe.cmd, []string{"echo", "a", "b"}) || fe.id != "c1" {
		t.Errorf("ran %q in %s", fe.cmd, fe.id)
	}
	if w := e.do("POST", "/run/default/web/uid-1/app?cmd=true", admin); w.Code != 200 {
		t.Errorf("run with the pod's UID: %d %q", w.Code, w.Body.String())
	}
	fe.code = 3
	for _, tc := range []struct {
		method, path string
		who          func(*http.Request)
		code         int
		body         string
	}{
		{"POST", "/run/default/web/app?cmd=false", admin, 500, "command 'false' exited with 3: err\n"},
		{"POST", "/run/default/nope/app?cmd=true", admin, 404, "pod does not exist"},
		{"POST", "/run/default/web/side?cmd=true", admin, 500, `container not found ("side")`},
		{"POST", "/run/default/web/other-uid/app?cmd=true", admin, 500, `container not found ("app")`},
		{"GET", "/run/default/web/app?cmd=true", admin, 405, "Method Not Allowed\n"},
		{"POST", "/run/default/web/app?cmd=true", bearer("good-nobody"), 403, "Forbidden (user=nobody, verb=create, resource=nodes, subresource(s)=[proxy])\n"},

		{"POST", "/checkpoint/default/web/app", admin, 500, "checkpointing of default/web/app failed (rpc error: code = Unimplemented desc = method CheckpointContainer not implemented)"},
		{"POST", "/checkpoint/default/web/app?timeout=x", admin, 404, "cannot parse value of timeout parameter"},
		{"POST", "/checkpoint/default/nope/app", admin, 404, "pod does not exist"},
		{"POST", "/checkpoint/default/web/nope", admin, 404, "container nope does not exist"},
		{"POST", "/checkpoint/default/web/app", bearer("good-nobody"), 403, "Forbidden (user=nobody, verb=create, resource=nodes, subresource(s)=[checkpoint])\n"},
	} {
		if w := e.do(tc.method, tc.path, tc.who); w.Code != tc.code || w.Body.String() != tc.body {
			t.Errorf("%s %s: %d %q, want %d %q", tc.method, tc.path, w.Code, w.Body.String(), tc.code, tc.body)
		}
	}
}

// /healthz runs kubelet's checks (ping, log, syncloop) with the apiserver
// healthz format; each is served alone too.
func TestHealthzChecks(t *testing.T) {
	var syncErr error
	var mu sync.Mutex
	release := make(chan struct{})
	flushes := make(chan struct{}, 10)
	e := newTestEnv(t, func(o *Options) {
		o.Healthy = func() error { mu.Lock(); defer mu.Unlock(); return syncErr }
		o.FlushLogs = func() { flushes <- struct{}{}; <-release }
	})
	admin := bearer("good-admin")
	get := func(path string) (int, string) {
		w := e.do("GET", path, admin)
		return w.Code, w.Body.String()
	}
	check := func(path string, code int, body string) {
		t.Helper()
		if c, b := get(path); c != code || b != body {
			t.Errorf("%s: %d %q, want %d %q", path, c, b, code, body)
		}
	}
	check("/healthz", 200, "ok")
	check("/healthz?verbose", 200, "[+]ping ok\n[+]log ok\n[+]syncloop ok\nhealthz check passed\n")
	check("/healthz/ping", 200, "ok")
	check("/healthz/log", 200, "ok")
	check("/healthz/syncloop", 200, "ok")
	check("/healthz?verbose&exclude=log&exclude=nope", 200, "[+]ping ok\n[+]log excluded: ok\n[+]syncloop ok\nwarn: some health checks cannot be excluded: no matches for \"nope\"\nhealthz check passed\n")

	mu.Lock()
	syncErr = errors.New("PLEG is not healthy: pleg was last seen active 5m0s ago")
	mu.Unlock()
	check("/healthz", 500, "[+]ping ok\n[+]log ok\n[-]syncloop failed: reason withheld\nhealthz check failed\n")
	check("/healthz/syncloop", 500, "internal server error: PLEG is not healthy: pleg was last seen active 5m0s ago\n")
	check("/healthz?exclude=syncloop", 200, "ok")
	mu.Lock()
	syncErr = nil
	mu.Unlock()

	// The first check started a flush, which is stuck: two minutes
	// later logging is reported blocked, and no second flush starts.
	select {
	case <-flushes:
	case <-time.After(10 * time.Second):
		t.Fatal("no flush started by the first check")
	}
	e.clock.Step(119 * time.Second)
	check("/healthz/log", 200, "ok")
	e.clock.Step(time.Second)
	check("/healthz/log", 500, "internal server error: logging blocked\n")
	check("/healthz", 500, "[+]ping ok\n[-]log failed: reason withheld\n[+]syncloop ok\nhealthz check failed\n")
	if len(flushes) != 0 {
		t.Error("a second flush started while one is stuck")
	}
	close(release)
	deadline := time.Now().Add(10 * time.Second)
	for {
		if c, _ := get("/healthz/log"); c == 200 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("log check still failing after the flush returned")
		}
		time.Sleep(10 * time.Millisecond)
	}
}
