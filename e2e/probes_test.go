package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodeagent/nodeagent/internal/testing/testimage"
)

func containerStatus(p *corev1.Pod, name string) *corev1.ContainerStatus {
	for i := range p.Status.ContainerStatuses {
		if p.Status.ContainerStatuses[i].Name == name {
			return &p.Status.ContainerStatuses[i]
		}
	}
	return nil
}

func podReadyIs(st corev1.ConditionStatus) func(*corev1.Pod) bool {
	return func(p *corev1.Pod) bool { return podCondition(p, corev1.PodReady) == st }
}

// An exec liveness probe that starts failing restarts the container, with
// kubelet's Unhealthy and Killing events; the restart count goes up.
func TestLivenessProbeRestartsContainer(t *testing.T) {
	t.Parallel()
	a, _ := readyPodAgent(t, "")
	ctx := context.Background()
	name := a.node + "-liveness"
	kubectl(t, a.env, podYAML(name, a.node, fmt.Sprintf(`  hostNetwork: true
  terminationGracePeriodSeconds: 2
  containers:
  - name: c
    image: %s
    command: ["sh", "-c", "echo ok > /tmp/healthy; sleep 3; busybox rm /tmp/healthy; exec sleep 600"]
    livenessProbe:
      exec:
        command: ["cat", "/tmp/healthy"]
      periodSeconds: 1
      failureThreshold: 2
`, testimage.Ref)), "apply", "-f", "-")
	p := a.waitPod(ctx, name, 60*time.Second, "restartCount 1 and running", func(p *corev1.Pod) bool {
		cs := containerStatus(p, "c")
		return cs != nil && cs.RestartCount >= 1 && cs.State.Running != nil
	})
	if cs := containerStatus(p, "c"); cs.LastTerminationState.Terminated == nil {
		t.Errorf("lastState %+v, want terminated", cs.LastTerminationState)
	}
	sel := "involvedObject.name=" + name
	a.waitEvent(ctx, "default", sel, "Unhealthy: Liveness probe failed", func(e corev1.Event) bool {
		return e.Reason == "Unhealthy" && strings.HasPrefix(e.Message, "Liveness probe failed: ") &&
			strings.Contains(e.Message, "No such file") && e.InvolvedObject.FieldPath == "spec.containers{c}"
	})
	a.waitEvent(ctx, "default", sel, "Killing: failed liveness probe, will be restarted", func(e corev1.Event) bool {
		return e.Reason == "Killing" && e.Message == "Container c failed liveness probe, will be restarted"
	})
}

// An httpGet readiness probe against a hostNetwork pod's busybox httpd
// toggles the container's ready flag and the pod's Ready and
// ContainersReady conditions as the served file comes and goes; a
// tcpSocket liveness probe on the same port keeps it alive, and a startup
// probe gates both (started).
func TestHTTPReadinessAndTCPLiveness(t *testing.T) {
	t.Parallel()
	a, _ := readyPodAgent(t, "")
	ctx := context.Background()
	port := freePort(t)
	name := a.node + "-readiness"
	script := fmt.Sprintf(`busybox mkdir -p /tmp/www; busybox httpd -f -p %d -h /tmp/www & 
while true; do echo ok > /tmp/www/ready; sleep 6; busybox rm -f /tmp/www/ready; sleep 6; done`, port)
	kubectl(t, a.env, podYAML(name, a.node, fmt.Sprintf(`  hostNetwork: true
  containers:
  - name: c
    image: %s
    command: ["sh", "-c", %q]
    ports:
    - name: web
      containerPort: %d
    startupProbe:
      tcpSocket:
        port: web
      periodSeconds: 1
      failureThreshold: 30
    readinessProbe:
      httpGet:
        path: /ready
        port: web
        httpHeaders:
        - name: X-Probe
          value: e2e
      periodSeconds: 1
    livenessProbe:
      tcpSocket:
        port: %d
      periodSeconds: 1
`, testimage.Ref, script, port, port)), "apply", "-f", "-")
	p := a.waitPod(ctx, name, 60*time.Second, "Ready", podReadyIs(corev1.ConditionTrue))
	cs := containerStatus(p, "c")
	if !cs.Ready || cs.Started == nil || !*cs.Started || podCondition(p, corev1.ContainersReady) != corev1.ConditionTrue {
		t.Errorf("ready pod: container %+v, conditions %+v", cs, p.Status.Conditions)
	}
	became := time.Now()
	p = a.waitPod(ctx, name, 20*time.Second, "not Ready", podReadyIs(corev1.ConditionFalse))
	t.Logf("Ready went False %v after it went True (file removed after 6s)", time.Since(became).Round(100*time.Millisecond))
	cs = containerStatus(p, "c")
	if cs.Ready || cs.State.Running == nil || podCondition(p, corev1.ContainersReady) != corev1.ConditionFalse {
		t.Errorf("unready pod: container %+v, conditions %+v", cs, p.Status.Conditions)
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady && (c.Reason != "ContainersNotReady" || c.Message != "containers with unready status: [c]") {
			t.Errorf("Ready condition %+v", c)
		}
	}
	a.waitPod(ctx, name, 20*time.Second, "Ready again", podReadyIs(corev1.ConditionTrue))
	p = a.waitPod(ctx, name, time.Second, "no restart", func(p *corev1.Pod) bool { return containerStatus(p, "c").RestartCount == 0 })
	a.waitEvent(ctx, "default", "involvedObject.name="+name, "Unhealthy: Readiness probe failed: HTTP probe failed with statuscode: 404", func(e corev1.Event) bool {
		return e.Reason == "Unhealthy" && e.Message == "Readiness probe failed: HTTP probe failed with statuscode: 404"
	})
}

