package nodeapi

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodeagent/nodeagent/internal/mountinfo"
	"github.com/nodeagent/nodeagent/runtime"
)

const netDevFixture = `Inter-|   Receive                                                |  Transmit
 face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs drop fifo colls carrier compressed
    lo:     900      9    0    0    0     0          0         0      900       9    0    0    0     0       0          0
  eth0:    5000     50    1    2    0     0          0         0     7000      70    3    4    0     0       0          0
vethab12:   1 1 1 1 0 0 0 0 1 1 1 1 0 0 0 0
`

// v1Tree writes a cgroup v1 hybrid layout (separate cpu, cpuacct and
// memory hierarchies, as this host) with the root, one pod and its
// container.
func v1Tree(t testing.TB, root string, pod, ctr string) []string {
	t.Helper()
	files := map[string]string{}
	set := func(h, dir string, kv map[string]string) {
		for f, v := range kv {
			files[filepath.Join(h, dir, f)] = v
		}
	}
	for _, h := range []string{"cpu", "cpuacct", "memory", "pids"} {
		files[filepath.Join(h, "cgroup.procs")] = "1\n"
	}
	set("cpuacct", "", map[string]string{"cpuacct.usage": "90000000000\n", "cpuacct.stat": "user 6000\nsystem 2000\n"})
	set("cpu", "", map[string]string{"cpu.shares": "1024\n", "cpu.cfs_period_us": "100000\n", "cpu.cfs_quota_us": "-1\n", "cpu.stat": "nr_periods 0\nnr_throttled 0\nthrottled_time 0\n"})
	set("memory", "", map[string]string{"memory.usage_in_bytes": "8000000000\n", "memory.max_usage_in_bytes": "9000000000\n", "memory.failcnt": "0\n",
		"memory.limit_in_bytes": "9223372036854771712\n", "memory.stat": "total_cache 3000000000\ntotal_rss 4000000000\ntotal_inactive_file 1000000000\n",
		"memory.oom_control": "oom_kill_disable 0\nunder_oom 0\noom_kill 0\n"})
	set("cpuacct", pod, map[string]string{"cpuacct.usage": "3000000000\n", "cpuacct.stat": "user 200\nsystem 100\n"})
	set("cpu", pod, map[string]string{"cpu.shares": "2\n", "cpu.cfs_period_us": "100000\n", "cpu.cfs_quota_us": "50000\n", "cpu.stat": "nr_periods 40\nnr_throttled 4\nthrottled_time 400000000\n"})
	set("memory", pod, map[string]string{"memory.usage_in_bytes": "20000000\n", "memory.max_usage_in_bytes": "25000000\n", "memory.failcnt": "3\n",
		"memory.limit_in_bytes": "104857600\n", "memory.stat": "cache 1\ntotal_cache 4000000\ntotal_rss 15000000\ntotal_swap 0\ntotal_inactive_file 2000000\n",
		"memory.oom_control": "oom_kill_disable 0\nunder_oom 0\noom_kill 1\n"})
	set("cpuacct", pod+"/"+ctr, map[string]string{"cpuacct.usage": "2500000000\n", "cpuacct.stat": "user 150\nsystem 90\n"})
	set("cpu", pod+"/"+ctr, map[string]string{"cpu.shares": "2\n", "cpu.cfs_period_us": "100000\n", "cpu.cfs_quota_us": "50000\n", "cpu.stat": "nr_periods 30\nnr_throttled 3\nthrottled_time 300000000\n"})
	set("memory", pod+"/"+ctr, map[string]string{"memory.usage_in_bytes": "18000000\n", "memory.max_usage_in_bytes": "21000000\n", "memory.failcnt": "2\n",
		"memory.limit_in_bytes": "104857600\n", "memory.stat": "total_cache 3000000\ntotal_rss 14000000\ntotal_swap 0\ntotal_inactive_file 1000000\n",
		"memory.oom_control": "oom_kill_disable 0\nunder_oom 0\noom_kill 1\n"})
	writeFiles(t, root, files)
	return []string{filepath.Join(root, "cpu"), filepath.Join(root, "cpuacct"), filepath.Join(root, "memory"), filepath.Join(root, "pids")}
}

