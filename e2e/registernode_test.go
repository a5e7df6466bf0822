package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodeagent/nodeagent/internal/testing/testenv"
)

// kubelet's registerNode false against the real API server: the agent
// does not create its Node and is not ready while it waits; once an
// administrator creates the Node, the agent reports its status on it
// without adding its own labels.
func TestRegisterNodeFalse(t *testing.T) {
	t.Parallel()
	env := testenv.Cluster(t)
	ctx := context.Background()
	a := newAgent(t, env, agentOpts{noRuntime: true, config: "registerNode: false\n"})
	a.start()
	const waiting = "registerNode is false: waiting for it to be created"
	deadline := time.Now().Add(30 * time.Second)
	for strings.Count(a.out.String(), waiting) < 3 {
		if time.Now().After(deadline) {
			t.Fatalf("the agent did not log %q three times", waiting)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if _, err := env.Admin.CoreV1().Nodes().Get(ctx, a.node, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("Node %s: %v, want not found", a.node, err)
	}
	if code, body := a.get("/readyz"); code == 200 {
		t.Errorf("/readyz = %d %q while the Node does not exist", code, body)
	}

	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: a.node, Labels: map[string]string{"e2e.nodeagent.io/made-by": "admin"}}}
	if _, err := env.Admin.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	n := a.waitNode(ctx, 30*time.Second, "a Ready condition reported by the agent", func(n *corev1.Node) bool {
		return condition(n, corev1.NodeReady) != nil
	})
	if _, ok := n.Labels[corev1.LabelHostname]; ok || n.Labels["e2e.nodeagent.io/made-by"] != "admin" {
		t.Errorf("labels %v: the agent must not set its own with registerNode false", n.Labels)
	}
	if n.Status.NodeInfo.KubeletVersion == "" {
		t.Errorf("status.nodeInfo not reported: %+v", n.Status.NodeInfo)
	}
}
