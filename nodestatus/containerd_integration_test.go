package nodestatus_test

import (
	"context"
	"log/slog"
	"slices"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"github.com/nodeagent/nodeagent/internal/kubeclient"
	"github.com/nodeagent/nodeagent/internal/testing/testenv"
	"github.com/nodeagent/nodeagent/internal/testing/testimage"
	"github.com/nodeagent/nodeagent/nodestatus"
	"github.com/nodeagent/nodeagent/runtime"
)

// TestIntegrationContainerdImages wires the Manager to the real containerd
// adapter, as cmd/nodeagent does: the node reports containerd's version, and
// an image imported into containerd reaches status.images within one update
// period.
func TestIntegrationContainerdImages(t *testing.T) {
	env := testenv.Cluster(t)
	ctrd := testimage.StartContainerd(t)
	log := slog.New(slog.NewTextHandler(tWriter{t}, nil))
	rt, err := runtime.New(runtime.Options{Address: ctrd.Address, CgroupParent: ctrd.CgroupParent, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	name := testenv.NodeName(t)
	cfg, _ := env.NodeConfig(t, name)
	t.Cleanup(func() { _ = env.Admin.CoreV1().Nodes().Delete(context.Background(), name, metav1.DeleteOptions{}) })
	const update = time.Second
	m, err := nodestatus.New(nodestatus.Options{
		NodeName:        name,
		Nodes:           mustClient(t, cfg).Nodes(),
		Logger:          log,
		UpdateFrequency: update,
		RootDir:         t.TempDir(),
		ImageFSDir:      ctrd.Dir,
		AgentVersion:    "v0.0.0-test",
		RuntimeVersion: func(ctx context.Context) (string, string, error) {
			v, err := rt.Version(ctx)
			return v.RuntimeName, v.RuntimeVersion, err
		},
		ListImages: func(ctx context.Context) ([]nodestatus.Image, error) {
			imgs, err := rt.ListImages(ctx)
			out := make([]nodestatus.Image, 0, len(imgs))
			for _, im := range imgs {
				out = append(out, nodestatus.Image{ID: im.ID, Names: im.Names, SizeBytes: im.Size})
			}
			return out, err
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if _, err := m.Register(ctx); err != nil {
		t.Fatal(err)
	}
	go m.Run(ctx)
	n, err := env.Admin.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	v, err := rt.Version(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := n.Status.NodeInfo.ContainerRuntimeVersion; got != "containerd://"+v.RuntimeVersion {
		t.Errorf("containerRuntimeVersion %q, want containerd://%s", got, v.RuntimeVersion)
	}
	if len(n.Status.Images) != 0 {
		t.Fatalf("fresh containerd, images %v", n.Status.Images)
	}
	if err := testimage.Import(ctx, rt); err != nil {
		t.Fatal(err)
	}
	imported := time.Now()
	for {
		n, err := env.Admin.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if len(n.Status.Images) == 1 && slices.Contains(n.Status.Images[0].Names, testimage.Ref) {
			t.Logf("imported image reported after %v (size %d)", time.Since(imported), n.Status.Images[0].SizeBytes)
			if c := readyOf(n); c.Status != v1.ConditionTrue {
				t.Errorf("Ready %+v", c)
			}
			return
		}
		if time.Since(imported) > update+5*time.Second {
			t.Fatalf("imported image not reported: %v", n.Status.Images)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func readyOf(n *v1.Node) v1.NodeCondition {
	for _, c := range n.Status.Conditions {
		if c.Type == v1.NodeReady {
			return c
		}
	}
	return v1.NodeCondition{}
}

type tWriter struct{ t *testing.T }

func (w tWriter) Write(p []byte) (int, error) { w.t.Log(string(p)); return len(p), nil }

// mustClient is the agent's own API client for cfg.
func mustClient(t *testing.T, cfg *rest.Config) *kubeclient.Clientset {
	t.Helper()
	c, err := kubeclient.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}
