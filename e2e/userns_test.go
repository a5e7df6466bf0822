package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/nodeagent/nodeagent/internal/testing/testimage"
)

// hostUsers: false on the host's runtime (Debian's containerd 1.6 with
// runc 1.1, which cannot make idmapped mounts): the pod is refused as
// kubelet refuses it, Pending with FailedCreatePodSandBox and kubelet's
// message, and no container. Where the runtime can, the pod runs in a
// user namespace (runtime's TestUserNamespaceAgainstContainerd, in make
// test's containerd 2.x phase with a current runc). About 10 s.
func TestUserNamespaceRefusedByRuntime(t *testing.T) {
	t.Parallel()
	a, rt := readyPodAgent(t, "")
	ctx := context.Background()
	if ok, err := rt.SupportsUserNamespaces(ctx, ""); err != nil || ok {
		t.Fatalf("the host's runtime supports user namespaces (%v, %v): this test expects Debian's containerd 1.6", ok, err)
	}
	name := a.node + "-userns"
	kubectl(t, a.env, podYAML(name, a.node, fmt.Sprintf(`  hostUsers: false
  containers:
  - name: c
    image: %s
    command: ["sleep", "3600"]
`, testimage.Ref)), "apply", "-f", "-")
	want := "Failed to create pod sandbox: can't set `spec.hostUsers: false`, runtime does not support user namespaces"
	a.waitEvent(ctx, "default", "involvedObject.name="+name, "FailedCreatePodSandBox with kubelet's message", func(e corev1.Event) bool {
		return e.Reason == "FailedCreatePodSandBox" && strings.HasPrefix(e.Message, want)
	})
	p := a.waitPod(ctx, name, 10*time.Second, "Pending", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodPending })
	if cs := p.Status.ContainerStatuses; len(cs) == 1 && cs[0].State.Running != nil {
		t.Errorf("the container runs: %+v", cs[0].State)
	}
}
