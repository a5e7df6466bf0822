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

	"github.com/nodeagent/nodeagent/internal/testing/testimage"
)

func initContainerStatus(p *corev1.Pod, name string) *corev1.ContainerStatus {
	for i := range p.Status.InitContainerStatuses {
		if p.Status.InitContainerStatuses[i].Name == name {
			return &p.Status.InitContainerStatuses[i]
		}
	}
	return nil
}

// A Job-like pod (restartPolicy Never) with a sidecar: the sidecar writes
// to a shared emptyDir and passes its startup probe before the main
// container starts and reads what it wrote; when the main container exits 0
// the sidecar is stopped and the pod is Succeeded.
func TestSidecarFeedsMainAndJobCompletes(t *testing.T) {
	t.Parallel()
	a, _ := readyPodAgent(t, "")
	ctx := context.Background()
	name := a.node + "-sidecar-job"
	kubectl(t, a.env, podYAML(name, a.node, fmt.Sprintf(`  restartPolicy: Never
  hostNetwork: true
  terminationGracePeriodSeconds: 10
  volumes:
  - name: shared
    emptyDir: {}
  initContainers:
  - name: feeder
    image: %[1]s
    restartPolicy: Always
    command: ["sh", "-c", "trap 'exit 0' TERM; sleep 1; echo hello-from-sidecar > /shared/data; while true; do sleep 0.2; done"]
    volumeMounts: [{name: shared, mountPath: /shared}]
    startupProbe:
      exec:
        command: ["sh", "-c", "[ -f /shared/data ]"]
      periodSeconds: 1
  containers:
  - name: main
    image: %[1]s
    command: ["sh", "-c", "cat /shared/data; sleep 2"]
    volumeMounts: [{name: shared, mountPath: /shared}]
`, testimage.Ref)), "apply", "-f", "-")
	p := a.waitPod(ctx, name, 40*time.Second, "phase Succeeded", phaseIs(corev1.PodSucceeded))
	side, main := initContainerStatus(p, "feeder"), containerStatus(p, "main")
	if side == nil || main == nil || main.State.Terminated == nil || main.State.Terminated.ExitCode != 0 {
		t.Fatalf("statuses: feeder %+v, main %+v", side, main)
	}
	if side.State.Terminated == nil {
		t.Errorf("sidecar not stopped in a Succeeded pod: %+v", side.State)
	} else if side.State.Terminated.FinishedAt.Before(&main.State.Terminated.FinishedAt) {
		t.Errorf("sidecar finished %v, before the main container %v", side.State.Terminated.FinishedAt, main.State.Terminated.FinishedAt)
	}
	if side.RestartCount != 0 {
		t.Errorf("sidecar restarted %d times", side.RestartCount)
	}
	// The main container started after the sidecar had written the file
	// (its startup probe gated the sequence).
	if got := a.logOf(p, "main", 0); !strings.Contains(got, "hello-from-sidecar") {
		t.Errorf("main container log %q, want what the sidecar wrote", got)
	}
	if c := podCondition(p, corev1.PodInitialized); c != corev1.ConditionTrue {
		t.Errorf("Initialized %s", c)
	}
}

// Sidecars count for readiness, are restarted when they exit in a
// restartPolicy Never pod, and stop after the main containers, the last
// declared first.
func TestSidecarReadinessRestartAndShutdownOrder(t *testing.T) {
	t.Parallel()
	a, _ := readyPodAgent(t, "")
	ctx := context.Background()
	dir := t.TempDir()
	name := a.node + "-sidecar-order"
	// Each container appends its name to /host/log on SIGTERM; main
	// takes a second to exit. s2 is ready once /host/ready exists; s1
	// exits once, the first time it runs.
	kubectl(t, a.env, podYAML(name, a.node, fmt.Sprintf(`  restartPolicy: Never
  hostNetwork: true
  terminationGracePeriodSeconds: 20
  volumes:
  - name: host
    hostPath:
      path: %[2]s
  initContainers:
  - name: s1
    image: %[1]s
    restartPolicy: Always
    command: ["sh", "-c", "trap 'echo s1 >> /host/log; exit 0' TERM; if [ ! -f /host/s1-ran ]; then touch /host/s1-ran; sleep 1; exit 3; fi; while true; do sleep 0.2; done"]
    volumeMounts: [{name: host, mountPath: /host}]
  - name: s2
    image: %[1]s
    restartPolicy: Always
    command: ["sh", "-c", "trap 'echo s2 >> /host/log; exit 0' TERM; while true; do sleep 0.2; done"]
    volumeMounts: [{name: host, mountPath: /host}]
    readinessProbe:
      exec:
        command: ["sh", "-c", "[ -f /host/ready ]"]
      periodSeconds: 1
  containers:
  - name: main
    image: %[1]s
    command: ["sh", "-c", "trap 'sleep 1; echo main >> /host/log; exit 0' TERM; while true; do sleep 0.2; done"]
    volumeMounts: [{name: host, mountPath: /host}]
`, testimage.Ref, dir)), "apply", "-f", "-")
	p := a.waitPod(ctx, name, 40*time.Second, "running, s1 restarted, not ready for s2", func(p *corev1.Pod) bool {
		s1 := initContainerStatus(p, "s1")
		return p.Status.Phase == corev1.PodRunning && s1 != nil && s1.RestartCount >= 1 && s1.State.Running != nil &&
			podCondition(p, corev1.ContainersReady) == corev1.ConditionFalse
	})
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.ContainersReady && !strings.Contains(c.Message, "[s2]") {
			t.Errorf("ContainersReady message %q, want s2 unready", c.Message)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "ready"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	a.waitPod(ctx, name, 20*time.Second, "Ready", podReadyIs(corev1.ConditionTrue))

	start := time.Now()
	kubectl(t, a.env, "", "delete", "pod", name, "--wait=false")
	logf := filepath.Join(dir, "log")
	var got string
	for end := time.Now().Add(20 * time.Second); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		b, _ := os.ReadFile(logf)
		if got = string(b); len(strings.Fields(got)) == 3 {
			break
		}
	}
	if order := strings.Join(strings.Fields(got), " "); order != "main s2 s1" {
		t.Errorf("SIGTERM order %q, want main, then s2, then s1", order)
	}
	// Within the grace period with room for a loaded machine (kubectl's
	// start, the deletion reaching the agent): a container killed at the
	// grace period's end would not have written its name.
	if took := time.Since(start); took > 15*time.Second {
		t.Errorf("shutdown took %v, want well within the 20s grace period", took)
	}
}
