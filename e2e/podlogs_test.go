package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/nodeagent/nodeagent/crilog"
	"github.com/nodeagent/nodeagent/internal/testing/testimage"
)

// shipperName is the file name log shippers parse in /var/log/containers
// (Fluent Bit's kubernetes filter, fluentd's kubernetes_metadata).
var shipperName = regexp.MustCompile(`^(?P<pod>[a-z0-9](?:[-a-z0-9]*[a-z0-9])?(?:\.[a-z0-9](?:[-a-z0-9]*[a-z0-9])?)*)_(?P<ns>[^_]+)_(?P<container>.+)-(?P<id>[a-z0-9]{64})\.log$`)

// containerID is the runtime's ID in a container status.
func containerID(cs corev1.ContainerStatus) string {
	_, id, _ := strings.Cut(cs.ContainerID, "://")
	return id
}

// waitFile polls until read(path) satisfies cond and returns what it read.
func waitFile(t *testing.T, path string, timeout time.Duration, what string, cond func(string) bool) string {
	t.Helper()
	var got string
	err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		b, _ := os.ReadFile(path)
		got = string(b)
		return cond(got), nil
	})
	if err != nil {
		t.Fatalf("%s: %s not seen within %s; it holds %d bytes", path, what, timeout, len(got))
	}
	return got
}

func gone(p string) bool { _, err := os.Lstat(p); return os.IsNotExist(err) }

// A log shipper's view: a pod's lines are readable at the
// containerLogsDir symlink (kubelet's /var/log/containers name) while it
// runs and after its log rotated (small containerLogMaxSize); kubectl logs
// reads the same file; the symlink and the pod's log directory go with
// the pod.
func TestLogShipperView(t *testing.T) {
	t.Parallel()
	a, _ := readyPodAgent(t, "containerLogMaxSize: 16Ki\ncontainerLogMaxFiles: 2\n")
	ctx := context.Background()
	a.waitKubeletPort(ctx)
	name := a.node + "-ship"
	// "first", then (on a touch of /tmp/go) ~100 kB of numbered lines,
	// several rotations at 16Ki, then "last" and sleep.
	kubectl(t, a.env, podYAML(name, a.node, fmt.Sprintf(`  containers:
  - name: app
    image: %s
    command: ["sh", "-c", "echo first; while [ ! -e /tmp/go ]; do sleep 0.1; done; awk 'BEGIN { for (i = 0; i < 3000; i++) printf \"line %%06d\\n\", i }'; echo last; exec sleep 3600"]
`, testimage.Ref)), "apply", "-f", "-")
	p := a.waitPod(ctx, name, 60*time.Second, "running", running)
	id := containerID(p.Status.ContainerStatuses[0])
	link := crilog.SymlinkPath(a.containerLogsDir(), name, p.Namespace, "app", id)
	m := shipperName.FindStringSubmatch(filepath.Base(link))
	if m == nil || m[1] != name || m[2] != p.Namespace || m[3] != "app" || m[4] != id {
		t.Fatalf("symlink name %q does not parse as a shipper parses it: %q", filepath.Base(link), m)
	}
	waitFile(t, link, 20*time.Second, `"first" through the symlink`, func(s string) bool { return strings.Contains(s, " stdout F first\n") })
	if target, err := os.Readlink(link); err != nil || target != a.logPath(p, "app", 0) {
		t.Fatalf("symlink -> %q (%v), want %q", target, err, a.logPath(p, "app", 0))
	}

	kubectl(t, a.env, "", "exec", name, "--", "touch", "/tmp/go")
	live := waitFile(t, link, 30*time.Second, `"last" through the symlink`, func(s string) bool { return strings.Contains(s, " stdout F last\n") })
	if strings.Contains(live, " first\n") {
		t.Errorf("the file behind the symlink still has the first line: no rotation")
	}
	if rotated, _ := crilog.RotatedFiles(a.logPath(p, "app", 0)); len(rotated) != 1 {
		t.Errorf("rotated files %q, want 1 (containerLogMaxFiles 2)", rotated)
	}
	if out, err := kubectlOut(t, a.env, "logs", name, "--tail=2"); err != nil || out != "line 002999\nlast\n" {
		t.Errorf("kubectl logs --tail=2: %v %q", err, out)
	}
	// Only this agent's containers are in its symlink directory.
	es, _ := os.ReadDir(a.containerLogsDir())
	if len(es) != 1 || es[0].Name() != filepath.Base(link) {
		t.Errorf("symlink directory holds %v, want only %s", es, filepath.Base(link))
	}

	zero := int64(0)
	if err := a.env.Admin.CoreV1().Pods(p.Namespace).Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
		t.Fatal(err)
	}
	podDir := filepath.Dir(filepath.Dir(a.logPath(p, "app", 0)))
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		return gone(link) && gone(podDir), nil
	})
	if err != nil {
		t.Fatalf("after the pod's deletion: symlink gone %v, log directory gone %v", gone(link), gone(podDir))
	}
}