func fakeProc(t *testing.T, pids ...int) string {
	t.Helper()
	proc := t.TempDir()
	files := map[string]string{
		"cpuinfo":                   "processor\t: 0\nmodel name\t: x\n\nprocessor\t: 1\nmodel name\t: x\n",
		"meminfo":                   "MemTotal:       24576000 kB\nMemFree: 1 kB\n",
		"sys/kernel/random/boot_id": "b00t\n",
		"1/net/dev":                 strings.Replace(netDevFixture, "eth0", "ens3", 1),
	}
	for _, p := range pids {
		files[fmt.Sprintf("%d/net/dev", p)] = netDevFixture
	}
	writeFiles(t, proc, files)
	return proc
}

func parseFamilies(t *testing.T, body string) map[string]*dto.MetricFamily {
	t.Helper()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(strings.NewReader(body))
	if err != nil {
		t.Fatalf("not Prometheus text: %v\n%s", err, body)
	}
	return families
}

// sample finds the family's series with the given label values.
func sample(t *testing.T, fams map[string]*dto.MetricFamily, name string, labels map[string]string) (float64, bool) {
	t.Helper()
	f := fams[name]
	if f == nil {
		return 0, false
	}
next:
	for _, m := range f.Metric {
		got := map[string]string{}
		for _, l := range m.Label {
			got[l.GetName()] = l.GetValue()
		}
		for k, v := range labels {
			if got[k] != v {
				continue next
			}
		}
		switch {
		case m.Counter != nil:
			return m.Counter.GetValue(), true
		case m.Gauge != nil:
			return m.Gauge.GetValue(), true
		}
		return m.Untyped.GetValue(), true
	}
	return 0, false
}

