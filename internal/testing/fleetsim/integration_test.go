package fleetsim

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodeagent/nodeagent/heartbeat"
	"github.com/nodeagent/nodeagent/internal/testing/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// Two simulated nodes against the real control plane: each registers with
// its own node credentials, is Ready, renews its Lease (seen by the
// recorder), and its Node has production size with 50 images.
func TestSimulatedNodesOnTheRealControlPlane(t *testing.T) {
	env := testenv.Cluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	host, err := NewHost(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	f := &Fleet{State: env.State, Host: host, RootDir: t.TempDir(), Images: Images(50)}
	rec := NewRecorder(2, Schedule{Interval: 10 * time.Second, Jitter: 0.04, Slack: time.Second, LeaseDuration: 40 * time.Second})
	prefix := testenv.NodeName(t) + "-"
	w, err := WatchNodes(ctx, env.Admin, prefix)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for i := range 2 {
		name := prefix + string(rune('a'+i))
		names = append(names, name)
		cfg, err := f.RestConfig(name)
		if err != nil {
			t.Fatal(err)
		}
		a, err := f.Start(ctx, Node{Index: i, Name: name}, cfg, rec)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			a.Stop()
			_ = env.Admin.CoreV1().Nodes().Delete(context.Background(), name, metav1.DeleteOptions{})
			_ = env.Admin.CoordinationV1().Leases(heartbeat.Namespace).Delete(context.Background(), name, metav1.DeleteOptions{})
		})
	}
	for {
		healthy, _ := w.Healthy()
		if healthy == 2 && rec.Snapshot().Succeeded >= 2 {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("nodes not Ready with Leases: healthy %d, counts %+v", healthy, rec.Snapshot())
		case <-time.After(200 * time.Millisecond):
		}
	}
	for i, name := range names {
		n, err := env.Admin.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if len(n.Status.Images) != 50 {
			t.Errorf("%s: %d images, want 50", name, len(n.Status.Images))
		}
		if got := n.Status.Addresses[0].Address; got != NodeIP(i) {
			t.Errorf("%s: InternalIP %s, want %s", name, got, NodeIP(i))
		}
		if cpu := n.Status.Capacity.Cpu().Value(); cpu != simCPUs {
			t.Errorf("%s: cpu capacity %d, want %d", name, cpu, simCPUs)
		}
	}
	sz, err := ObjectSizes(ctx, env.Admin, names[0])
	if err != nil {
		t.Fatal(err)
	}
	if sz.Node < 10_000 || sz.Node > 20_000 {
		t.Errorf("Node stored size %d B, want production size 10-20 kB", sz.Node)
	}
	if sz.Lease < 200 || sz.Lease > 1000 {
		t.Errorf("Lease stored size %d B", sz.Lease)
	}
	t.Logf("stored sizes: %+v", sz)
	if tr := w.Transitions(); len(tr) != 0 {
		t.Errorf("false NotReady: %+v", tr)
	}
}
