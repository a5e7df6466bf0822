package nodeapi

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"

	"github.com/nodeagent/nodeagent/runtime"
)

func TestCPURate(t *testing.T) {
	for _, tc := range []struct {
		before, after uint64
		d             time.Duration
		want          uint64
	}{
		{0, 500_000_000, time.Second, 500_000_000}, // half a core
		{1e9, 3e9, 500 * time.Millisecond, 4e9},    // four cores
		{5, 4, time.Second, 0},                     // counter reset
		{0, 1e9, 0, 0},                             // no interval
	} {
		if got := CPURate(tc.before, tc.after, tc.d); got != tc.want {
			t.Errorf("CPURate(%d, %d, %s) = %d, want %d", tc.before, tc.after, tc.d, got, tc.want)
		}
	}
}

func TestStatsSummary(t *testing.T) {
	root := t.TempDir()
	writeFiles(t, root, map[string]string{
		"cpu.stat":                       "usage_usec 9000000\n",
		"nodeagent/u1/cpu.stat":          "usage_usec 3000000\n",
		"nodeagent/u1/memory.current":    "10000\n",
		"nodeagent/u1/c1/cpu.stat":       "usage_usec 2000000\n",
		"nodeagent/u1/c1/memory.current": "8192\n",
		"nodeagent/u1/c1/memory.stat":    "anon 4096\ninactive_file 1024\n",
	})
	logDir := filepath.Join(t.TempDir(), "default_web_u1", "app")
	writeFiles(t, logDir, map[string]string{"0.log": "0123456789"})
	e := newTestEnv(t, func(o *Options) { o.CgroupMounts = []string{root}; o.StatsFsDir = root; o.Clock = nil })
	e.conts.cs = []runtime.Container{{ID: "c1", Name: "app", Pod: runtime.PodRef{UID: "u1", Name: "web", Namespace: "default"},
		State: runtime.StateRunning, CgroupsPath: "/nodeagent/u1/c1", LogPath: filepath.Join(logDir, "0.log"), StartedAt: time.Now()}}
	get := func() statsapi.Summary {
		t.Helper()
		w := e.do("GET", "/stats/summary", bearer("good-admin"))
		var s statsapi.Summary
		if err := json.Unmarshal(w.Body.Bytes(), &s); w.Code != 200 || err != nil {
			t.Fatalf("%d %v %s", w.Code, err, w.Body.String())
		}
		return s
	}
	s := get()
	if s.Node.NodeName != "node-a" || *s.Node.CPU.UsageCoreNanoSeconds != 9e9 || s.Node.CPU.UsageNanoCores == nil || s.Node.Fs == nil || *s.Node.Fs.CapacityBytes == 0 {
		t.Fatalf("node %+v", s.Node)
	}
	if len(s.Pods) != 1 || s.Pods[0].PodRef.UID != "u1" || len(s.Pods[0].Containers) != 1 {
		t.Fatalf("pods %+v", s.Pods)
	}
	p, c := s.Pods[0], s.Pods[0].Containers[0]
	if *p.CPU.UsageCoreNanoSeconds != 3e9 || *p.Memory.UsageBytes != 10000 {
		t.Errorf("pod cpu %+v memory %+v", p.CPU, p.Memory)
	}
	if c.Name != "app" || *c.CPU.UsageCoreNanoSeconds != 2e9 || *c.CPU.UsageNanoCores != 0 ||
		*c.Memory.WorkingSetBytes != 7168 || *c.Memory.RSSBytes != 4096 || *c.Logs.UsedBytes != 10 {
		t.Errorf("container cpu %+v memory %+v logs %+v", c.CPU, c.Memory, c.Logs)
	}
	// A minute of CPU time more between two requests: a rate of at least
	// a core as long as the two requests are less than a minute apart (a
	// single core-second made it a race with a loaded machine's second).
	time.Sleep(50 * time.Millisecond)
	writeFiles(t, root, map[string]string{"nodeagent/u1/c1/cpu.stat": "usage_usec 62000000\n"})
	if r := *get().Pods[0].Containers[0].CPU.UsageNanoCores; r < 1e9 {
		t.Errorf("usageNanoCores %d after 60 core-seconds in well under a minute", r)
	}
	// Samples of containers that are gone are forgotten.
	e.conts.cs = nil
	get()
	e.s.rates.mu.Lock()
	n := len(e.s.rates.last)
	e.s.rates.mu.Unlock()
	if n != 1 {
		t.Errorf("%d CPU samples kept with only the node left", n)
	}
}

