package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	corev1 "k8s.io/api/core/v1"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"

	"github.com/nodeagent/nodeagent/internal/testing/testenv"
	"github.com/nodeagent/nodeagent/internal/testing/testimage"
	"github.com/nodeagent/nodeagent/runtime"
)

// cgroupFile reads a number from a cgroup file: the v1 controller's
// hierarchy, else the unified one.
func cgroupFile(t *testing.T, controller, path, v1file, v2file string) uint64 {
	t.Helper()
	for _, p := range []string{"/sys/fs/cgroup/" + controller + path + "/" + v1file, "/sys/fs/cgroup/cpu,cpuacct" + path + "/" + v1file, "/sys/fs/cgroup" + path + "/" + v2file} {
		if b, err := os.ReadFile(p); err == nil {
			n, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
			if err != nil {
				t.Fatalf("%s: %v", p, err)
			}
			return n
		}
	}
	t.Fatalf("cgroup %s: neither %s nor %s", path, v1file, v2file)
	return 0
}

// cgroupStatKey reads one key of a cgroup's cpu.stat (v1 cpu hierarchy or v2).
func cgroupStatKey(t *testing.T, path, key string) uint64 {
	t.Helper()
	for _, p := range []string{"/sys/fs/cgroup/cpu" + path + "/cpu.stat", "/sys/fs/cgroup/cpu,cpuacct" + path + "/cpu.stat", "/sys/fs/cgroup" + path + "/cpu.stat"} {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		for _, l := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(l, key+" "); ok {
				n, _ := strconv.ParseUint(v, 10, 64)
				return n
			}
		}
	}
	t.Fatalf("cgroup %s: no cpu.stat %s", path, key)
	return 0
}

// eth0Counter is one eth0 counter (receive bytes: 0) of /proc/<pid>/net/dev.
func eth0Counter(t *testing.T, pid uint32, field int) uint64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/net/dev", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if name, rest, ok := strings.Cut(l, ":"); ok && strings.TrimSpace(name) == "eth0" {
			n, _ := strconv.ParseUint(strings.Fields(rest)[field], 10, 64)
			return n
		}
	}
	t.Fatalf("no eth0 in /proc/%d/net/dev:\n%s", pid, b)
	return 0
}

// metricValue is the value of the family's series whose labels include
// want; ok is false when there is none.
func metricValue(f *dto.MetricFamily, want map[string]string) (float64, map[string]string, bool) {
	if f == nil {
		return 0, nil, false
	}
next:
	for _, m := range f.Metric {
		got := map[string]string{}
		for _, l := range m.Label {
			got[l.GetName()] = l.GetValue()
		}
		for k, v := range want {
			if got[k] != v {
				continue next
			}
		}
		switch {
		case m.Counter != nil:
			return m.Counter.GetValue(), got, true
		case m.Gauge != nil:
			return m.Gauge.GetValue(), got, true
		}
		return m.GetUntyped().GetValue(), got, true
	}
	return 0, nil, false
}

