package nodeapi

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/nodeagent/nodeagent/runtime"
)

func writeFiles(t testing.TB, root string, files map[string]string) {
	t.Helper()
	for p, content := range files {
		full := filepath.Join(root, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func TestReadCgroup(t *testing.T) {
	// Hybrid (v1 controllers and a unified mount without them) and pure v2.
	v1 := t.TempDir()
	writeFiles(t, v1, map[string]string{
		"cpu/p/c/cpu.stat":                 "nr_periods 0\nnr_throttled 0\n",
		"cpuacct/p/c/cpuacct.usage":        "2500000000\n",
		"memory/p/c/memory.usage_in_bytes": "1000000\n",
		"memory/p/c/memory.stat":           "cache 5\ntotal_inactive_file 200000\n",
		"unified/p/c/cgroup.procs":         "",
	})
	u, err := readCgroup([]string{filepath.Join(v1, "unified"), filepath.Join(v1, "cpu"), filepath.Join(v1, "cpuacct"), filepath.Join(v1, "memory")}, "/p/c")
	if err != nil || u.cpuNanos != 2500000000 || u.workingSet != 800000 {
		t.Fatalf("v1: %+v %v", u, err)
	}
	v2 := t.TempDir()
	writeFiles(t, v2, map[string]string{
		"p/c/cpu.stat":       "usage_usec 1500\nuser_usec 1000\n",
		"p/c/memory.current": "4096\n",
		"p/c/memory.stat":    "anon 1\ninactive_file 1024\n",
	})
	u, err = readCgroup([]string{v2}, "/p/c")
	if err != nil || u.cpuNanos != 1500000 || u.workingSet != 3072 {
		t.Fatalf("v2: %+v %v", u, err)
	}
	// The v2 root: no memory.current; usage is anon + file from its
	// memory.stat, as runc reports the root (kubelet's node working set on
	// v2), rss is anon.
	writeFiles(t, v2, map[string]string{
		"cpu.stat":    "usage_usec 7\n",
		"memory.stat": "anon 3000\nfile 5000\nkernel 100000\ninactive_file 1500\nactive_file 3500\n",
	})
	u, err = readCgroup([]string{v2}, "/")
	if err != nil || !u.hasMem || u.memUsage != 8000 || u.workingSet != 6500 || u.rss != 3000 {
		t.Fatalf("v2 root: %+v %v", u, err)
	}
	if _, err := readCgroup([]string{v2}, "/gone"); err == nil {
		t.Fatal("a missing cgroup read without error")
	}
}

func TestMetricsResource(t *testing.T) {
	root := t.TempDir()
	writeFiles(t, root, map[string]string{
		"cpu.stat":                       "usage_usec 9000000\n",
		"nodeagent/u1/cpu.stat":          "usage_usec 3000000\n",
		"nodeagent/u1/c1/cpu.stat":       "usage_usec 2000000\n",
		"nodeagent/u1/c1/memory.current": "8192\n",
		"nodeagent/u1/memory.current":    "10000\n",
	})
	e := newTestEnv(t, func(o *Options) { o.CgroupMounts = []string{root} })
	e.conts.cs = []runtime.Container{
		{ID: "c1", Name: "app", Pod: runtime.PodRef{UID: "u1", Name: "web", Namespace: "default"}, State: runtime.StateRunning, CgroupsPath: "/nodeagent/u1/c1"},
		{ID: "c0", Name: "old", Pod: runtime.PodRef{UID: "u1", Name: "web", Namespace: "default"}, State: runtime.StateExited, CgroupsPath: "/nodeagent/u1/c0"},
	}
	w := e.do("GET", "/metrics/resource", bearer("good-admin"))
	if w.Code != 200 {
		t.Fatalf("%d %s", w.Code, w.Body.String())
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(strings.NewReader(w.Body.String()))
	if err != nil {
		t.Fatalf("not Prometheus text: %v\n%s", err, w.Body.String())
	}
	value := func(name string) float64 {
		f := families[name]
		if f == nil || len(f.Metric) != 1 {
			t.Fatalf("%s: %v", name, f)
		}
		m := f.Metric[0]
		if m.Counter != nil {
			return m.Counter.GetValue()
		}
		return m.Gauge.GetValue()
	}
	for name, want := range map[string]float64{
		"node_cpu_usage_seconds_total":       9,
		"pod_cpu_usage_seconds_total":        3,
		"pod_memory_working_set_bytes":       10000,
		"container_cpu_usage_seconds_total":  2,
		"container_memory_working_set_bytes": 8192,
		"scrape_error":                       0,
	} {
		if got := value(name); got != want {
			t.Errorf("%s = %v, want %v", name, got, want)
		}
	}
	if l := families["container_cpu_usage_seconds_total"].Metric[0].Label; len(l) != 3 {
		t.Errorf("container labels %v", l)
	}
	// Needs nodes/metrics.
	if w := e.do("GET", "/metrics/resource", bearer("good-pods-reader")); w.Code != 403 || !strings.Contains(w.Body.String(), "[metrics]") {
		t.Errorf("without nodes/metrics: %d %q", w.Code, w.Body.String())
	}
}
