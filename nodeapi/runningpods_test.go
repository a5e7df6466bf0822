package nodeapi

import (
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"

	"github.com/nodeagent/nodeagent/runtime"
)

func TestRunningPods(t *testing.T) {
	e := newTestEnv(t, nil)
	web := runtime.PodRef{UID: "u1", Name: "web", Namespace: "default"}
	e.conts.cs = []runtime.Container{
		{ID: "a", Name: "app", Image: "docker.io/library/busybox:1.36", Pod: web, State: runtime.StateRunning},
		{ID: "b", Name: "init", Image: "docker.io/library/busybox:1.36", Pod: web, State: runtime.StateExited},
		{ID: "c", Name: "side", Image: "registry.k8s.io/pause:3.10", Pod: web, State: runtime.StateRunning},
		{ID: "d", Name: "done", Pod: runtime.PodRef{UID: "u2", Name: "job", Namespace: "batch"}, State: runtime.StateExited},
	}
	w := e.do("GET", "/runningpods/", bearer("good-pods-reader")) // nodes/pods is enough, as kubelet
	if w.Code != 200 {
		t.Fatalf("%d %s", w.Code, w.Body.String())
	}
	var list v1.PodList
	if err := json.Unmarshal(w.Body.Bytes(), &list); err != nil {
		t.Fatal(err)
	}
	if list.Kind != "PodList" || len(list.Items) != 1 {
		t.Fatalf("%s", w.Body.String())
	}
	p := list.Items[0]
	if p.UID != "u1" || p.Name != "web" || p.Namespace != "default" || len(p.Spec.Containers) != 2 ||
		p.Spec.Containers[0].Name != "app" || p.Spec.Containers[0].Image != "docker.io/library/busybox:1.36" || p.Spec.Containers[1].Name != "side" {
		t.Errorf("pod %+v", p)
	}
	e.conts.cs = nil
	if w := e.do("GET", "/runningpods/", bearer("good-admin")); w.Code != 200 || !strings.Contains(w.Body.String(), `"items":[]`) {
		t.Errorf("no pods: %d %s", w.Code, w.Body.String())
	}
}

func TestConfigzAndProbeMetrics(t *testing.T) {
	conf := []byte(`{"kubeletconfig":{"port":10250}}`)
	var confErr error
	e := newTestEnv(t, func(o *Options) {
		o.Configz = func() ([]byte, error) { return conf, confErr }
		o.ProbeMetrics = http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("prober_probe_total 1\n")) })
	})
	if w := e.do("GET", "/configz", bearer("good-admin")); w.Code != 200 || w.Body.String() != string(conf) || w.Header().Get("Content-Type") != "application/json" {
		t.Errorf("configz: %d %s", w.Code, w.Body.String())
	}
	// nodes/configz (or proxy), as kubelet.
	if w := e.do("GET", "/configz", bearer("good-pods-reader")); w.Code != 403 || !strings.Contains(w.Body.String(), "[configz proxy]") {
		t.Errorf("configz without nodes/configz: %d %s", w.Code, w.Body.String())
	}
	confErr = errors.New("boom")
	if w := e.do("GET", "/configz", bearer("good-admin")); w.Code != 500 {
		t.Errorf("configz error: %d", w.Code)
	}
	if w := e.do("GET", "/metrics/probes", bearer("good-admin")); w.Code != 200 || w.Body.String() != "prober_probe_total 1\n" {
		t.Errorf("probes: %d %s", w.Code, w.Body.String())
	}
	if w := e.do("GET", "/metrics/probes", bearer("good-pods-reader")); w.Code != 403 || !strings.Contains(w.Body.String(), "[metrics]") {
		t.Errorf("probes without nodes/metrics: %d %s", w.Code, w.Body.String())
	}
}
