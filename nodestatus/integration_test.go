package nodestatus

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/nodeagent/nodeagent/internal/kubeclient"
	"github.com/nodeagent/nodeagent/internal/testing/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// fakeRuntime stands in for the containerd adapter (wired by cmd/nodeagent;
// e2e covers the real one).
type fakeRuntime struct {
	mu     sync.Mutex
	images []Image
}

func (r *fakeRuntime) version(context.Context) (string, string, error) {
	return "containerd", "1.6.20", nil
}
func (r *fakeRuntime) list(context.Context) ([]Image, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Image(nil), r.images...), nil
}
func (r *fakeRuntime) add(im Image) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.images = append(r.images, im)
}

// integrationManager returns a Manager with node credentials for a fresh node name.
func integrationManager(t *testing.T, mutate func(*Options)) (*Manager, *testenv.Env, string, *fakeRuntime) {
	t.Helper()
	env := testenv.Cluster(t)
	name := testenv.NodeName(t)
	cfg, _ := env.NodeConfig(t, name)
	client, err := kubeclient.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	rt := &fakeRuntime{images: []Image{
		{ID: "sha256:pause", Names: []string{"registry.k8s.io/pause:3.10"}, SizeBytes: 320 << 10},
		{ID: "sha256:busybox", Names: []string{"docker.io/library/busybox:1.36"}, SizeBytes: 2 << 20},
	}}
	o := Options{
		NodeName:       name,
		Nodes:          client.Nodes(),
		Logger:         slog.New(slog.NewTextHandler(testWriter{t}, nil)),
		RootDir:        t.TempDir(),
		AgentVersion:   "v0.0.0-test",
		Labels:         map[string]string{"node.kubernetes.io/pool": "test"},
		RuntimeVersion: rt.version,
		ListImages:     rt.list,
		RuntimeHealthy: func() error { return nil },
		PLEGHealthy:    func() error { return nil },
		Rand:           func() float64 { return 0.5 },
	}
	if mutate != nil {
		mutate(&o)
	}
	m, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = env.Admin.CoreV1().Nodes().Delete(context.Background(), name, metav1.DeleteOptions{})
	})
	return m, env, name, rt
}

