package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/nodeagent/nodeagent/internal/localcluster"
	"github.com/nodeagent/nodeagent/internal/testenv"
)

// kubelet's Ready message without a usable CNI configuration.
const networkNotReady = "container runtime network not ready: NetworkReady=false reason:NetworkPluginNotReady message:Network plugin returns error: cni plugin not initialized"

// TestReadyFollowsCNIConfiguration: a node whose CNI configuration
// directory is empty registers NotReady with kubelet's message; the
// controller manager gives it a pod CIDR; the network a CNI DaemonSet would
// install over that CIDR makes it Ready; removing it makes it NotReady
// again, restoring it Ready.
func TestReadyFollowsCNIConfiguration(t *testing.T) {
	env := testenv.Cluster(t)
	bins := testenv.CNIPlugins(t)
	confDir := filepath.Join(t.TempDir(), "net.d")
	a := newAgent(t, env, agentOpts{config: fmt.Sprintf("cniConfDir: %s\ncniBinDir: %s\n", confDir, strings.Join(bins, ","))})
	a.start()
	ctx := context.Background()

	n := a.waitNode(ctx, 60*time.Second, "Ready=False with NetworkPluginNotReady", func(n *corev1.Node) bool {
		c := condition(n, corev1.NodeReady)
		return c != nil && c.Status == corev1.ConditionFalse && c.Message == networkNotReady
	})
	if c := condition(n, corev1.NodeReady); c.Reason != "KubeletNotReady" {
		t.Fatalf("Ready %+v", c)
	}
	n = a.waitNode(ctx, 60*time.Second, "a pod CIDR", func(n *corev1.Node) bool { return n.Spec.PodCIDR != "" })
	if !strings.HasPrefix(n.Spec.PodCIDR, strings.TrimSuffix(localcluster.ClusterCIDR, "0.0/16")) {
		t.Fatalf("podCIDR %s is not in the cluster CIDR %s", n.Spec.PodCIDR, localcluster.ClusterCIDR)
	}

	// What a CNI DaemonSet does: write the network into the directory.
	cni := testenv.WriteCNIConfig(t, n.Spec.PodCIDR)
	conf, err := os.ReadFile(cni.File)
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(confDir, filepath.Base(cni.File))
	if err := os.MkdirAll(confDir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file, conf, 0o644); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	a.waitReady(ctx, 60*time.Second)
	t.Logf("Ready %v after the CNI configuration was written", time.Since(start).Round(time.Millisecond))

	if err := os.Remove(file); err != nil {
		t.Fatal(err)
	}
	a.waitNode(ctx, 60*time.Second, "NotReady after the configuration was removed", func(n *corev1.Node) bool {
		c := condition(n, corev1.NodeReady)
		return c != nil && c.Status == corev1.ConditionFalse && c.Message == networkNotReady
	})
	if err := os.WriteFile(file, conf, 0o644); err != nil {
		t.Fatal(err)
	}
	a.waitReady(ctx, 60*time.Second)
	if !a.out.contains("CNI network configuration loaded") {
		t.Errorf("the agent's log does not say which configuration it loaded:\n%s", a.out.String())
	}
}
