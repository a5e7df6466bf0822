package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/pprof/profile"

	"github.com/nodeagent/nodeagent/internal/testing/testenv"
)

// kubelet's debugging handlers through the real API server's node proxy,
// as an operator uses them: a heap profile that go tool pprof reads and
// that names the agent's own code, /logs/ listing and serving a file under
// /var/log, the log verbosity set with a PUT, /healthz's checks.
func TestNodeAPIDebuggingHandlers(t *testing.T) {
	t.Parallel()
	env := testenv.Cluster(t)
	ctx := context.Background()
	a := newAgent(t, env, agentOpts{noRuntime: true})
	a.start()
	a.waitKubeletPort(ctx)

	// A file of this test's own in the host's /var/log (what kubelet's
	// /logs/ serves; agents share the host's).
	name := "nodeagent-e2e-" + a.node + ".log"
	logFile := filepath.Join("/var/log", name)
	content := "written by " + t.Name() + " for " + a.node + "\n"
	if err := os.WriteFile(logFile, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.Remove(logFile) })

	proxy := "/api/v1/nodes/" + a.node + "/proxy"
	raw := func(path string) string {
		t.Helper()
		out, err := kubectlOut(t, a.env, "get", "--raw", proxy+path)
		if err != nil {
			t.Fatalf("%s: %v\n%.2000s", path, err, out)
		}
		return out
	}

	start := time.Now()
	heap := raw("/debug/pprof/heap")
	p, err := profile.Parse(strings.NewReader(heap))
	if err != nil {
		t.Fatalf("/debug/pprof/heap (%d bytes) is not a profile: %v", len(heap), err)
	}
	t.Logf("heap profile through the API server: %d bytes, %d samples, %s", len(heap), len(p.Sample), time.Since(start))
	var types []string
	for _, st := range p.SampleType {
		types = append(types, st.Type)
	}
	if strings.Join(types, ",") != "alloc_objects,alloc_space,inuse_objects,inuse_space" {
		t.Errorf("heap profile sample types %v", types)
	}
	ours := false
	for _, f := range p.Function {
		if strings.HasPrefix(f.Name, "github.com/nodeagent/nodeagent/") {
			ours = true
			break
		}
	}
	if len(p.Sample) == 0 || !ours {
		t.Errorf("heap profile with %d samples and no function of the agent's (%d functions): not the agent's", len(p.Sample), len(p.Function))
	}
	if idx := raw("/debug/pprof/"); !strings.Contains(idx, "goroutine") || !strings.Contains(idx, "heap") {
		t.Errorf("/debug/pprof/ index: %.500s", idx)
	}
	if g := raw("/debug/pprof/goroutine?debug=1"); !strings.Contains(g, "goroutine profile: total") || !strings.Contains(g, "github.com/nodeagent/nodeagent/") {
		t.Errorf("goroutine profile: %.500s", g)
	}

	if list := raw("/logs/"); !strings.Contains(list, `<a href="`+name+`">`+name+`</a>`) {
		t.Errorf("/logs/ does not list %s:\n%.3000s", name, list)
	}
	if got := raw("/logs/" + name); got != content {
		t.Errorf("/logs/%s = %q, want %q", name, got, content)
	}
	// Without the node log query (the NodeLogQuery gate and
	// enableSystemLogQuery, off by default) a query is ignored and the
	// listing served, as kubelet does; the query itself is tested under
	// systemd (hack/test-systemd.sh) against a real journal.
	out, err := kubectlOut(t, a.env, "get", "--raw", proxy+"/logs/?query=nodeagent")
	if err != nil || !strings.Contains(out, `<a href="`+name+`">`+name+`</a>`) {
		t.Errorf("node log query while it is off: %v %.500s", err, out)
	}

	// PUT /debug/flags/v (kubectl replace --raw sends a PUT).
	body := filepath.Join(t.TempDir(), "v")
	if err := os.WriteFile(body, []byte("4"), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err = kubectlOut(t, a.env, "replace", "--raw", proxy+"/debug/flags/v", "-f", body)
	if err != nil || !strings.Contains(out, "successfully set klog.logging.verbosity to 4") {
		t.Fatalf("PUT /debug/flags/v: %v %q", err, out)
	}
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(a.out.String(), "log verbosity set through the node API") {
		if time.Now().After(deadline) {
			t.Fatal("the agent did not log the verbosity change")
		}
		time.Sleep(50 * time.Millisecond)
	}

	if h := raw("/healthz?verbose"); h != "[+]ping ok\n[+]log ok\n[+]syncloop ok\nhealthz check passed\n" {
		t.Errorf("/healthz?verbose = %q", h)
	}
	if h := raw("/healthz/syncloop"); h != "ok" {
		t.Errorf("/healthz/syncloop = %q", h)
	}
}

// enableDebuggingHandlers: false in the agent's configuration answers as
// kubelet's: 405 on its list of paths, no /configz; /healthz stays.
func TestNodeAPIDebuggingHandlersOff(t *testing.T) {
	t.Parallel()
	env := testenv.Cluster(t)
	ctx := context.Background()
	a := newAgent(t, env, agentOpts{noRuntime: true, config: "enableDebuggingHandlers: false\n"})
	a.start()
	a.waitKubeletPort(ctx)
	proxy := "/api/v1/nodes/" + a.node + "/proxy"
	for path, want := range map[string]string{
		"/debug/pprof/heap":                  "MethodNotAllowed",
		"/logs/":                             "MethodNotAllowed",
		"/containerLogs/default/nopod/nonei": "MethodNotAllowed",
		"/configz":                           "NotFound",
	} {
		out, err := kubectlOut(t, a.env, "get", "--raw", proxy+path)
		if err == nil || !strings.Contains(out, want) {
			t.Errorf("%s: %v %.300q, want %s", path, err, out, want)
		}
	}
	if out, err := kubectlOut(t, a.env, "get", "--raw", proxy+"/healthz"); err != nil || out != "ok" {
		t.Errorf("/healthz: %v %q", err, out)
	}
}
