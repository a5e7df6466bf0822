package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodeagent/nodeagent/internal/testing/testimage"
)

// Kubelet's predicate admission against the real API server: a pod bound
// to the node whose host port another running pod holds is refused with
// NodePorts, one whose nodeSelector the node's labels do not match with
// NodeAffinity, each with kubelet's message and an event, and the running
// pod is untouched.
func TestPredicateAdmission(t *testing.T) {
	t.Parallel()
	a, _ := readyPodAgent(t, "")
	ctx := context.Background()
	hostNetPod := func(name string) string {
		return podYAML(name, a.node, fmt.Sprintf(`  hostNetwork: true
  containers:
  - name: c
    image: %s
    command: ["sleep", "3600"]
    ports: [{containerPort: 18089, protocol: TCP}]
`, testimage.Ref))
	}
	first, second, picky := a.node+"-ports-a", a.node+"-ports-b", a.node+"-picky"
	kubectl(t, a.env, hostNetPod(first), "apply", "-f", "-")
	running := a.waitPod(ctx, first, 60*time.Second, "phase Running", phaseIs(corev1.PodRunning))
	if p := running.Spec.Containers[0].Ports[0]; p.HostPort != 18089 {
		t.Fatalf("the API server did not default the hostNetwork pod's hostPort: %+v", p)
	}

	kubectl(t, a.env, hostNetPod(second), "apply", "-f", "-")
	kubectl(t, a.env, podYAML(picky, a.node, fmt.Sprintf(`  nodeSelector: {example.com/zone: elsewhere}
  containers:
  - name: c
    image: %s
    command: ["sleep", "3600"]
`, testimage.Ref)), "apply", "-f", "-")
	for _, c := range []struct{ pod, reason, why string }{
		{second, "NodePorts", "Pod was rejected: Predicate NodePorts failed: node(s) didn't have free ports for the requested pod ports"},
		{picky, "NodeAffinity", "Pod was rejected: Predicate NodeAffinity failed: node(s) didn't match Pod's node affinity/selector"},
	} {
		p := a.waitPod(ctx, c.pod, 30*time.Second, "phase Failed", phaseIs(corev1.PodFailed))
		if p.Status.Reason != c.reason || p.Status.Message != c.why {
			t.Errorf("%s: reason %q message %q; want %q %q", c.pod, p.Status.Reason, p.Status.Message, c.reason, c.why)
		}
		a.waitEvent(ctx, "default", "involvedObject.name="+c.pod, "a "+c.reason+" event", func(e corev1.Event) bool {
			return e.Reason == c.reason && strings.Contains(e.Message, "Predicate "+c.reason+" failed")
		})
	}
	p, err := a.env.Admin.CoreV1().Pods("default").Get(ctx, first, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if p.Status.Phase != corev1.PodRunning || len(p.Status.ContainerStatuses) != 1 || p.Status.ContainerStatuses[0].RestartCount != 0 {
		t.Errorf("the pod holding the port was disturbed: phase %s statuses %+v", p.Status.Phase, p.Status.ContainerStatuses)
	}
}