func TestMetricsCadvisorV1(t *testing.T) {
	root := t.TempDir()
	const pod, ctr = "/kubepods/burstable/podu1", "c1"
	mounts := v1Tree(t, root, pod, ctr)
	proc := fakeProc(t, 4242)
	created := time.Unix(1700000000, 0)
	e := newTestEnv(t, func(o *Options) { o.CgroupMounts = mounts; o.ProcDir = proc; o.StatsFsDir = root })
	e.conts.cs = []runtime.Container{
		{ID: "c1", Name: "app", Image: "docker.io/library/busybox:1.36", Pod: runtime.PodRef{UID: "u1", Name: "web", Namespace: "default"},
			State: runtime.StateRunning, Pid: 4242, CgroupsPath: pod + "/" + ctr, CreatedAt: created},
		{ID: "c0", Name: "old", Pod: runtime.PodRef{UID: "u1", Name: "web", Namespace: "default"}, State: runtime.StateExited, CgroupsPath: pod + "/c0"},
	}
	w := e.do("GET", "/metrics/cadvisor", bearer("good-admin"))
	if w.Code != 200 {
		t.Fatalf("%d %s", w.Code, w.Body.String())
	}
	fams := parseFamilies(t, w.Body.String())
	ctrL := map[string]string{"container": "app", "id": pod + "/" + ctr, "image": "docker.io/library/busybox:1.36", "name": "c1", "namespace": "default", "pod": "web"}
	podL := map[string]string{"container": "", "id": pod, "image": "", "name": "", "namespace": "default", "pod": "web"}
	rootL := map[string]string{"container": "", "id": "/", "image": "", "name": "", "namespace": "", "pod": ""}
	with := func(l map[string]string, k, v string) map[string]string {
		out := map[string]string{k: v}
		for a, b := range l {
			out[a] = b
		}
		return out
	}
	for _, tc := range []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"container_cpu_usage_seconds_total", with(ctrL, "cpu", "total"), 2.5},
		{"container_cpu_usage_seconds_total", with(podL, "cpu", "total"), 3},
		{"container_cpu_usage_seconds_total", with(rootL, "cpu", "total"), 90},
		{"container_cpu_user_seconds_total", ctrL, 1.5},
		{"container_cpu_system_seconds_total", ctrL, 0.9},
		{"container_cpu_cfs_periods_total", ctrL, 30},
		{"container_cpu_cfs_throttled_periods_total", ctrL, 3},
		{"container_cpu_cfs_throttled_seconds_total", ctrL, 0.3},
		{"container_cpu_cfs_periods_total", podL, 40},
		{"container_memory_usage_bytes", ctrL, 18e6},
		{"container_memory_working_set_bytes", ctrL, 17e6},
		{"container_memory_rss", ctrL, 14e6},
		{"container_memory_cache", ctrL, 3e6},
		{"container_memory_swap", ctrL, 0},
		{"container_memory_failcnt", ctrL, 2},
		{"container_memory_max_usage_bytes", ctrL, 21e6},
		{"container_oom_events_total", ctrL, 1},
		{"container_memory_working_set_bytes", podL, 18e6},
		{"container_memory_working_set_bytes", rootL, 7e9},
		{"container_spec_cpu_quota", ctrL, 50000},
		{"container_spec_cpu_period", ctrL, 100000},
		{"container_spec_cpu_shares", ctrL, 2},
		{"container_spec_memory_limit_bytes", ctrL, 104857600},
		{"container_spec_memory_limit_bytes", rootL, 0}, // unlimited, as cAdvisor
		{"container_spec_cpu_shares", rootL, 1024},
		{"container_start_time_seconds", ctrL, 1700000000},
		{"container_start_time_seconds", podL, 1700000000},
		{"container_network_receive_bytes_total", with(podL, "interface", "eth0"), 5000},
		{"container_network_receive_packets_total", with(podL, "interface", "eth0"), 50},
		{"container_network_receive_errors_total", with(podL, "interface", "eth0"), 1},
		{"container_network_receive_packets_dropped_total", with(podL, "interface", "eth0"), 2},
		{"container_network_transmit_bytes_total", with(podL, "interface", "eth0"), 7000},
		{"container_network_transmit_packets_total", with(podL, "interface", "eth0"), 70},
		{"container_network_transmit_errors_total", with(podL, "interface", "eth0"), 3},
		{"container_network_transmit_packets_dropped_total", with(podL, "interface", "eth0"), 4},
		{"container_network_receive_bytes_total", with(rootL, "interface", "ens3"), 5000},
		{"container_last_seen", ctrL, float64(e.clock.Now().Unix())},
		{"machine_cpu_cores", map[string]string{"boot_id": "b00t"}, 2},
		{"machine_memory_bytes", nil, 24576000 * 1024},
		{"container_scrape_error", nil, 0},
		{"machine_scrape_error", nil, 0},
	} {
		got, ok := sample(t, fams, tc.name, tc.labels)
		if !ok || got != tc.want {
			t.Errorf("%s%v = %v (found %v), want %v", tc.name, tc.labels, got, ok, tc.want)
		}
	}
	// No quota on the root: no CFS series and no quota for it, as cAdvisor.
	if _, ok := sample(t, fams, "container_cpu_cfs_periods_total", rootL); ok {
		t.Error("root has container_cpu_cfs_periods_total without a quota")
	}
	if _, ok := sample(t, fams, "container_spec_cpu_quota", rootL); ok {
		t.Error("root has container_spec_cpu_quota without a quota")
	}
	// lo and veth* are left out, as cAdvisor does.
	for _, m := range fams["container_network_receive_bytes_total"].Metric {
		for _, l := range m.Label {
			if l.GetName() == "interface" && (l.GetValue() == "lo" || strings.HasPrefix(l.GetValue(), "veth")) {
				t.Errorf("interface %s reported", l.GetValue())
			}
		}
	}
	// Filesystem: the root only, with a device.
	if f := fams["container_fs_usage_bytes"]; f == nil || len(f.Metric) != 1 {
		t.Errorf("container_fs_usage_bytes %v", f)
	} else if v, _ := sample(t, fams, "container_fs_limit_bytes", rootL); v <= 0 {
		t.Errorf("container_fs_limit_bytes %v", v)
	}
	// Types, help and label sets as cAdvisor's: every container_ family
	// has the six base labels; stamped families carry a timestamp.
	types := map[string]dto.MetricType{
		"container_cpu_usage_seconds_total": dto.MetricType_COUNTER, "container_memory_working_set_bytes": dto.MetricType_GAUGE,
		"container_oom_events_total": dto.MetricType_COUNTER, "container_memory_failcnt": dto.MetricType_COUNTER,
		"container_network_receive_bytes_total": dto.MetricType_COUNTER, "container_spec_cpu_quota": dto.MetricType_GAUGE,
	}
	for name, typ := range types {
		if fams[name].GetType() != typ {
			t.Errorf("%s type %v, want %v", name, fams[name].GetType(), typ)
		}
	}
	if h := fams["container_cpu_usage_seconds_total"].GetHelp(); h != "Cumulative cpu time consumed in seconds." {
		t.Errorf("help %q", h)
	}
	for name, f := range fams {
		if !strings.HasPrefix(name, "container_") || name == "container_scrape_error" {
			continue
		}
		for _, m := range f.Metric {
			var names []string
			for _, l := range m.Label {
				names = append(names, l.GetName())
			}
			sort.Strings(names)
			base := strings.Join(names, ",")
			if !strings.Contains(base, "container,") || !strings.Contains(base, "id,image,") || !strings.HasSuffix(base, "name,namespace,pod") {
				t.Errorf("%s labels %s", name, base)
			}
			stamped := !strings.HasPrefix(name, "container_spec_") && name != "container_start_time_seconds"
			if (m.TimestampMs != nil) != stamped {
				t.Errorf("%s timestamp %v", name, m.TimestampMs)
			}
		}
	}
	// The exited container has no series.
	if strings.Contains(w.Body.String(), `name="c0"`) {
		t.Error("exited container reported")
	}
	// Needs nodes/metrics, as kubelet's /metrics/cadvisor.
	if w := e.do("GET", "/metrics/cadvisor", bearer("good-pods-reader")); w.Code != 403 || !strings.Contains(w.Body.String(), "[metrics]") {
		t.Errorf("without nodes/metrics: %d %q", w.Code, w.Body.String())
	}
}

