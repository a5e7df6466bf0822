package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/nodeagent/nodeagent/internal/testing/testenv"
	"github.com/nodeagent/nodeagent/internal/testing/testimage"
)

// `kubectl debug -i --target` through the real API server: the
// ephemeral container is added to the running pod, started once, sees the
// target container's processes (its PID namespace), takes input, and is
// reported in ephemeralContainerStatuses; it is not restarted after it
// exits.
func TestKubectlDebugEphemeral(t *testing.T) {
	t.Parallel()
	a, _ := readyPodAgent(t, "")
	ctx := context.Background()
	a.waitKubeletPort(ctx)
	name := a.node + "-debug"
	kubectl(t, a.env, podYAML(name, a.node, fmt.Sprintf(`  containers:
  - name: app
    image: %s
    command: ["sleep", "3601"]
`, testimage.Ref)), "apply", "-f", "-")
	a.waitPod(ctx, name, 60*time.Second, "running", running)
	root, _ := testenv.RepoRoot()
	cctx, cancel := context.WithTimeout(ctx, 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(cctx, filepath.Join(root, "_output", "bin", "kubectl"), "--kubeconfig", a.env.AdminKubeconfig,
		"debug", "-i", name, "--image="+testimage.Ref, "--target=app", "-c", "debugger", "--", "sh")
	cmd.Stdin = strings.NewReader("ps -o pid,args; echo marker-$((40+2))\nexit 3\n")
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	if ee, ok := err.(*exec.ExitError); err != nil && !ok {
		t.Fatalf("kubectl debug: %v", err)
	} else if ok && ee.ExitCode() != 3 {
		t.Logf("kubectl debug exit code %d", ee.ExitCode())
	}
	if !strings.Contains(out.String(), "sleep 3601") || !strings.Contains(out.String(), "marker-42") {
		t.Fatalf("kubectl debug: stdout %q (want the target's sleep 3601 and marker-42), stderr %q", out.String(), errb.String())
	}
	p := a.waitPod(ctx, name, 30*time.Second, "debugger terminated", func(p *corev1.Pod) bool {
		for _, cs := range p.Status.EphemeralContainerStatuses {
			if cs.Name == "debugger" && cs.State.Terminated != nil {
				return true
			}
		}
		return false
	})
	cs := p.Status.EphemeralContainerStatuses[0]
	if cs.State.Terminated.ExitCode != 3 || cs.Ready || cs.RestartCount != 0 || !strings.HasPrefix(cs.ContainerID, "containerd://") {
		t.Errorf("ephemeral status %+v", cs)
	}
	// Not restarted (restartPolicy Always applies to app containers only),
	// and the pod stays Running and Ready.
	time.Sleep(2 * time.Second)
	p = a.waitPod(ctx, name, 10*time.Second, "running", running)
	if cs := p.Status.EphemeralContainerStatuses[0]; cs.State.Terminated == nil || cs.RestartCount != 0 {
		t.Errorf("ephemeral container restarted: %+v", cs)
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady && c.Status != corev1.ConditionTrue {
			t.Errorf("pod not ready after the debug session: %+v", c)
		}
	}
}