func TestIntegrationReadyNodeReportsOnChangeOnly(t *testing.T) {
	const update, report = time.Second, 6 * time.Second
	m, env, name, rt := integrationManager(t, func(o *Options) {
		o.UpdateFrequency, o.ReportFrequency = update, report
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if _, err := m.Register(ctx); err != nil {
		t.Fatal(err)
	}
	n, err := env.Admin.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// A Ready node with every field filled.
	if c := condition(n, v1.NodeReady); c.Status != v1.ConditionTrue || c.Reason != "KubeletReady" {
		t.Errorf("Ready %+v", c)
	}
	for _, typ := range []v1.NodeConditionType{v1.NodeMemoryPressure, v1.NodeDiskPressure, v1.NodePIDPressure} {
		if c := condition(n, typ); c.Status != v1.ConditionFalse || c.Reason == "" {
			t.Errorf("%s %+v", typ, c)
		}
	}
	if len(n.Status.Addresses) != 2 || n.Status.Addresses[0].Type != v1.NodeInternalIP || n.Status.Addresses[1].Address != name {
		t.Errorf("addresses %v", n.Status.Addresses)
	}
	for _, r := range []v1.ResourceName{"cpu", "memory", "pods", "ephemeral-storage"} {
		c, a := n.Status.Capacity[r], n.Status.Allocatable[r]
		if c.Sign() <= 0 || a.Sign() <= 0 || a.Cmp(c) > 0 {
			t.Errorf("%s: capacity %s allocatable %s", r, c.String(), a.String())
		}
	}
	ni := n.Status.NodeInfo
	for field, v := range map[string]string{"machineID": ni.MachineID, "bootID": ni.BootID, "kernelVersion": ni.KernelVersion,
		"osImage": ni.OSImage, "containerRuntimeVersion": ni.ContainerRuntimeVersion, "kubeletVersion": ni.KubeletVersion,
		"operatingSystem": ni.OperatingSystem, "architecture": ni.Architecture} {
		if v == "" {
			t.Errorf("nodeInfo.%s empty", field)
		}
	}
	if ni.ContainerRuntimeVersion != "containerd://1.6.20" {
		t.Errorf("containerRuntimeVersion %q", ni.ContainerRuntimeVersion)
	}
	if len(n.Status.Images) != 2 || n.Status.Images[0].Names[0] != "docker.io/library/busybox:1.36" {
		t.Errorf("images %v", n.Status.Images)
	}
	if n.Labels["kubernetes.io/hostname"] != name || n.Labels["node.kubernetes.io/pool"] != "test" {
		t.Errorf("labels %v", n.Labels)
	}

	// With nothing changing, the Node is written about once per report period.
	w, err := env.Admin.CoreV1().Nodes().Watch(ctx, metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("metadata.name", name).String(), ResourceVersion: n.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	go m.Run(ctx)
	const window = 20 * time.Second
	// Count our writes: only the agent stamps lastHeartbeatTime (the
	// controller manager also writes the Node when it first sees it).
	var writes []time.Time
	lastHeartbeat := latestHeartbeat(n)
	timeout := time.After(window)
collect:
	for {
		select {
		case ev := <-w.ResultChan():
			if ev.Type != watch.Modified {
				continue
			}
			n := ev.Object.(*v1.Node)
			var mgrs []string
			for _, f := range n.ManagedFields {
				mgrs = append(mgrs, fmt.Sprintf("%s/%s@%s", f.Manager, f.Subresource, f.Time.Format("15:04:05")))
			}
			t.Logf("node modified (rv %s) managers %v", n.ResourceVersion, mgrs)
			if hb := latestHeartbeat(n); !hb.Equal(lastHeartbeat) {
				writes = append(writes, time.Now())
				lastHeartbeat = hb
			}
		case <-timeout:
			break collect
		}
	}
	if max := int(window/report) + 1; len(writes) < 2 || len(writes) > max {
		t.Errorf("%d writes in %v with reportFrequency %v, want 2..%d", len(writes), window, report, max)
	}
	for i := 1; i < len(writes); i++ {
		if gap := writes[i].Sub(writes[i-1]); gap < report-update {
			t.Errorf("writes %v apart; reportFrequency is %v", gap, report)
		}
	}

	// A real change reaches the Node within one update period.
	rt.add(Image{ID: "sha256:new", Names: []string{"example.com/new:1"}, SizeBytes: 10 << 20})
	added := time.Now()
	deadline := time.After(update + 3*time.Second)
	for {
		select {
		case ev := <-w.ResultChan():
			if node, ok := ev.Object.(*v1.Node); ok && len(node.Status.Images) == 3 {
				if node.Status.Images[0].Names[0] != "example.com/new:1" {
					t.Errorf("images %v", node.Status.Images)
				}
				t.Logf("new image reported after %v", time.Since(added))
				return
			}
		case <-deadline:
			t.Fatal("new image not reported within one update period")
		}
	}
}

func TestIntegrationMemoryPressure(t *testing.T) {
	mi, err := (&Host{}).Meminfo()
	if err != nil {
		t.Fatal(err)
	}
	threshold := fmt.Sprint(mi.Total + 1<<30) // above all memory: always crossed
	m, env, name, _ := integrationManager(t, func(o *Options) {
		o.EvictionHard = map[string]string{"memory.available": threshold}
	})
	ctx := context.Background()
	if _, err := m.Register(ctx); err != nil {
		t.Fatal(err)
	}
	n, err := env.Admin.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	c := condition(n, v1.NodeMemoryPressure)
	if c.Status != v1.ConditionTrue || c.Reason != "KubeletHasInsufficientMemory" || c.Message != "kubelet has insufficient memory available" {
		t.Errorf("MemoryPressure %+v", c)
	}
	if a := n.Status.Allocatable[v1.ResourceMemory]; a.Sign() != 0 {
		t.Errorf("allocatable memory %s, want 0 (threshold above capacity)", a.String())
	}
}

func TestIntegrationNodeCredentials(t *testing.T) {
	m, env, name, _ := integrationManager(t, nil)
	ctx := context.Background()
	if _, err := m.Register(ctx); err != nil {
		t.Fatal(err)
	}
	// A restarted agent with another label reconciles it (allowed by NodeRestriction).
	cfg, _ := env.NodeConfig(t, name)
	client, err := kubeclient.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	m2, err := New(Options{NodeName: name, Nodes: client.Nodes(), RootDir: t.TempDir(), Labels: map[string]string{"node.kubernetes.io/pool": "other"},
		Logger: slog.New(slog.NewTextHandler(testWriter{t}, nil))})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m2.Register(ctx); err != nil {
		t.Fatal(err)
	}
	if err := m2.SyncOnce(ctx); err != nil {
		t.Fatal(err)
	}
	n, err := env.Admin.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if n.Labels["node.kubernetes.io/pool"] != "other" {
		t.Errorf("labels %v", n.Labels)
	}
	// Another node's credentials cannot register this node.
	other := testenv.NodeName(t)
	ocfg, _ := env.NodeConfig(t, other)
	oclient, err := kubeclient.NewForConfig(ocfg)
	if err != nil {
		t.Fatal(err)
	}
	m3, err := New(Options{NodeName: name + "-x", Nodes: oclient.Nodes(), RootDir: t.TempDir(),
		Logger: slog.New(slog.NewTextHandler(testWriter{t}, nil))})
	if err != nil {
		t.Fatal(err)
	}
	tctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	if _, err := m3.Register(tctx); err == nil {
		t.Error("registering another node's name with node credentials must fail")
	} else {
		t.Logf("as expected: %v", err)
	}
}