// The text is what client_golang's encoder writes for the same families
// (escaping, number format, HELP and TYPE lines, timestamps), the
// families come sorted by name and each family's series sorted by label
// values, as a Prometheus registry gathers them (kubelet's output).
func TestMetricsCadvisorTextFormat(t *testing.T) {
	root := t.TempDir()
	const pod = "/kubepods/burstable/podu1"
	mounts := v1Tree(t, root, pod, "c1")
	writeFiles(t, root, map[string]string{
		"cpuacct" + pod + "/c2/cpuacct.usage": "7\n", "cpu" + pod + "/c2/cpu.shares": "2\n", "memory" + pod + "/c2/memory.usage_in_bytes": "1234567890123\n",
	})
	proc := fakeProc(t, 10)
	writeFiles(t, proc, map[string]string{"10/net/dev": netDevFixture + "  eth1: 1 2 3 4 0 0 0 0 5 6 7 8 0 0 0 0\n  as0: 1 1 1 1 0 0 0 0 1 1 1 1 0 0 0 0\n"})
	// KubeletPSI on: on cgroup v1 the pressure families are there with
	// zeros, as cAdvisor serves them.
	e := newTestEnv(t, func(o *Options) { o.CgroupMounts = mounts; o.ProcDir = proc; o.StatsFsDir = root; o.PSI = true })
	ref := runtime.PodRef{UID: "u1", Name: "we\"b", Namespace: "default"}
	e.conts.cs = []runtime.Container{
		{ID: "c2", Name: "zeta", Image: `odd\image`, Pod: ref, State: runtime.StateRunning, Pid: 10, CgroupsPath: pod + "/c2", CreatedAt: time.Unix(1700000000, 5e8)},
		{ID: "c1", Name: "alpha", Image: "busybox", Pod: ref, State: runtime.StateRunning, Pid: 10, CgroupsPath: pod + "/c1", CreatedAt: time.Unix(1700000000, 0)},
	}
	w := e.do("GET", "/metrics/cadvisor", bearer("good-admin"))
	body := w.Body.String()
	for _, want := range []string{`pod="we\"b"`, `image="odd\\image"`, `interface="as0"`, `interface="eth1"`, ` 1.234567890123e+12 `, `container="zeta"`} {
		if !strings.Contains(body, want) {
			t.Errorf("no %s in\n%s", want, body)
		}
	}
	// Families in name order, as a registry's Gather gives them
	// (container_scrape_error after the container_pressure_* families).
	var order []string
	for _, l := range strings.Split(body, "\n") {
		if strings.HasPrefix(l, "# HELP ") {
			order = append(order, strings.Fields(l)[2])
		}
	}
	if !sort.StringsAreSorted(order) || !slices.Contains(order, "container_pressure_io_stalled_seconds_total") {
		t.Errorf("families out of order or without pressure: %v", order)
	}
	fams := parseFamilies(t, body)
	var names []string
	for n := range fams {
		names = append(names, n)
	}
	sort.Strings(names)
	var re strings.Builder
	for _, n := range names {
		f := fams[n]
		for i := 1; i < len(f.Metric); i++ {
			if !labelsLess(f.Metric[i-1], f.Metric[i]) {
				t.Errorf("%s: series %d not after series %d", n, i, i-1)
			}
		}
		if _, err := expfmt.MetricFamilyToText(&re, f); err != nil {
			t.Fatal(err)
		}
	}
	if re.String() != body {
		a, b := strings.Split(body, "\n"), strings.Split(re.String(), "\n")
		for i := range min(len(a), len(b)) {
			if a[i] != b[i] {
				t.Fatalf("line %d differs from client_golang's encoding:\n ours: %s\n theirs: %s", i+1, a[i], b[i])
			}
		}
		t.Fatalf("differs from client_golang's encoding in length: %d vs %d lines", len(a), len(b))
	}
}

