//go:build linux

package network

import (
	"context"
	"net"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/nodeagent/nodeagent/internal/testing/localcluster"
	"github.com/nodeagent/nodeagent/internal/testing/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// TestAddressFromNodePodCIDR: the local controller manager allocates a
// node's spec.podCIDR from the cluster CIDR, and a pod set up on the
// network written for it gets an address in it.
func TestAddressFromNodePodCIDR(t *testing.T) {
	env := testenv.Cluster(t)
	testenv.CNIPlugins(t)
	ctx := context.Background()
	name := testenv.NodeName(t)
	nodes := env.Admin.CoreV1().Nodes()
	if _, err := nodes.Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = nodes.Delete(context.Background(), name, metav1.DeleteOptions{}) })
	var cidr string
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		n, err := nodes.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		cidr = n.Spec.PodCIDR
		return cidr != "", nil
	})
	if err != nil {
		t.Fatalf("node %s got no pod CIDR: %v", name, err)
	}
	_, sub, err := net.ParseCIDR(cidr)
	_, cluster, _ := net.ParseCIDR(localcluster.ClusterCIDR)
	if err != nil || !cluster.Contains(sub.IP) {
		t.Fatalf("podCIDR %q is not in %s", cidr, localcluster.ClusterCIDR)
	}

	f := &fixture{t: t, cni: testenv.WriteCNIConfig(t, cidr), cache: t.TempDir() + "/cni", nsDir: t.TempDir() + "/netns"}
	n := f.network()
	pod, path := f.pod("cidr")
	res, err := n.SetUp(ctx, pod, path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer n.TearDown(ctx, pod, path)
	if len(res.IPs) != 1 || !sub.Contains(res.IPs[0]) {
		t.Fatalf("pod IPs %v, want one in the node's pod CIDR %s", res.IPs, cidr)
	}
}