// preStop runs before SIGTERM and within the grace period; postStart runs
// after the container started. Both are seen in a hostPath file.
func TestLifecycleHooks(t *testing.T) {
	t.Parallel()
	a, _ := readyPodAgent(t, "")
	ctx := context.Background()
	dir := t.TempDir()
	name := a.node + "-hooks"
	kubectl(t, a.env, podYAML(name, a.node, fmt.Sprintf(`  hostNetwork: true
  terminationGracePeriodSeconds: 20
  volumes:
  - name: host
    hostPath:
      path: %s
  containers:
  - name: c
    image: %s
    command: ["sh", "-c", "trap 'echo term >> /host/log; exit 0' TERM; echo main >> /host/log; while true; do sleep 0.2; done"]
    volumeMounts:
    - name: host
      mountPath: /host
    lifecycle:
      postStart:
        exec:
          command: ["sh", "-c", "echo poststart >> /host/log"]
      preStop:
        exec:
          command: ["sh", "-c", "sleep 2; echo prestop >> /host/log"]
`, dir, testimage.Ref)), "apply", "-f", "-")
	a.waitPod(ctx, name, 30*time.Second, "running", running)
	logf := filepath.Join(dir, "log")
	waitFile := func(want string, within time.Duration) string {
		t.Helper()
		var got string
		for end := time.Now().Add(within); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
			b, _ := os.ReadFile(logf)
			if got = string(b); strings.Contains(got, want) {
				return got
			}
		}
		t.Fatalf("%s: %q not seen within %v; got %q", logf, want, within, got)
		return ""
	}
	waitFile("poststart", 10*time.Second)
	start := time.Now()
	kubectl(t, a.env, "", "delete", "pod", name, "--wait=false")
	got := waitFile("term", 18*time.Second)
	took := time.Since(start)
	lines := strings.Fields(got)
	if len(lines) != 4 || lines[2] != "prestop" || lines[3] != "term" {
		t.Errorf("hook order %q, want main and poststart, then prestop, then term", lines)
	}
	// The upper bound tells a SIGTERM sent after the hook from the grace
	// period's end (20 s); what comes before it (kubectl's start, the
	// deletion reaching the agent, the exec of the hook) is the machine's,
	// up to a few seconds under load.
	if took < 2*time.Second || took > 15*time.Second {
		t.Errorf("SIGTERM %v after the delete; want after the 2s preStop, well within the 20s grace", took)
	}
}

// A failing postStart hook kills the container (FailedPostStartHook) and
// the restart policy restarts it.
func TestPostStartHookFailure(t *testing.T) {
	t.Parallel()
	a, _ := readyPodAgent(t, "")
	ctx := context.Background()
	name := a.node + "-poststart-fails"
	kubectl(t, a.env, podYAML(name, a.node, fmt.Sprintf(`  hostNetwork: true
  terminationGracePeriodSeconds: 1
  containers:
  - name: c
    image: %s
    command: ["sleep", "600"]
    lifecycle:
      postStart:
        exec:
          command: ["sh", "-c", "echo nope; exit 3"]
`, testimage.Ref)), "apply", "-f", "-")
	a.waitPod(ctx, name, 60*time.Second, "restarted after the hook failed", func(p *corev1.Pod) bool {
		cs := containerStatus(p, "c")
		return cs != nil && cs.RestartCount >= 1
	})
	a.waitEvent(ctx, "default", "involvedObject.name="+name, "FailedPostStartHook", func(e corev1.Event) bool {
		return e.Reason == "FailedPostStartHook" && strings.Contains(e.Message, "Exec lifecycle hook ([sh -c echo nope; exit 3]) for Container \"c\"") &&
			strings.Contains(e.Message, "nope")
	})
}