// labelsLess orders series as client_golang's registry does: by label
// values in label-name order.
func labelsLess(a, b *dto.Metric) bool {
	for i := range min(len(a.Label), len(b.Label)) {
		if av, bv := a.Label[i].GetValue(), b.Label[i].GetValue(); av != bv {
			return av < bv
		}
	}
	return len(a.Label) < len(b.Label)
}

func TestMetricsCadvisorV2(t *testing.T) {
	root := t.TempDir()
	writeFiles(t, root, map[string]string{
		"cgroup.controllers": "cpuset cpu io memory pids\n",
		"cpu.stat":           "usage_usec 9000000\nuser_usec 6000000\nsystem_usec 3000000\n",
		"memory.stat":        "anon 3000\nfile 5000\ninactive_file 1500\n",
		"kubepods.slice/kubepods-podu2.slice/cpu.stat":                                    "usage_usec 3000000\nuser_usec 2000000\nsystem_usec 1000000\nnr_periods 10\nnr_throttled 2\nthrottled_usec 5000\n",
		"kubepods.slice/kubepods-podu2.slice/cpu.max":                                     "max 100000\n",
		"kubepods.slice/kubepods-podu2.slice/cpu.weight":                                  "79\n",
		"kubepods.slice/kubepods-podu2.slice/memory.current":                              "10000\n",
		"kubepods.slice/kubepods-podu2.slice/memory.max":                                  "max\n",
		"kubepods.slice/kubepods-podu2.slice/memory.stat":                                 "anon 6000\nfile 4000\ninactive_file 1000\n",
		"kubepods.slice/kubepods-podu2.slice/memory.events":                               "low 0\nhigh 0\nmax 7\noom 1\noom_kill 1\n",
		"kubepods.slice/kubepods-podu2.slice/cri-containerd-c2.scope/cpu.stat":            "usage_usec 2000000\nuser_usec 1500000\nsystem_usec 500000\nnr_periods 8\nnr_throttled 1\nthrottled_usec 4000\n",
		"kubepods.slice/kubepods-podu2.slice/cri-containerd-c2.scope/cpu.max":             "20000 100000\n",
		"kubepods.slice/kubepods-podu2.slice/cri-containerd-c2.scope/cpu.weight":          "1\n",
		"kubepods.slice/kubepods-podu2.slice/cri-containerd-c2.scope/memory.current":      "8192\n",
		"kubepods.slice/kubepods-podu2.slice/cri-containerd-c2.scope/memory.peak":         "9000\n",
		"kubepods.slice/kubepods-podu2.slice/cri-containerd-c2.scope/memory.max":          "67108864\n",
		"kubepods.slice/kubepods-podu2.slice/cri-containerd-c2.scope/memory.swap.current": "100\n",
		"kubepods.slice/kubepods-podu2.slice/cri-containerd-c2.scope/memory.stat":         "anon 4096\nfile 3000\ninactive_file 1024\n",
		"kubepods.slice/kubepods-podu2.slice/cri-containerd-c2.scope/memory.events":       "low 0\nhigh 0\nmax 7\noom 1\noom_kill 1\n",
		"kubepods.slice/kubepods-podu2.slice/cri-containerd-c2.scope/cpu.pressure":        "some avg10=0.00 avg60=0.00 avg300=0.00 total=2500000\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=1500000\n",
		"kubepods.slice/kubepods-podu2.slice/cri-containerd-c2.scope/memory.pressure":     "some avg10=0.00 avg60=0.00 avg300=0.00 total=250000\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=125000\n",
		"kubepods.slice/kubepods-podu2.slice/cri-containerd-c2.scope/io.pressure":         "some avg10=0.00 avg60=0.00 avg300=0.00 total=40000\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=30000\n",
	})
	e := newTestEnv(t, func(o *Options) { o.CgroupMounts = []string{root}; o.ProcDir = fakeProc(t); o.PSI = true })
	cg := "/kubepods.slice/kubepods-podu2.slice/cri-containerd-c2.scope"
	e.conts.cs = []runtime.Container{{ID: "c2", Name: "app", Pod: runtime.PodRef{UID: "u2", Name: "api", Namespace: "prod"},
		State: runtime.StateRunning, CgroupsPath: cg}}
	w := e.do("GET", "/metrics/cadvisor", bearer("good-admin"))
	fams := parseFamilies(t, w.Body.String())
	ctrL := map[string]string{"container": "app", "id": cg, "name": "c2", "pod": "api"}
	podL := map[string]string{"container": "", "id": filepath.Dir(cg), "pod": "api"}
	for _, tc := range []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"container_cpu_usage_seconds_total", ctrL, 2},
		{"container_cpu_user_seconds_total", ctrL, 1.5},
		{"container_cpu_system_seconds_total", ctrL, 0.5},
		{"container_cpu_cfs_periods_total", ctrL, 8},
		{"container_cpu_cfs_throttled_seconds_total", ctrL, 0.004},
		{"container_spec_cpu_quota", ctrL, 20000},
		{"container_spec_cpu_period", ctrL, 100000},
		{"container_spec_cpu_shares", ctrL, 2},    // weight 1
		{"container_spec_cpu_shares", podL, 2046}, // weight 79 (kubelet's for 2048 shares) back to shares, as cAdvisor
		{"container_spec_memory_limit_bytes", ctrL, 64 << 20},
		{"container_spec_memory_limit_bytes", podL, 0},
		{"container_memory_working_set_bytes", ctrL, 8192 - 1024},
		{"container_memory_rss", ctrL, 4096},
		{"container_memory_cache", ctrL, 3000},
		{"container_memory_swap", ctrL, 100},
		{"container_memory_max_usage_bytes", ctrL, 9000},
		{"container_memory_failcnt", ctrL, 0}, // runc reports none on v2
		{"container_oom_events_total", ctrL, 1},
		{"container_pressure_cpu_waiting_seconds_total", ctrL, 2.5},
		{"container_pressure_cpu_stalled_seconds_total", ctrL, 1.5},
		{"container_pressure_memory_waiting_seconds_total", ctrL, 0.25},
		{"container_pressure_memory_stalled_seconds_total", ctrL, 0.125},
		{"container_pressure_io_waiting_seconds_total", ctrL, 0.04},
		{"container_pressure_io_stalled_seconds_total", ctrL, 0.03},
		{"container_pressure_cpu_waiting_seconds_total", podL, 0}, // no pressure files: zeros, as cAdvisor
		{"container_memory_usage_bytes", map[string]string{"id": "/"}, 8000},
		{"container_memory_working_set_bytes", map[string]string{"id": "/"}, 6500},
	} {
		got, ok := sample(t, fams, tc.name, tc.labels)
		if !ok || got != tc.want {
			t.Errorf("%s%v = %v (found %v), want %v", tc.name, tc.labels, got, ok, tc.want)
		}
	}
	// No quota on the pod (cpu.max "max"): no CFS series for it.
	if _, ok := sample(t, fams, "container_cpu_cfs_periods_total", podL); ok {
		t.Error("pod without quota has CFS series")
	}
}