// An agent upgraded from the rootDir/logs layout: a container it started
// there keeps its log (the logger writes where it was started), gets a
// symlink to it, and kubectl logs reads it; its next attempt logs in
// podLogsDir and --previous reads the old one; both directories go with
// the pod. The old layout is made by this agent with podLogsDir set to
// rootDir/logs and no symlinks (a drop-in the upgrade removes).
func TestLogsAcrossUpgradeFromRootDirLayout(t *testing.T) {
	t.Parallel()
	a, _ := podAgent(t, "")
	old := filepath.Join(a.dir, "old-layout")
	dropIn := filepath.Join(a.configDir, "10-old-layout.conf")
	if err := os.WriteFile(dropIn, []byte(fmt.Sprintf("apiVersion: config.nodeagent.io/v1alpha1\nkind: NodeAgentConfiguration\npodLogsDir: %s\ncontainerLogsDir: %s\n",
		filepath.Join(a.rootDir(), "logs"), old)), 0o644); err != nil {
		t.Fatal(err)
	}
	a.start()
	ctx := context.Background()
	a.waitReady(ctx, 30*time.Second)
	a.waitKubeletPort(ctx)
	name := a.node + "-upg"
	kubectl(t, a.env, podYAML(name, a.node, fmt.Sprintf(`  containers:
  - name: app
    image: %s
    command: ["sh", "-c", "echo started; while [ ! -e /tmp/exit ]; do sleep 0.1; done; echo exiting"]
`, testimage.Ref)), "apply", "-f", "-")
	p := a.waitPod(ctx, name, 60*time.Second, "running", running)
	oldLog := filepath.Join(a.rootDir(), "logs", fmt.Sprintf("%s_%s_%s", p.Namespace, p.Name, p.UID), "app", "0.log")
	waitFile(t, oldLog, 20*time.Second, "the old layout's log", func(s string) bool { return strings.Contains(s, " started\n") })

	// The upgrade: the same agent without the drop-in.
	if code, _ := a.stop(syscall.SIGTERM); code != 0 {
		t.Fatalf("agent exit code %d", code)
	}
	if err := os.Remove(dropIn); err != nil {
		t.Fatal(err)
	}
	a.start()
	a.waitReady(ctx, 30*time.Second)
	a.waitKubeletPort(ctx)
	id := containerID(p.Status.ContainerStatuses[0])
	link := crilog.SymlinkPath(a.containerLogsDir(), name, p.Namespace, "app", id)
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 20*time.Second, true, func(context.Context) (bool, error) {
		target, _ := os.Readlink(link)
		return target == oldLog, nil
	})
	if err != nil {
		t.Fatalf("no symlink %s to the adopted container's log %s", link, oldLog)
	}
	// The node API answers for a pod once the restarted agent has it from
	// the API server (as kubelet's, which serves before its pod sources
	// sync): until then NotFound. Bounded.
	var out string
	var lerr error
	if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 20*time.Second, true, func(context.Context) (bool, error) {
		out, lerr = kubectlOut(t, a.env, "logs", name)
		return lerr == nil && out == "started\n", nil
	}); err != nil {
		t.Fatalf("kubectl logs of the adopted container: %v %q", lerr, out)
	}

	// The next attempt logs in the new layout.
	kubectl(t, a.env, "", "exec", name, "--", "touch", "/tmp/exit")
	a.waitPod(ctx, name, 60*time.Second, "restarted and running", func(p *corev1.Pod) bool {
		return running(p) && p.Status.ContainerStatuses[0].RestartCount == 1
	})
	a.waitLog(p, "app", 1, "started")
	if out, err := kubectlOut(t, a.env, "logs", name, "--previous"); err != nil || out != "started\nexiting\n" {
		t.Errorf("kubectl logs --previous (old layout): %v %q", err, out)
	}
	if out, err := kubectlOut(t, a.env, "logs", name); err != nil || out != "started\n" {
		t.Errorf("kubectl logs (new layout): %v %q", err, out)
	}

	zero := int64(0)
	if err := a.env.Admin.CoreV1().Pods(p.Namespace).Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
		t.Fatal(err)
	}
	newDir := filepath.Dir(filepath.Dir(a.logPath(p, "app", 1)))
	oldDir := filepath.Dir(filepath.Dir(oldLog))
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		return gone(newDir) && gone(oldDir) && gone(link), nil
	})
	if err != nil {
		t.Fatalf("after the pod's deletion: new directory gone %v, old directory gone %v, symlink gone %v", gone(newDir), gone(oldDir), gone(link))
	}
}
