package e2e

import (
	"context"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/nodeagent/nodeagent/internal/testing/testimage"
	"github.com/nodeagent/nodeagent/runtime"
)

// Issue 32: an exit is reported as soon as the PLEG sees it, but not
// before the container's log holds all the container wrote. A container
// that floods its output and exits at once leaves up to a pipe's worth
// (64 KiB) for the log writer to copy after its exit, and the writer keeps
// an unterminated last line until it knows the line ended; with
// FallbackToLogsOnError the termination message, read from the end of the
// log when the container failed, must still end with the container's last
// line, and be kubelet's 2048 bytes (the log is longer). Ten pods run at
// once, half of them ending on a line without a newline (as the upstream
// NodeConformance spec does: `echo -n DONE; /bin/false`).
func TestTerminationMessageHoldsTheLastLine(t *testing.T) {
	t.Parallel()
	a, _ := readyPodAgent(t, "")
	ctx := context.Background()
	const pods = 10
	name := func(i int) string { return fmt.Sprintf("%s-lastline-%d", a.node, i) }
	lastLine := func(i int) (cmd, want string) {
		end := fmt.Sprintf("the-end-%d", i)
		if i%2 == 1 {
			return "echo -n " + end, end
		}
		return "echo " + end, end + "\n"
	}
	var manifests []string
	for i := range pods {
		cmd, _ := lastLine(i)
		manifests = append(manifests, podYAML(name(i), a.node, fmt.Sprintf(`  hostNetwork: true
  restartPolicy: Never
  terminationGracePeriodSeconds: 1
  containers:
  - name: c
    image: %s
    command: ["sh", "-c", "yes 0123456789abcdefghijklmnopqrstuvwxyz | head -n 20000; %s; exit 1"]
    terminationMessagePolicy: FallbackToLogsOnError
`, testimage.Ref, cmd)))
	}
	kubectl(t, a.env, strings.Join(manifests, "---\n"), "apply", "-f", "-")
	for i := range pods {
		p := a.waitPod(ctx, name(i), 2*time.Minute, "the container's exit", func(p *corev1.Pod) bool {
			cs := containerStatus(p, "c")
			return cs != nil && cs.State.Terminated != nil
		})
		term := containerStatus(p, "c").State.Terminated
		_, want := lastLine(i)
		msg := term.Message
		if term.ExitCode != 1 || !strings.HasSuffix(msg, want) || len(msg) != 2048 {
			t.Errorf("pod %d: exit code %d, message of %d bytes ending %q; want 1, 2048 bytes ending %q",
				i, term.ExitCode, len(msg), msg[max(0, len(msg)-60):], want)
		}
	}
}

// The restart path of issue 32: the container exits while the agent is
// down (SIGKILLed), so nothing has drained or released its task when the
// agent comes back. The restarted agent reports the exit with the log
// complete: the termination message from the log ends with the last,
// unterminated line, which the log writer still holds at that point.
func TestTerminationMessageAfterAgentRestart(t *testing.T) {
	t.Parallel()
	a, rt := readyPodAgent(t, "")
	ctx := context.Background()
	name := a.node + "-restart-lastline"
	kubectl(t, a.env, podYAML(name, a.node, fmt.Sprintf(`  hostNetwork: true
  restartPolicy: Never
  terminationGracePeriodSeconds: 1
  containers:
  - name: c
    image: %s
    command: ["sh", "-c", "sleep 3; yes 0123456789abcdefghijklmnopqrstuvwxyz | head -n 20000; echo -n the-end; exit 1"]
    terminationMessagePolicy: FallbackToLogsOnError
`, testimage.Ref)), "apply", "-f", "-")
	pod := a.waitPod(ctx, name, 2*time.Minute, "running", func(p *corev1.Pod) bool {
		cs := containerStatus(p, "c")
		return cs != nil && cs.State.Running != nil
	})
	if code, _ := a.stop(syscall.SIGKILL); code == 0 {
		t.Fatalf("agent exit code %d after SIGKILL", code)
	}
	// The container exits on its own while no agent runs; its task stays.
	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		cs, err := rt.ListContainers(ctx)
		if err != nil {
			return false, err
		}
		for _, c := range cs {
			if c.Pod.UID == pod.UID && c.Name == "c" {
				return c.State == runtime.StateExited, nil
			}
		}
		return false, nil
	}); err != nil {
		t.Fatalf("the container did not exit while the agent was down: %v", err)
	}
	a.start()
	p := a.waitPod(ctx, name, 2*time.Minute, "the container's exit", func(p *corev1.Pod) bool {
		cs := containerStatus(p, "c")
		return cs != nil && cs.State.Terminated != nil
	})
	term := containerStatus(p, "c").State.Terminated
	if msg := term.Message; term.ExitCode != 1 || !strings.HasSuffix(msg, "the-end") || len(msg) != 2048 {
		t.Errorf("exit code %d, message of %d bytes ending %q; want 1, 2048 bytes ending %q",
			term.ExitCode, len(msg), msg[max(0, len(msg)-60):], "the-end")
	}
}