// /metrics/cadvisor, /metrics/probes, /runningpods/ and /configz through
// the API server's node proxy, as Prometheus (kube-prometheus-stack's
// kubelet cAdvisor job), upstream node tests and kubectl read them: a pod
// on a CNI network that burns CPU under a 200m limit and holds a 4 MB
// string, with a readiness probe. The cAdvisor series carry kubelet's
// labels and their values lie between direct reads of the pod's cgroups
// and network namespace taken around the scrape.
func TestCadvisorProbesRunningPodsConfigz(t *testing.T) {
	t.Parallel()
	bins := testenv.CNIPlugins(t)
	confDir := filepath.Join(t.TempDir(), "net.d")
	a, rt := podAgent(t, fmt.Sprintf("cniConfDir: %s\ncniBinDir: %s\n", confDir, strings.Join(bins, ",")))
	a.start()
	ctx := context.Background()
	n := a.waitNode(ctx, 60*time.Second, "a pod CIDR", func(n *corev1.Node) bool { return n.Spec.PodCIDR != "" })
	testenv.WriteCNIConfig(t, n.Spec.PodCIDR).Install(t, confDir)
	a.waitReady(ctx, 60*time.Second)
	a.waitKubeletPort(ctx)

	name := a.node + "-burn"
	kubectl(t, a.env, podYAML(name, a.node, fmt.Sprintf(`  volumes: [{name: scratch, emptyDir: {}}]
  containers:
  - name: spin
    image: %s
    volumeMounts: [{name: scratch, mountPath: /scratch}]
    command: ["sh", "-c", "head -c 1000000 /dev/zero > /scratch/f; x=$(head -c 4000000 /dev/zero | busybox tr '\\0' a); while true; do :; done"]
    readinessProbe:
      exec: {command: ["true"]}
      periodSeconds: 1
    resources:
      limits: {cpu: 200m, memory: 64Mi}
`, testimage.Ref)), "apply", "-f", "-")
	p := a.waitPod(ctx, name, 90*time.Second, "ready", func(p *corev1.Pod) bool {
		return running(p) && len(p.Status.ContainerStatuses) == 1 && p.Status.ContainerStatuses[0].Ready
	})
	cs, err := rt.ListContainers(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var c runtime.Container
	for _, x := range cs {
		if x.Pod.Name == name && x.State == runtime.StateRunning {
			c = x
		}
	}
	if c.ID == "" || c.Pid == 0 {
		t.Fatalf("no running container of %s in %+v", name, cs)
	}
	cg := runtime.CgroupfsPath(c.CgroupsPath)
	time.Sleep(3 * time.Second) // some CPU time and CFS periods

	raw := func(path string) string {
		t.Helper()
		out, err := kubectlOut(t, a.env, "get", "--raw", "/api/v1/nodes/"+a.node+"/proxy"+path)
		if err != nil {
			t.Fatalf("%s: %v\n%.2000s", path, err, out)
		}
		return out
	}
	cpuBefore := cgroupCPU(t, cg)
	periodsBefore := cgroupStatKey(t, cg, "nr_periods")
	rxBefore := eth0Counter(t, c.Pid, 0)
	memBefore := cgroupFile(t, "memory", cg, "memory.usage_in_bytes", "memory.current")
	scrapeStart := time.Now()
	out := raw("/metrics/cadvisor")
	scrapeTook := time.Since(scrapeStart)
	cpuAfter := cgroupCPU(t, cg)
	periodsAfter := cgroupStatKey(t, cg, "nr_periods")
	rxAfter := eth0Counter(t, c.Pid, 0)
	memAfter := cgroupFile(t, "memory", cg, "memory.usage_in_bytes", "memory.current")
	t.Logf("scrape through the API server: %s, %d bytes", scrapeTook, len(out))

	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(strings.NewReader(out))
	if err != nil {
		t.Fatalf("not Prometheus text: %v\n%.3000s", err, out)
	}
	ctrL := map[string]string{"container": "spin", "pod": name, "namespace": "default", "id": cg, "name": c.ID}
	podL := map[string]string{"container": "", "pod": name, "namespace": "default", "id": filepath.Dir(cg), "name": "", "image": ""}
	get := func(family string, labels map[string]string) float64 {
		t.Helper()
		v, _, ok := metricValue(fams[family], labels)
		if !ok {
			t.Fatalf("no %s%v in the scrape", family, labels)
		}
		return v
	}
	with := func(l map[string]string, k, v string) map[string]string {
		o := map[string]string{k: v}
		for a, b := range l {
			o[a] = b
		}
		return o
	}
	// kubelet's label set on a container series: image is the container's.
	if _, labels, ok := metricValue(fams["container_memory_working_set_bytes"], ctrL); !ok || labels["image"] == "" || len(labels) != 6 {
		t.Errorf("container labels %v", labels)
	}
	cpu := get("container_cpu_usage_seconds_total", with(ctrL, "cpu", "total"))
	if ns := uint64(cpu * 1e9); ns+1000 < cpuBefore || ns > cpuAfter+1000 {
		t.Errorf("container_cpu_usage_seconds_total %.6f s outside the cgroup's %d..%d ns", cpu, cpuBefore, cpuAfter)
	}
	if u, s := get("container_cpu_user_seconds_total", ctrL), get("container_cpu_system_seconds_total", ctrL); u+s < 0.5*cpu || u+s > 1.1*cpu+0.05 {
		t.Errorf("user %.3f + system %.3f s against usage %.3f s", u, s, cpu)
	}
	if pc := get("container_cpu_usage_seconds_total", with(podL, "cpu", "total")); pc < cpu {
		t.Errorf("pod CPU %.3f below its container's %.3f", pc, cpu)
	}
	if periods := uint64(get("container_cpu_cfs_periods_total", ctrL)); periods < periodsBefore || periods > periodsAfter || periods == 0 {
		t.Errorf("container_cpu_cfs_periods_total %d outside the cgroup's %d..%d", periods, periodsBefore, periodsAfter)
	}
	if th := get("container_cpu_cfs_throttled_periods_total", ctrL); th == 0 {
		t.Error("a busy loop under a 200m quota was never throttled")
	}
	if q, per := get("container_spec_cpu_quota", ctrL), get("container_spec_cpu_period", ctrL); q != 20000 || per != 100000 {
		t.Errorf("spec quota %v period %v, want 20000/100000 (200m)", q, per)
	}
	if l := get("container_spec_memory_limit_bytes", ctrL); l != 64<<20 {
		t.Errorf("container_spec_memory_limit_bytes %v", l)
	}
	// Memory: the scrape's usage lies within 1 MiB of the cgroup's around
	// it (a spinning shell's memory barely moves); the working set holds
	// the 4 MB string.
	lo, hi := min(memBefore, memAfter), max(memBefore, memAfter)
	if u := uint64(get("container_memory_usage_bytes", ctrL)); u+1<<20 < lo || u > hi+1<<20 {
		t.Errorf("container_memory_usage_bytes %d, cgroup %d..%d", u, memBefore, memAfter)
	}
	if ws := get("container_memory_working_set_bytes", ctrL); ws < 4e6 || ws > 64<<20 {
		t.Errorf("container_memory_working_set_bytes %.0f; it holds a 4 MB string under 64Mi", ws)
	}
	if rss := get("container_memory_rss", ctrL); rss < 4e6 {
		t.Errorf("container_memory_rss %.0f", rss)
	}
	for _, f := range []string{"container_memory_cache", "container_memory_swap", "container_memory_failcnt", "container_memory_max_usage_bytes", "container_oom_events_total", "container_last_seen", "container_start_time_seconds"} {
		get(f, ctrL)
	}
	if oom := get("container_oom_events_total", ctrL); oom != 0 {
		t.Errorf("container_oom_events_total %v", oom)
	}
	// Network: the pod's eth0 (the CNI bridge's veth peer), between two
	// reads of its network namespace's counters.
	if rx := uint64(get("container_network_receive_bytes_total", with(podL, "interface", "eth0"))); rx < rxBefore || rx > rxAfter {
		t.Errorf("container_network_receive_bytes_total %d outside %d..%d", rx, rxBefore, rxAfter)
	}
	for _, f := range []string{"container_network_receive_packets_total", "container_network_receive_errors_total", "container_network_receive_packets_dropped_total",
		"container_network_transmit_bytes_total", "container_network_transmit_packets_total", "container_network_transmit_errors_total", "container_network_transmit_packets_dropped_total"} {
		get(f, with(podL, "interface", "eth0"))
	}
	// The root cgroup and the machine.
	if v := get("container_cpu_usage_seconds_total", map[string]string{"id": "/", "cpu": "total"}); v < cpu {
		t.Errorf("root CPU %.1f below the container's", v)
	}
	if v := get("container_memory_working_set_bytes", map[string]string{"id": "/"}); v < 1<<20 {
		t.Errorf("root working set %.0f", v)
	}
	if v := get("machine_cpu_cores", nil); v < 1 {
		t.Errorf("machine_cpu_cores %v", v)
	}
	if v := get("machine_memory_bytes", nil); v < 1<<30 {
		t.Errorf("machine_memory_bytes %v", v)
	}
	if v := get("container_scrape_error", nil); v != 0 {
		t.Error("container_scrape_error 1")
	}
	if h := fams["container_cpu_usage_seconds_total"].GetHelp(); h != "Cumulative cpu time consumed in seconds." || fams["container_cpu_usage_seconds_total"].GetType() != dto.MetricType_COUNTER {
		t.Errorf("help %q type %v", h, fams["container_cpu_usage_seconds_total"].GetType())
	}

	// /metrics/probes: the readiness probe ran and succeeded, by kubelet's labels.
	fams, err = parser.TextToMetricFamilies(strings.NewReader(raw("/metrics/probes")))
	if err != nil {
		t.Fatal(err)
	}
	pl := map[string]string{"probe_type": "Readiness", "result": "successful", "container": "spin", "pod": name, "namespace": "default", "pod_uid": string(p.UID)}
	if v, _, ok := metricValue(fams["prober_probe_total"], pl); !ok || v < 1 {
		t.Errorf("prober_probe_total%v = %v (found %v)", pl, v, ok)
	}
	if _, _, ok := metricValue(fams["process_start_time_seconds"], nil); !ok {
		t.Error("no process_start_time_seconds on /metrics/probes")
	}

	// /runningpods/: the pod with its running container, from the runtime.
	var list corev1.PodList
	if err := json.Unmarshal([]byte(raw("/runningpods/")), &list); err != nil {
		t.Fatal(err)
	}
	found := false
	for _, rp := range list.Items {
		if rp.UID == p.UID && rp.Name == name && rp.Namespace == "default" && len(rp.Spec.Containers) == 1 && rp.Spec.Containers[0].Name == "spin" {
			found = true
		}
	}
	if !found {
		t.Errorf("pod %s (%s) not in /runningpods/: %+v", name, p.UID, list.Items)
	}

	// /stats/summary: the pod's network (eth0 between two reads of its
	// namespace's counters), its emptyDir's usage (a 1 MB file: du's
	// blocks, the directory and the file), the runtime's image filesystem.
	rxBefore = eth0Counter(t, c.Pid, 0)
	sumOut := raw("/stats/summary")
	rxAfter = eth0Counter(t, c.Pid, 0)
	var sum statsapi.Summary
	if err := json.Unmarshal([]byte(sumOut), &sum); err != nil {
		t.Fatalf("summary: %v\n%.2000s", err, sumOut)
	}
	var ps *statsapi.PodStats
	for i := range sum.Pods {
		if sum.Pods[i].PodRef.UID == string(p.UID) {
			ps = &sum.Pods[i]
		}
	}
	if ps == nil {
		t.Fatalf("pod %s not in the summary:\n%.2000s", name, sumOut)
	}
	if ps.Network == nil || ps.Network.Name != "eth0" || ps.Network.RxBytes == nil || *ps.Network.RxBytes < rxBefore || *ps.Network.RxBytes > rxAfter {
		t.Errorf("pod network %+v, eth0 rx %d..%d", ps.Network, rxBefore, rxAfter)
	}
	var scratch *statsapi.VolumeStats
	for i := range ps.VolumeStats {
		if ps.VolumeStats[i].Name == "scratch" {
			scratch = &ps.VolumeStats[i]
		}
	}
	if scratch == nil || scratch.UsedBytes == nil || *scratch.UsedBytes < 1e6 || *scratch.UsedBytes > 1.1e6 || *scratch.InodesUsed != 2 || *scratch.CapacityBytes == 0 {
		t.Errorf("emptyDir scratch stats %+v (volumes %+v)", scratch, ps.VolumeStats)
	}
	if rs := sum.Node.Runtime; rs == nil || rs.ImageFs == nil || *rs.ImageFs.CapacityBytes == 0 || *rs.ImageFs.UsedBytes == 0 || rs.ContainerFs == nil {
		t.Errorf("runtime filesystems %+v", sum.Node.Runtime)
	}
	if sum.Node.Network == nil || len(sum.Node.Network.Interfaces) == 0 {
		t.Errorf("node network %+v", sum.Node.Network)
	}

	// /configz: {"kubeletconfig": ...} with the node API's port.
	var cz struct {
		KubeletConfig map[string]any `json:"kubeletconfig"`
	}
	if err := json.Unmarshal([]byte(raw("/configz")), &cz); err != nil || cz.KubeletConfig["port"] == nil {
		t.Errorf("configz: %v %v", err, cz)
	}
}