func TestParseNetDev(t *testing.T) {
	got, err := parseNetDev([]byte(netDevFixture), nil)
	if err != nil || len(got) != 1 || got[0] != (netDev{name: "eth0", rxBytes: 5000, rxPackets: 50, rxErrors: 1, rxDropped: 2, txBytes: 7000, txPackets: 70, txErrors: 3, txDropped: 4}) {
		t.Fatalf("%+v %v", got, err)
	}
	if _, err := parseNetDev([]byte("eth0: 1 2 3\n"), nil); err == nil {
		t.Error("a short line parsed")
	}
}

// BenchmarkMetricsCadvisor is one /metrics/cadvisor scrape at 100 pods of
// two running containers each on a cgroup v1 hybrid layout (the handler:
// cgroup and net/dev reads and the text, not TLS or authorization).
func BenchmarkMetricsCadvisor(b *testing.B) {
	root := b.TempDir()
	var mounts []string
	var cs []runtime.Container
	var pids []int
	for i := 0; i < 100; i++ {
		pod := fmt.Sprintf("/kubepods/burstable/pod%04d", i)
		for j := 0; j < 2; j++ {
			id := fmt.Sprintf("c%04d%d", i, j)
			mounts = v1Tree(b, root, pod, id)
			cs = append(cs, runtime.Container{ID: id, Name: fmt.Sprintf("ctr%d", j), Image: "docker.io/library/busybox:1.36",
				Pod: runtime.PodRef{UID: types.UID(fmt.Sprintf("u%04d", i)), Name: fmt.Sprintf("pod-%d", i), Namespace: "bench"}, State: runtime.StateRunning,
				Pid: uint32(1000 + i), CgroupsPath: pod + "/" + id, CreatedAt: time.Unix(1700000000, 0)})
		}
		pids = append(pids, 1000+i)
	}
	proc := b.TempDir()
	files := map[string]string{"cpuinfo": "processor\t: 0\n", "meminfo": "MemTotal: 1000 kB\n", "1/net/dev": netDevFixture}
	for _, p := range pids {
		files[fmt.Sprintf("%d/net/dev", p)] = netDevFixture
	}
	writeFiles(b, proc, files)
	s, err := New(Options{NodeName: "n", Pods: &fakePods{}, Containers: &fakeContainers{cs: cs}, AuthorizationMode: "AlwaysAllow",
		CertDir: b.TempDir(), CgroupMounts: mounts, ProcDir: proc})
	if err != nil {
		b.Fatal(err)
	}
	req := httptest.NewRequest("GET", "/metrics/cadvisor", nil)
	w := httptest.NewRecorder()
	s.metricsCadvisor(w, req)
	if n := strings.Count(w.Body.String(), "container_memory_working_set_bytes{"); n != 301 {
		b.Fatalf("%d working-set series, want 301", n)
	}
	runScrapes(b, s, req, w.Body.Len())
}