// Termination messages: from the file at terminationMessagePath (default
// and custom), from the log's end with FallbackToLogsOnError when the
// container failed, and still there after an agent restart. The e2e pods
// here use hostNetwork where the network does not matter.
func TestTerminationMessages(t *testing.T) {
	t.Parallel()
	a, _ := readyPodAgent(t, "")
	ctx := context.Background()
	name := a.node + "-termmsg"
	kubectl(t, a.env, podYAML(name, a.node, fmt.Sprintf(`  hostNetwork: true
  restartPolicy: Never
  containers:
  - name: file
    image: %[1]s
    command: ["sh", "-c", "echo -n from-file > /dev/termination-log"]
  - name: custom
    image: %[1]s
    command: ["sh", "-c", "echo -n custom-path > /tmp/msg; exit 2"]
    terminationMessagePath: /tmp/msg
  - name: logs
    image: %[1]s
    command: ["sh", "-c", "echo line1; echo line2; exit 1"]
    terminationMessagePolicy: FallbackToLogsOnError
  - name: logs-ok
    image: %[1]s
    command: ["sh", "-c", "echo not-a-message"]
    terminationMessagePolicy: FallbackToLogsOnError
`, testimage.Ref)), "apply", "-f", "-")
	want := map[string]string{"file": "from-file", "custom": "custom-path", "logs": "line1\nline2\n", "logs-ok": ""}
	check := func(p *corev1.Pod) bool {
		for c, msg := range want {
			cs := containerStatus(p, c)
			if cs == nil || cs.State.Terminated == nil || cs.State.Terminated.Message != msg {
				return false
			}
		}
		return true
	}
	a.waitPod(ctx, name, 60*time.Second, "termination messages", check)
	// An agent restart recomputes the status from the files.
	a.stop(syscall.SIGTERM)
	a.start()
	a.waitReady(ctx, 30*time.Second)
	time.Sleep(3 * time.Second)
	a.waitPod(ctx, name, 10*time.Second, "termination messages after an agent restart", check)
}

// activeDeadlineSeconds, also when shortened on a running pod, fails the
// pod with DeadlineExceeded and stops its containers.
func TestActiveDeadlineSeconds(t *testing.T) {
	t.Parallel()
	a, _ := readyPodAgent(t, "")
	ctx := context.Background()
	name := a.node + "-deadline"
	kubectl(t, a.env, podYAML(name, a.node, fmt.Sprintf(`  hostNetwork: true
  activeDeadlineSeconds: 600
  terminationGracePeriodSeconds: 1
  containers:
  - name: c
    image: %s
    command: ["sleep", "600"]
`, testimage.Ref)), "apply", "-f", "-")
	a.waitPod(ctx, name, 30*time.Second, "running", running)
	start := time.Now()
	if _, err := a.env.Admin.CoreV1().Pods("default").Patch(ctx, name, types.StrategicMergePatchType,
		[]byte(`{"spec":{"activeDeadlineSeconds":3}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	p := a.waitPod(ctx, name, 30*time.Second, "Failed", phaseIs(corev1.PodFailed))
	if p.Status.Reason != "DeadlineExceeded" || p.Status.Message != "Pod was active on the node longer than the specified deadline" {
		t.Errorf("reason %q message %q", p.Status.Reason, p.Status.Message)
	}
	t.Logf("Failed %v after the deadline was shortened", time.Since(start).Round(100*time.Millisecond))
	a.waitPod(ctx, name, 15*time.Second, "container terminated", func(p *corev1.Pod) bool {
		cs := containerStatus(p, "c")
		return cs != nil && cs.State.Terminated != nil
	})
	a.waitEvent(ctx, "default", "involvedObject.name="+name, "DeadlineExceeded", func(e corev1.Event) bool {
		return e.Reason == "DeadlineExceeded"
	})
}

// Ready waits for the readiness gates' conditions, which the agent keeps
// as another writer set them.
func TestReadinessGates(t *testing.T) {
	t.Parallel()
	a, _ := readyPodAgent(t, "")
	ctx := context.Background()
	name := a.node + "-gates"
	kubectl(t, a.env, podYAML(name, a.node, fmt.Sprintf(`  hostNetwork: true
  readinessGates:
  - conditionType: example.com/gate
  containers:
  - name: c
    image: %s
    command: ["sleep", "600"]
`, testimage.Ref)), "apply", "-f", "-")
	p := a.waitPod(ctx, name, 30*time.Second, "running, ContainersReady", func(p *corev1.Pod) bool {
		return running(p) && podCondition(p, corev1.ContainersReady) == corev1.ConditionTrue
	})
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady && (c.Status != corev1.ConditionFalse || c.Reason != "ReadinessGatesNotReady" ||
			c.Message != `corresponding condition of pod readiness gate "example.com/gate" does not exist.`) {
			t.Errorf("Ready condition %+v", c)
		}
	}
	setGate := func(st corev1.ConditionStatus) {
		patch := fmt.Sprintf(`{"status":{"conditions":[{"type":"example.com/gate","status":%q}]}}`, st)
		if _, err := a.env.Admin.CoreV1().Pods("default").Patch(ctx, name, types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{}, "status"); err != nil {
			t.Fatal(err)
		}
	}
	setGate(corev1.ConditionFalse)
	a.waitPod(ctx, name, 10*time.Second, "gate False in the message", func(p *corev1.Pod) bool {
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodReady {
				return c.Message == `the status of pod readiness gate "example.com/gate" is not "True", but False`
			}
		}
		return false
	})
	setGate(corev1.ConditionTrue)
	a.waitPod(ctx, name, 10*time.Second, "Ready", podReadyIs(corev1.ConditionTrue))
	time.Sleep(2 * time.Second)
	p = a.waitPod(ctx, name, time.Second, "the gate's condition kept", func(p *corev1.Pod) bool {
		return podCondition(p, "example.com/gate") == corev1.ConditionTrue && podCondition(p, corev1.PodReady) == corev1.ConditionTrue
	})
}
