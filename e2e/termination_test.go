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