func TestStatsSummaryNetworkVolumesImageFs(t *testing.T) {
	root := t.TempDir()
	writeFiles(t, root, map[string]string{
		"cpu.stat":                       "usage_usec 9000000\n",
		"nodeagent/u1/cpu.stat":          "usage_usec 3000000\n",
		"nodeagent/u1/c1/cpu.stat":       "usage_usec 2000000\n",
		"nodeagent/u1/c1/memory.current": "8192\n",
	})
	podsDir := t.TempDir()
	writeFiles(t, podsDir, map[string]string{
		"u1/volumes/empty-dir/cache/a":           strings.Repeat("x", 10000),
		"u1/volumes/empty-dir/cache/sub/b":       "yy",
		"u1/volumes/secret/creds/..2026/token":   "t",
		"u1/volumes/configmap/settings/..2026/k": "v",
		// Set up through the API server: measured by PodVolumeStats, not
		// du (a CSI volume's size is the driver's to say).
		"u1/volumes/kubernetes.io~csi/pv-1/vol_data.json":           "{}",
		"u1/volumes/kubernetes.io~local-volume/pv-local/mount/file": "x",
	})
	imageDir := t.TempDir()
	claimStats := statsapi.VolumeStats{Name: "data", PVCRef: &statsapi.PVCReference{Name: "data-0", Namespace: "default"},
		FsStats: statsapi.FsStats{CapacityBytes: ptr(1 << 20), UsedBytes: ptr(10)}}
	e := newTestEnv(t, func(o *Options) {
		o.CgroupMounts = []string{root}
		o.ProcDir = fakeProc(t, 77)
		o.PodsDir = podsDir
		o.VolumeStatsAggPeriod = 10 * time.Second
		o.ImageFs = func(context.Context) (string, uint64, error) { return imageDir, 123456, nil }
		o.PodVolumeStats = func(_ context.Context, uid string) []statsapi.VolumeStats {
			if uid != "u1" {
				return nil
			}
			return []statsapi.VolumeStats{claimStats}
		}
	})
	e.conts.cs = []runtime.Container{{ID: "c1", Name: "app", Pod: runtime.PodRef{UID: "u1", Name: "web", Namespace: "default"},
		State: runtime.StateRunning, Pid: 77, CgroupsPath: "/nodeagent/u1/c1"}}
	get := func() statsapi.Summary {
		t.Helper()
		w := e.do("GET", "/stats/summary", bearer("good-admin"))
		var s statsapi.Summary
		if err := json.Unmarshal(w.Body.Bytes(), &s); w.Code != 200 || err != nil {
			t.Fatalf("%d %v %s", w.Code, err, w.Body.String())
		}
		return s
	}
	s := get()
	// Network: the pod's from its container's /proc/<pid>/net/dev, eth0 at
	// the top as kubelet; lo and veth* left out, as cAdvisor.
	pn := s.Pods[0].Network
	if pn == nil || pn.Name != "eth0" || *pn.RxBytes != 5000 || *pn.TxBytes != 7000 || *pn.RxErrors != 1 || *pn.TxErrors != 3 || len(pn.Interfaces) != 1 {
		t.Errorf("pod network %+v", pn)
	}
	if nn := s.Node.Network; nn == nil || len(nn.Interfaces) != 1 || nn.Interfaces[0].Name != "ens3" || nn.RxBytes != nil {
		t.Errorf("node network %+v", nn)
	}
	// Runtime filesystems: the image filesystem's size, the images' bytes.
	if rt := s.Node.Runtime; rt == nil || rt.ImageFs == nil || *rt.ImageFs.UsedBytes != 123456 || *rt.ImageFs.CapacityBytes == 0 || rt.ContainerFs == nil || *rt.ContainerFs.CapacityBytes != *rt.ImageFs.CapacityBytes {
		t.Errorf("runtime %+v", rt)
	}
	vols := map[string]statsapi.VolumeStats{}
	for _, v := range s.Pods[0].VolumeStats {
		vols[v.Name] = v
	}
	if d := vols["data"]; d.PVCRef == nil || *d.PVCRef != *claimStats.PVCRef || *d.CapacityBytes != 1<<20 {
		t.Errorf("the claim's volume stats %+v, want PodVolumeStats'", d)
	}
	cache, ok := vols["cache"]
	if !ok || len(vols) != 4 || *cache.UsedBytes < 10000 || *cache.InodesUsed != 4 || *cache.CapacityBytes == 0 || *cache.AvailableBytes == 0 {
		t.Fatalf("volumes %+v", s.Pods[0].VolumeStats)
	}
	// Measured at most once per volumeStatsAggPeriod (10s here), as kubelet.
	writeFiles(t, podsDir, map[string]string{"u1/volumes/empty-dir/cache/c": strings.Repeat("z", 100000)})
	if v := volumeNamed(get(), "cache"); *v.UsedBytes != *cache.UsedBytes {
		t.Errorf("re-measured within the period: %d", *v.UsedBytes)
	}
	e.clock.Step(10 * time.Second)
	if v := volumeNamed(get(), "cache"); *v.UsedBytes < *cache.UsedBytes+100000 || *v.InodesUsed != 5 {
		t.Errorf("after the period: %d bytes %d inodes", *v.UsedBytes, *v.InodesUsed)
	}
	// A negative volumeStatsAggPeriod disables volume stats, as in kubelet.
	e.s.opts.VolumeStatsAggPeriod = -time.Second
	if v := get().Pods[0].VolumeStats; len(v) != 0 {
		t.Errorf("volume stats %+v with volumeStatsAggPeriod < 0, want none", v)
	}
}