// BenchmarkMetricsCadvisorHostCgroups is BenchmarkMetricsCadvisor on real
// cgroupfs: 100 pod cgroups of two containers each created in this host's
// cpu, cpuacct and memory hierarchies (or the unified one), so that the
// cost of the kernel's cgroup files is in the figure. Needs root.
func BenchmarkMetricsCadvisorHostCgroups(b *testing.B) {
	ms, err := mountinfo.Read()
	if err != nil {
		b.Fatal(err)
	}
	mounts := mountinfo.CgroupMountPoints(ms)
	l := newCgroupLayout(mounts)
	hier := map[string]bool{}
	for _, h := range [][]string{l.cpuacct, l.cpu, l.memory, l.v2} {
		for _, m := range h {
			hier[m] = true
		}
	}
	base := fmt.Sprintf("/nodeagent-bench-%d", os.Getpid())
	var made []string
	b.Cleanup(func() {
		for i := len(made) - 1; i >= 0; i-- {
			_ = os.Remove(made[i])
		}
	})
	mk := func(p string) {
		for m := range hier {
			d := filepath.Join(m, p)
			if err := os.Mkdir(d, 0o755); err != nil {
				b.Skipf("cannot create cgroup %s: %v (needs root)", d, err)
			}
			made = append(made, d)
		}
	}
	mk(base)
	var cs []runtime.Container
	for i := 0; i < 100; i++ {
		pod := fmt.Sprintf("%s/pod%04d", base, i)
		mk(pod)
		for j := 0; j < 2; j++ {
			id := fmt.Sprintf("c%04d%d", i, j)
			mk(pod + "/" + id)
			cs = append(cs, runtime.Container{ID: id, Name: fmt.Sprintf("ctr%d", j), Image: "docker.io/library/busybox:1.36",
				Pod: runtime.PodRef{UID: types.UID(fmt.Sprintf("u%04d", i)), Name: fmt.Sprintf("pod-%d", i), Namespace: "bench"}, State: runtime.StateRunning,
				Pid: uint32(os.Getpid()), CgroupsPath: pod + "/" + id, CreatedAt: time.Unix(1700000000, 0)})
		}
	}
	s, err := New(Options{NodeName: "n", Pods: &fakePods{}, Containers: &fakeContainers{cs: cs}, AuthorizationMode: "AlwaysAllow",
		CertDir: b.TempDir(), CgroupMounts: mounts})
	if err != nil {
		b.Fatal(err)
	}
	req := httptest.NewRequest("GET", "/metrics/cadvisor", nil)
	w := httptest.NewRecorder()
	s.metricsCadvisor(w, req)
	if n := strings.Count(w.Body.String(), "container_memory_working_set_bytes{"); n != 301 {
		b.Fatalf("%d working-set series, want 301", n)
	}
	runScrapes(b, s, req, w.Body.Len())
}

// discardWriter is a ResponseWriter that counts and drops the body, so
// that the benchmark's allocations are the handler's.
type discardWriter struct {
	h http.Header
	n int
}

func (d *discardWriter) Header() http.Header         { return d.h }
func (d *discardWriter) Write(p []byte) (int, error) { d.n += len(p); return len(p), nil }
func (d *discardWriter) WriteHeader(int)             {}

// runScrapes runs b.N scrapes and reports, beside the wall time per
// scrape (which a loaded machine stretches), the process's CPU time per
// scrape (user + system, from getrusage) as cpu-ns/op.
func runScrapes(b *testing.B, s *Server, req *http.Request, size int) {
	b.SetBytes(int64(size))
	b.ReportAllocs()
	var before, after syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &before)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		s.metricsCadvisor(&discardWriter{h: http.Header{}}, req)
	}
	b.StopTimer()
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &after)
	cpu := time.Duration(after.Utime.Nano() + after.Stime.Nano() - before.Utime.Nano() - before.Stime.Nano())
	b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N), "cpu-ns/op")
}

// Concurrent scrapes each get a whole, identical text (the kept buffer is
// handed to one scrape at a time).
func TestMetricsCadvisorConcurrentScrapes(t *testing.T) {
	root := t.TempDir()
	const pod = "/kubepods/podu1"
	e := newTestEnv(t, func(o *Options) { o.CgroupMounts = v1Tree(t, root, pod, "c1"); o.ProcDir = fakeProc(t, 5) })
	e.conts.cs = []runtime.Container{{ID: "c1", Name: "app", Pod: runtime.PodRef{UID: "u1", Name: "web", Namespace: "default"},
		State: runtime.StateRunning, Pid: 5, CgroupsPath: pod + "/c1"}}
	want := e.do("GET", "/metrics/cadvisor", bearer("good-admin")).Body.String()
	done := make(chan string)
	for i := 0; i < 4; i++ {
		go func() {
			w := httptest.NewRecorder()
			e.s.metricsCadvisor(w, httptest.NewRequest("GET", "/metrics/cadvisor", nil))
			done <- w.Body.String()
		}()
	}
	for i := 0; i < 4; i++ {
		if got := <-done; got != want {
			t.Errorf("scrape %d differs:\n%s\nwant\n%s", i, got, want)
		}
	}
}