func volumeNamed(s statsapi.Summary, name string) statsapi.VolumeStats {
	for _, v := range s.Pods[0].VolumeStats {
		if v.Name == name {
			return v
		}
	}
	return statsapi.VolumeStats{}
}

func TestParsePSI(t *testing.T) {
	st, err := parsePSI([]byte("some avg10=1.50 avg60=0.25 avg300=0.00 total=123456\nfull avg10=0.10 avg60=0.02 avg300=0.01 total=789\n"))
	if err != nil {
		t.Fatal(err)
	}
	want := psiStats{some: psiData{total: 123456, avg10: 1.5, avg60: 0.25}, full: psiData{total: 789, avg10: 0.1, avg60: 0.02, avg300: 0.01}}
	if st != want {
		t.Errorf("got %+v, want %+v", st, want)
	}
	// cpu.pressure before Linux 5.13: no "full" line.
	if st, err := parsePSI([]byte("some avg10=0.00 avg60=0.00 avg300=0.00 total=42\n")); err != nil || st.some.total != 42 || st.full != (psiData{}) {
		t.Errorf("some only: %+v %v", st, err)
	}
	for _, bad := range []string{"some avg10=x total=1\n", "some total\n", "full total=-1\n"} {
		if _, err := parsePSI([]byte(bad)); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
}

// With KubeletPSI (on by default) /stats/summary carries the cgroups'
// pressure as kubelet does: cpu.psi, memory.psi and io.psi for the node,
// pods and containers, zeros where a cgroup has no pressure files; off,
// none of it.
func TestStatsSummaryPSI(t *testing.T) {
	root := t.TempDir()
	writeFiles(t, root, map[string]string{
		"cgroup.controllers":              "cpu io memory\n",
		"cpu.stat":                        "usage_usec 9000000\n",
		"cpu.pressure":                    "some avg10=0.00 avg60=0.00 avg300=0.00 total=700\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=0\n",
		"nodeagent/u1/cpu.stat":           "usage_usec 3000000\n",
		"nodeagent/u1/memory.current":     "10000\n",
		"nodeagent/u1/memory.pressure":    "some avg10=2.00 avg60=1.00 avg300=0.50 total=5000\nfull avg10=1.00 avg60=0.50 avg300=0.25 total=2500\n",
		"nodeagent/u1/c1/cpu.stat":        "usage_usec 2000000\n",
		"nodeagent/u1/c1/memory.current":  "8192\n",
		"nodeagent/u1/c1/cpu.pressure":    "some avg10=3.25 avg60=0.00 avg300=0.00 total=1234567\nfull avg10=1.00 avg60=0.00 avg300=0.00 total=654321\n",
		"nodeagent/u1/c1/memory.pressure": "some avg10=0.00 avg60=0.00 avg300=0.00 total=11\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=10\n",
		"nodeagent/u1/c1/io.pressure":     "some avg10=0.00 avg60=0.00 avg300=0.00 total=99\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=98\n",
	})
	for _, on := range []bool{true, false} {
		e := newTestEnv(t, func(o *Options) { o.CgroupMounts = []string{root}; o.Clock = nil; o.PSI = on })
		e.conts.cs = []runtime.Container{{ID: "c1", Name: "app", Pod: runtime.PodRef{UID: "u1", Name: "web", Namespace: "default"},
			State: runtime.StateRunning, CgroupsPath: "/nodeagent/u1/c1", StartedAt: time.Now()}}
		w := e.do("GET", "/stats/summary", bearer("good-admin"))
		var s statsapi.Summary
		if err := json.Unmarshal(w.Body.Bytes(), &s); w.Code != 200 || err != nil {
			t.Fatalf("%d %v %s", w.Code, err, w.Body.String())
		}
		p, c := s.Pods[0], s.Pods[0].Containers[0]
		if !on {
			if s.Node.CPU.PSI != nil || s.Node.IO != nil || p.CPU.PSI != nil || p.IO != nil || c.CPU.PSI != nil || c.Memory.PSI != nil || c.IO != nil {
				t.Errorf("KubeletPSI off: pressure reported: %s", w.Body.String())
			}
			continue
		}
		if s.Node.CPU.PSI == nil || s.Node.CPU.PSI.Some.Total != 700 || s.Node.IO == nil || s.Node.IO.PSI == nil {
			t.Errorf("node: cpu %+v io %+v", s.Node.CPU, s.Node.IO)
		}
		if p.Memory.PSI == nil || p.Memory.PSI.Full != (statsapi.PSIData{Total: 2500, Avg10: 1, Avg60: 0.5, Avg300: 0.25}) ||
			p.CPU.PSI == nil || *p.CPU.PSI != (statsapi.PSIStats{}) {
			t.Errorf("pod: cpu %+v memory %+v (the pod has no cpu.pressure: zeros, as cAdvisor)", p.CPU.PSI, p.Memory.PSI)
		}
		// Totals in the files' microseconds, as kubelet passes cAdvisor's on.
		if c.CPU.PSI == nil || c.CPU.PSI.Some != (statsapi.PSIData{Total: 1234567, Avg10: 3.25}) || c.CPU.PSI.Full.Total != 654321 ||
			c.Memory.PSI == nil || c.Memory.PSI.Some.Total != 11 || c.IO == nil || c.IO.PSI == nil || c.IO.PSI.Full.Total != 98 {
			t.Errorf("container: %s", w.Body.String())
		}
	}
}
