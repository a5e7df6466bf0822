package e2e

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/nodeagent/nodeagent/internal/testing/testenv"
	"github.com/nodeagent/nodeagent/internal/testing/testimage"
	"github.com/nodeagent/nodeagent/pods/volume"
	"github.com/nodeagent/nodeagent/runtime"
)

// podAgent starts an agent that runs pods: its own containerd namespace
// (tests run in parallel against one containerd) with the test image.
func podAgent(t *testing.T, extraConfig string) (*agent, *runtime.Runtime) {
	t.Helper()
	return podAgentOn(t, testenv.Cluster(t), extraConfig)
}

// podAgentOn is podAgent on env's cluster and containerd.
func podAgentOn(t *testing.T, env *testenv.Env, extraConfig string) (*agent, *runtime.Runtime) {
	t.Helper()
	node := testenv.NodeName(t)
	ns := "e2e-" + node
	rt, err := runtime.New(runtime.Options{Address: env.ContainerdAddress, Namespace: ns})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := testimage.Import(ctx, rt); err != nil {
		t.Fatal(err)
	}
	a := newAgent(t, env, agentOpts{node: node, config: "containerRuntimeNamespace: " + ns + "\n" + extraConfig})
	t.Cleanup(func() {
		// After the agent's cleanup (registered earlier, runs later): the
		// containers it leaves behind.
		cctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		cs, _ := rt.ListContainers(cctx)
		for _, c := range cs {
			_ = rt.RemoveContainer(cctx, c.ID)
		}
		ps, _ := rt.ListPauses(cctx, "")
		for _, p := range ps {
			_ = rt.RemoveContainer(cctx, p.ID)
		}
		_ = rt.Close()
		// The agent's cgroup root (its namespace's, see cgroupRoot).
		_ = removeCgroupTree("/nodeagent-" + ns)
	})
	t.Cleanup(func() {
		// Delete the node's pods and let the agent clean up after them
		// (volumes, network namespaces), then stop it.
		cctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		list, _ := env.Admin.CoreV1().Pods("").List(cctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("spec.nodeName", node).String()})
		if list != nil {
			for _, p := range list.Items {
				if t.Failed() {
					t.Logf("pod %s/%s at the end: phase=%s reason=%s message=%s\n containers=%+v\n init=%+v", p.Namespace, p.Name, p.Status.Phase, p.Status.Reason, p.Status.Message, p.Status.ContainerStatuses, p.Status.InitContainerStatuses)
				}
				zero := int64(0)
				_ = env.Admin.CoreV1().Pods(p.Namespace).Delete(cctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: &zero})
			}
		}
		podsDir := filepath.Join(a.rootDir(), "pods")
		if a.cmd != nil {
			_ = wait.PollUntilContextTimeout(cctx, 100*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
				es, err := os.ReadDir(podsDir)
				return err != nil || len(es) == 0, nil
			})
		}
		a.stop(syscall.SIGKILL)
		// Whatever the agent did not clean up (it was not running, or a
		// static pod's file outlived the test).
		es, _ := os.ReadDir(podsDir)
		for _, e := range es {
			_ = volume.TeardownVolumes(filepath.Join(podsDir, e.Name()))
		}
		// The agent's network and pod namespace directories are the
		// test's alone: whatever is mounted there (namespaces of pods
		// whose directory is gone with rootDir, e.g. a tmpfs rootDir
		// unmounted first) is unmounted, and they go.
		testenv.CleanAgentRunDirs(t, env.ContainerdAddress, ns)
	})
	return a, rt
}

// readyPodAgent is podAgent, started and Ready.
func readyPodAgent(t *testing.T, extraConfig string) (*agent, *runtime.Runtime) {
	t.Helper()
	a, rt := podAgent(t, extraConfig)
	a.start()
	a.waitReady(context.Background(), 30*time.Second)
	return a, rt
}

func (a *agent) rootDir() string { return filepath.Join(a.dir, "root") }

// kubectl runs the local cluster's kubectl as cluster admin.
func kubectl(t *testing.T, env *testenv.Env, stdin string, args ...string) string {
	t.Helper()
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(filepath.Join(root, "_output", "bin", "kubectl"), append([]string{"--kubeconfig", env.AdminKubeconfig}, args...)...)
	cmd.Stdin = strings.NewReader(stdin)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out.String())
	}
	return out.String()
}

// podYAML is a pod bound to node that runs the test image.
func podYAML(name, node, body string) string {
	return fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata:
  name: %s
  namespace: default
spec:
  nodeName: %s
  automountServiceAccountToken: false
%s`, name, node, body)
}

// waitPod polls a pod until cond holds and returns it.
func (a *agent) waitPod(ctx context.Context, name string, timeout time.Duration, what string, cond func(*corev1.Pod) bool) *corev1.Pod {
	a.t.Helper()
	var last *corev1.Pod
	err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		p, err := a.env.Admin.CoreV1().Pods("default").Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			last = nil
			return false, nil
		}
		if err != nil {
			return false, nil
		}
		last = p
		return cond(p), nil
	})
	if err != nil {
		if last != nil {
			a.t.Fatalf("pod %s: %s not seen within %s; last status: phase=%s reason=%q message=%q conditions=%+v containers=%+v init=%+v",
				name, what, timeout, last.Status.Phase, last.Status.Reason, last.Status.Message, last.Status.Conditions, last.Status.ContainerStatuses, last.Status.InitContainerStatuses)
		}
		a.t.Fatalf("pod %s: %s not seen within %s (pod not found)", name, what, timeout)
	}
	return last
}

func phaseIs(ph corev1.PodPhase) func(*corev1.Pod) bool {
	return func(p *corev1.Pod) bool { return p.Status.Phase == ph }
}

func podCondition(p *corev1.Pod, t corev1.PodConditionType) corev1.ConditionStatus {
	for _, c := range p.Status.Conditions {
		if c.Type == t {
			return c.Status
		}
	}
	return ""
}

func running(p *corev1.Pod) bool {
	if p.Status.Phase != corev1.PodRunning || len(p.Status.ContainerStatuses) == 0 {
		return false
	}
	for _, cs := range p.Status.ContainerStatuses {
		if cs.State.Running == nil {
			return false
		}
	}
	return true
}

// podLogsDir and containerLogsDir are the agent's /var/log/pods and
// /var/log/containers.
func (a *agent) podLogsDir() string       { return filepath.Join(a.dir, "log", "pods") }
func (a *agent) containerLogsDir() string { return filepath.Join(a.dir, "log", "containers") }

// logPath is a container attempt's log file (kubelet's podLogsDir layout).
func (a *agent) logPath(p *corev1.Pod, container string, attempt int) string {
	return filepath.Join(a.podLogsDir(), fmt.Sprintf("%s_%s_%s", p.Namespace, p.Name, p.UID), container, fmt.Sprintf("%d.log", attempt))
}

// logOf reads a container attempt's log file ("" if there is none).
func (a *agent) logOf(p *corev1.Pod, container string, attempt int) string {
	b, _ := os.ReadFile(a.logPath(p, container, attempt))
	return string(b)
}

// holdLog opens a container's log before the pod is deleted; its wait
// reads through that descriptor, so the lines are there after the agent
// removed the pod and its log directory (which it may do within 100 ms
// of the container's exit).
func (a *agent) holdLog(p *corev1.Pod, container string, attempt int) (wait func(want string)) {
	a.t.Helper()
	f, err := os.Open(a.logPath(p, container, attempt))
	if err != nil {
		a.t.Fatal(err)
	}
	a.t.Cleanup(func() { f.Close() })
	return func(want string) {
		a.t.Helper()
		var got []byte
		for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
			fi, err := f.Stat()
			if err != nil {
				a.t.Fatal(err)
			}
			got = make([]byte, fi.Size())
			n, _ := f.ReadAt(got, 0)
			got = got[:n]
			if strings.Contains(string(got), want) {
				return
			}
		}
		a.t.Fatalf("log of %s attempt %d lacks %q:\n%s", container, attempt, want, got)
	}
}

func fileExists(p string) bool { _, err := os.Stat(p); return err == nil }

func (a *agent) waitLog(p *corev1.Pod, container string, attempt int, want ...string) string {
	a.t.Helper()
	var got string
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		got = a.logOf(p, container, attempt)
		ok := true
		for _, w := range want {
			ok = ok && strings.Contains(got, w)
		}
		if ok {
			return got
		}
		time.Sleep(50 * time.Millisecond)
	}
	a.t.Fatalf("log of %s attempt %d lacks %q:\n%s", container, attempt, want, got)
	return got
}

// A pod created with kubectl runs its init containers in order, then its
// container with env ($(VAR) expansion, fieldRef), args and volumes, and
// reports kubelet's status.
func TestPodRunsWithInitContainersAndReportsStatus(t *testing.T) {
	t.Parallel()
	a, _ := readyPodAgent(t, "")
	ctx := context.Background()

	name := a.node + "-full"
	kubectl(t, a.env, podYAML(name, a.node, fmt.Sprintf(`  volumes:
  - name: data
    emptyDir: {}
  - name: mem
    emptyDir: {medium: Memory, sizeLimit: 8Mi}
  initContainers:
  - name: first
    image: %[1]s
    command: ["sh", "-c", "sleep 1; echo -n 1 >> /data/order"]
    volumeMounts: [{name: data, mountPath: /data}]
  - name: second
    image: %[1]s
    command: ["sh", "-c", "echo -n 2 >> /data/order"]
    volumeMounts: [{name: data, mountPath: /data}]
  containers:
  - name: main
    image: %[1]s
    imagePullPolicy: IfNotPresent
    command: ["sh", "-c"]
    args: ["echo order=$(cat /data/order); echo args=$0 $1; env | sort; grep -q ' /mem tmpfs' /proc/mounts && echo mem=tmpfs; exec sleep 3600", "$(GREETING)", "literal-$$(GREETING)"]
    workingDir: /data
    env:
    - {name: BASE, value: hello}
    - {name: GREETING, value: "$(BASE)-world"}
    - name: MY_POD_NAME
      valueFrom: {fieldRef: {fieldPath: metadata.name}}
    - name: MY_NAMESPACE
      valueFrom: {fieldRef: {fieldPath: metadata.namespace}}
    - name: MY_UID
      valueFrom: {fieldRef: {fieldPath: metadata.uid}}
    - name: MY_NODE
      valueFrom: {fieldRef: {fieldPath: spec.nodeName}}
    - name: MY_HOST_IP
      valueFrom: {fieldRef: {fieldPath: status.hostIP}}
    resources:
      limits: {cpu: 200m, memory: 64Mi}
    volumeMounts:
    - {name: data, mountPath: /data}
    - {name: mem, mountPath: /mem}
`, testimage.Ref)), "apply", "-f", "-")

	// While the first init container runs: Pending, the app container
	// waiting with PodInitializing, Initialized=False.
	a.waitPod(ctx, name, 30*time.Second, "Pending while initialising", func(p *corev1.Pod) bool {
		cs := p.Status.ContainerStatuses
		return p.Status.Phase == corev1.PodPending && p.Status.StartTime != nil && len(cs) == 1 && cs[0].State.Waiting != nil &&
			cs[0].State.Waiting.Reason == "PodInitializing" && podCondition(p, corev1.PodInitialized) == corev1.ConditionFalse
	})
	p := a.waitPod(ctx, name, 30*time.Second, "Running with every container running", running)
	if got := podCondition(p, corev1.PodReady); got != corev1.ConditionTrue {
		t.Errorf("Ready = %q", got)
	}
	for _, c := range []corev1.PodConditionType{corev1.PodInitialized, corev1.ContainersReady, corev1.PodScheduled, corev1.PodReadyToStartContainers} {
		if got := podCondition(p, c); got != corev1.ConditionTrue {
			t.Errorf("condition %s = %q", c, got)
		}
	}
	if p.Status.HostIP == "" || p.Status.StartTime == nil {
		t.Errorf("hostIP %q startTime %v", p.Status.HostIP, p.Status.StartTime)
	}
	if p.Status.PodIP != "" {
		t.Errorf("podIP %q for a pod without hostNetwork (no CNI yet: want empty)", p.Status.PodIP)
	}
	// Guaranteed needs limits on the init containers too.
	if p.Status.QOSClass != corev1.PodQOSBurstable {
		t.Errorf("qosClass %q", p.Status.QOSClass)
	}
	cs := p.Status.ContainerStatuses[0]
	if cs.State.Running.StartedAt.IsZero() {
		t.Errorf("running container without a start time: %+v", cs.State)
	}
	if !strings.HasPrefix(cs.ContainerID, "containerd://") || !strings.HasPrefix(cs.ImageID, "sha256:") || !cs.Ready || cs.Started == nil || !*cs.Started || cs.RestartCount != 0 {
		t.Errorf("container status %+v", cs)
	}
	if len(p.Status.InitContainerStatuses) != 2 {
		t.Fatalf("init statuses %+v", p.Status.InitContainerStatuses)
	}
	for _, ic := range p.Status.InitContainerStatuses {
		if ic.State.Terminated == nil || ic.State.Terminated.Reason != "Completed" || ic.State.Terminated.ExitCode != 0 {
			t.Errorf("init container %s: %+v", ic.Name, ic.State)
		}
	}
	if _, body := a.get("/metrics"); !strings.Contains(body, "nodeagent_pods_start_duration_seconds_count 1") {
		t.Error("the pod's start was not observed in nodeagent_pods_start_duration_seconds")
	}
	// Limits are cgroup limits (cgroup v1 memory controller or cgroup v2).
	id := strings.TrimPrefix(cs.ContainerID, "containerd://")
	mem, cpu := cgroupLimits(t, string(p.UID), id)
	if mem != 64<<20 {
		t.Errorf("memory limit %d, want %d", mem, 64<<20)
	}
	checkNoSwap(t, string(p.UID), id, 64<<20)
	if cpu != "20000 100000" {
		t.Errorf("cpu quota/period %q, want 20000 100000", cpu)
	}
	log := a.waitLog(p, "main", 0, "order=12", "args=hello-world literal-$(GREETING)",
		"GREETING=hello-world", "MY_POD_NAME="+name, "MY_NAMESPACE=default", "MY_UID="+string(p.UID),
		"MY_NODE="+a.node, "MY_HOST_IP="+p.Status.HostIP, "PWD=/data", "mem=tmpfs")
	if t.Failed() {
		t.Log(log)
	}
}

// A container that exits non-zero is restarted with a growing back-off and
// restartCount; its last state says how it ended.
func TestCrashingContainerBacksOff(t *testing.T) {
	t.Parallel()
	a, _ := readyPodAgent(t, "")
	ctx := context.Background()
	name := a.node + "-crash"
	kubectl(t, a.env, podYAML(name, a.node, fmt.Sprintf(`  containers:
  - name: crash
    image: %s
    command: ["sh", "-c", "echo attempt; exit 3"]
`, testimage.Ref)), "apply", "-f", "-")

	seen := map[int32]time.Time{}
	sawBackOff := false
	p := a.waitPod(ctx, name, 60*time.Second, "restartCount 2", func(p *corev1.Pod) bool {
		if len(p.Status.ContainerStatuses) == 0 {
			return false
		}
		cs := p.Status.ContainerStatuses[0]
		if _, ok := seen[cs.RestartCount]; !ok {
			seen[cs.RestartCount] = time.Now()
		}
		if w := cs.State.Waiting; w != nil && w.Reason == "CrashLoopBackOff" {
			sawBackOff = true
		}
		return cs.RestartCount >= 2
	})
	cs := p.Status.ContainerStatuses[0]
	if !sawBackOff {
		t.Error("never saw state waiting/CrashLoopBackOff")
	}
	if lt := cs.LastTerminationState.Terminated; lt == nil || lt.ExitCode != 3 || lt.Reason != "Error" {
		t.Errorf("lastState %+v", cs.LastTerminationState)
	}
	// kubelet's back-off: the first restart at once, the second after 10s.
	if gap := seen[2].Sub(seen[1]); gap < 8*time.Second {
		t.Errorf("second restart %v after the first; want the 10s back-off", gap)
	}
	if p.Status.Phase != corev1.PodRunning && p.Status.Phase != corev1.PodPending {
		t.Errorf("phase %s", p.Status.Phase)
	}
	a.waitLog(p, "crash", 1, "attempt")
	a.waitEvent(ctx, "default", "involvedObject.name="+name, "a BackOff event", func(e corev1.Event) bool { return e.Reason == "BackOff" })
	if _, body := a.get("/metrics"); !strings.Contains(body, `nodeagent_pods_container_starts_total{kind="restart"}`) {
		t.Error("no restart counted in nodeagent_pods_container_starts_total")
	}
	// The node is not affected by a failing pod.
	a.waitNode(ctx, 5*time.Second, "still Ready", readyIs(corev1.ConditionTrue))
}

// A pod deleted with kubectl is stopped within its grace period and
// disappears from the API; a container that ignores SIGTERM is killed at
// the end of the grace period.
func TestDeletedPodStopsWithinGracePeriod(t *testing.T) {
	t.Parallel()
	a, rt := readyPodAgent(t, "")
	ctx := context.Background()
	polite, stubborn := a.node+"-polite", a.node+"-stubborn"
	// The polite one says it got SIGTERM in a hostPath file (its log goes
	// with the pod).
	hostDir := filepath.Join(a.dir, "host")
	kubectl(t, a.env, podYAML(polite, a.node, fmt.Sprintf(`  terminationGracePeriodSeconds: 30
  volumes:
  - name: host
    hostPath: {path: %s, type: DirectoryOrCreate}
  containers:
  - name: c
    image: %s
    command: ["sh", "-c", "trap 'echo got TERM > /host/term; exit 0' TERM; touch /host/trapped; while true; do sleep 0.2; done"]
    volumeMounts: [{name: host, mountPath: /host}]
`, hostDir, testimage.Ref)), "apply", "-f", "-")
	kubectl(t, a.env, podYAML(stubborn, a.node, fmt.Sprintf(`  terminationGracePeriodSeconds: 3
  containers:
  - name: c
    image: %s
    command: ["sh", "-c", "trap '' TERM; while true; do sleep 0.2; done"]
`, testimage.Ref)), "apply", "-f", "-")
	p1 := a.waitPod(ctx, polite, 30*time.Second, "running", running)
	if a.logOf(p1, "c", 0) == "" && !fileExists(a.logPath(p1, "c", 0)) {
		t.Fatalf("no log file %s", a.logPath(p1, "c", 0))
	}
	a.waitPod(ctx, stubborn, 30*time.Second, "running", running)
	// Running is the container's start, not its shell's trap: a SIGTERM
	// before the trap is ignored (the shell is its PID namespace's init)
	// and the polite pod would look stubborn. The shell says when the
	// trap is in place.
	waitFor(t, 20*time.Second, func() bool { return fileExists(filepath.Join(hostDir, "trapped")) }, "the polite container's TERM trap")

	for _, tc := range []struct {
		name     string
		min, max time.Duration
	}{{polite, 0, 20 * time.Second}, {stubborn, 3 * time.Second, 15 * time.Second}} { // polite: well within its 30s grace
		start := time.Now()
		kubectl(t, a.env, "", "delete", "pod", "-n", "default", tc.name, "--wait=true", "--timeout=60s")
		took := time.Since(start)
		if took < tc.min || took > tc.max {
			t.Errorf("pod %s: deleted after %v, want between %v and %v", tc.name, took, tc.min, tc.max)
		}
	}
	if b, err := os.ReadFile(filepath.Join(hostDir, "term")); err != nil || !strings.Contains(string(b), "got TERM") {
		t.Errorf("the polite container did not get SIGTERM: %q %v", b, err)
	}
	if fileExists(a.logPath(p1, "c", 0)) {
		t.Error("the pod's log directory outlived the pod")
	}
	// Containers are removed once the pods are gone.
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 20*time.Second, true, func(ctx context.Context) (bool, error) {
		cs, err := rt.ListContainers(ctx)
		return err == nil && len(cs) == 0, nil
	})
	if err != nil {
		cs, _ := rt.ListContainers(ctx)
		t.Errorf("containers left after deletion: %+v", cs)
	}
}

// A pod using fields outside the supported subset is refused with a
// message that names them, and an Event.
func TestUnsupportedPodIsRefused(t *testing.T) {
	t.Parallel()
	a, _ := readyPodAgent(t, "")
	ctx := context.Background()
	name := a.node + "-unsupported"
	kubectl(t, a.env, podYAML(name, a.node, fmt.Sprintf(`  volumes:
  - name: cfg
    nfs: {server: nfs.example, path: /}
  containers:
  - name: c
    image: %s
    command: ["sleep", "3600"]
    volumeMounts: [{name: cfg, mountPath: /cfg}]
`, testimage.Ref)), "apply", "-f", "-")
	p := a.waitPod(ctx, name, 30*time.Second, "phase Failed", phaseIs(corev1.PodFailed))
	if p.Status.Reason != "UnsupportedPodSpec" {
		t.Errorf("reason %q", p.Status.Reason)
	}
	for _, field := range []string{"spec.volumes[0].nfs"} {
		if !strings.Contains(p.Status.Message, field) {
			t.Errorf("message %q does not name %s", p.Status.Message, field)
		}
	}
	a.waitEvent(ctx, "default", "involvedObject.name="+name, "an UnsupportedPodSpec event", func(e corev1.Event) bool {
		return e.Reason == "UnsupportedPodSpec"
	})
}

// waitEvent polls the events matching a field selector until one matches.
func (a *agent) waitEvent(ctx context.Context, ns, selector, what string, match func(corev1.Event) bool) {
	a.t.Helper()
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 20*time.Second, true, func(ctx context.Context) (bool, error) {
		evs, err := a.env.Admin.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: selector})
		if err != nil {
			return false, nil
		}
		for _, e := range evs.Items {
			if match(e) {
				// As kubelet records them: tools select a node's
				// events with source=kubelet.
				if e.Source.Component != "kubelet" || e.Source.Host != a.node {
					a.t.Errorf("event %s %q has source %+v, want kubelet on %s", e.Reason, e.Message, e.Source, a.node)
				}
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		a.t.Errorf("no event: %s (%s): %v", what, selector, err)
	}
}

// Restarting the agent restarts no healthy container: they are adopted.
func TestAgentRestartAdoptsRunningContainers(t *testing.T) {
	t.Parallel()
	a, _ := readyPodAgent(t, "")
	ctx := context.Background()
	name := a.node + "-adopt"
	kubectl(t, a.env, podYAML(name, a.node, fmt.Sprintf(`  containers:
  - name: c
    image: %s
    command: ["sleep", "3600"]
`, testimage.Ref)), "apply", "-f", "-")
	before := a.waitPod(ctx, name, 30*time.Second, "running", running)
	// As kubelet 1.34: the status and the agent's conditions name the
	// generation they are about.
	if before.Generation == 0 || before.Status.ObservedGeneration != before.Generation {
		t.Errorf("observedGeneration %d of generation %d", before.Status.ObservedGeneration, before.Generation)
	}
	for _, c := range before.Status.Conditions {
		if c.Type != corev1.PodScheduled && c.ObservedGeneration != before.Generation {
			t.Errorf("condition %s: observedGeneration %d of generation %d", c.Type, c.ObservedGeneration, before.Generation)
		}
	}
	if code, _ := a.stop(syscall.SIGTERM); code != 0 {
		t.Fatalf("agent exit code %d", code)
	}
	// Its loops, the PLEG and the pod workers stopped before it closed the
	// containerd connection.
	if a.out.Contains("loops did not stop in time") {
		t.Errorf("the agent closed the runtime before its loops stopped:\n%s", a.out)
	}
	a.start()
	a.waitReady(ctx, 30*time.Second)
	// Give the restarted agent time to sync the pod, then compare.
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		if a.out.Contains("pod sources synced") {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	time.Sleep(2 * time.Second)
	after := a.waitPod(ctx, name, 10*time.Second, "running", running)
	b, c := before.Status.ContainerStatuses[0], after.Status.ContainerStatuses[0]
	if b.ContainerID != c.ContainerID || c.RestartCount != 0 || !c.State.Running.StartedAt.Equal(&b.State.Running.StartedAt) {
		t.Errorf("container replaced across the agent restart: before %+v after %+v", b, c)
	}
	if a.out.Contains("started container") {
		t.Errorf("the restarted agent started a container:\n%s", a.out)
	}
}

// Static pods: a manifest file gives a pod and its mirror pod; an edit
// recreates it; a broken file is reported while the other pod keeps
// running; removing the file removes the pod and its mirror.
func TestStaticPods(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	a, _ := podAgent(t, "staticPodPath: "+dir+"\n")
	ctx := context.Background()
	manifest := func(version string) string {
		return fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata:
  name: web
  namespace: default
spec:
  terminationGracePeriodSeconds: 2
  containers:
  - name: c
    image: %s
    command: ["sh", "-c", "echo version=%s; exec sleep 3600"]
`, testimage.Ref, version)
	}
	write := func(name, content string) {
		tmp := filepath.Join(dir, ".tmp-"+name)
		if err := os.WriteFile(tmp, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	write("web.yaml", manifest("1"))
	a.start()
	a.waitReady(ctx, 30*time.Second)
	mirror := "web-" + a.node
	isMirrorRunning := func(p *corev1.Pod) bool {
		_, ok := p.Annotations["kubernetes.io/config.mirror"]
		return ok && running(p)
	}
	m1 := a.waitPod(ctx, mirror, 30*time.Second, "mirror pod Running", isMirrorRunning)
	if len(m1.OwnerReferences) != 1 || m1.OwnerReferences[0].Kind != "Node" {
		t.Errorf("mirror owner references %+v", m1.OwnerReferences)
	}

	// An edit recreates the pod (new config hash, new mirror pod).
	write("web.yaml", manifest("2"))
	m2 := a.waitPod(ctx, mirror, 30*time.Second, "a new mirror pod Running", func(p *corev1.Pod) bool {
		return p.UID != m1.UID && p.Annotations["kubernetes.io/config.mirror"] != m1.Annotations["kubernetes.io/config.mirror"] && isMirrorRunning(p)
	})
	staticUID := m2.Annotations["kubernetes.io/config.mirror"]
	(&agent{t: t, dir: a.dir}).waitLog(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: mirror, UID: typesUID(staticUID)}}, "c", 0, "version=2")

	// A deleted mirror pod comes back; the static pod is not disturbed.
	kubectl(t, a.env, "", "delete", "pod", "-n", "default", mirror, "--wait=false")
	a.waitPod(ctx, mirror, 30*time.Second, "the mirror pod recreated", func(p *corev1.Pod) bool {
		return p.UID != m2.UID && p.DeletionTimestamp == nil && isMirrorRunning(p) && p.Status.ContainerStatuses[0].ContainerID == m2.Status.ContainerStatuses[0].ContainerID
	})
	m2 = a.waitPod(ctx, mirror, 5*time.Second, "mirror", isMirrorRunning)

	// A broken file is reported (log and Event on the Node) and skipped.
	write("broken.yaml", "apiVersion: v1\nkind: Pod\nmetadata: {name: broken}\nspec:\n  containers:\n  - name: c\n    imagee: typo\n")
	a.waitEvent(ctx, "", "involvedObject.kind=Node,involvedObject.name="+a.node, "an Event on the Node naming broken.yaml", func(e corev1.Event) bool {
		return strings.Contains(e.Message, "broken.yaml")
	})
	if !a.out.Contains("broken.yaml") {
		t.Error("no log line naming broken.yaml")
	}
	still := a.waitPod(ctx, mirror, 5*time.Second, "mirror pod still Running", isMirrorRunning)
	if still.UID != m2.UID || still.Status.ContainerStatuses[0].RestartCount != 0 {
		t.Errorf("the good static pod was disturbed by the broken file: %+v", still.Status.ContainerStatuses)
	}

	// Removing the file removes the pod and its mirror pod.
	if err := os.Remove(filepath.Join(dir, "web.yaml")); err != nil {
		t.Fatal(err)
	}
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 60*time.Second, true, func(ctx context.Context) (bool, error) {
		_, err := a.env.Admin.CoreV1().Pods("default").Get(ctx, mirror, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	if err != nil {
		t.Errorf("mirror pod not removed with its file: %v", err)
	}
}

func typesUID(s string) types.UID { return types.UID(s) }

// cgroupLimits reads a container's memory limit and "quota period" CPU
// limit from its cgroup (v1 controllers or the v2 unified hierarchy).
func cgroupLimits(t *testing.T, podUID, id string) (int64, string) {
	t.Helper()
	read := func(p string) (string, bool) {
		b, err := os.ReadFile(p)
		return strings.TrimSpace(string(b)), err == nil
	}
	rel := podContainerCgroup(podUID, id)
	if v, ok := read(filepath.Join("/sys/fs/cgroup/memory", rel, "memory.limit_in_bytes")); ok {
		q, _ := read(filepath.Join("/sys/fs/cgroup/cpu", rel, "cpu.cfs_quota_us"))
		per, _ := read(filepath.Join("/sys/fs/cgroup/cpu", rel, "cpu.cfs_period_us"))
		var n int64
		fmt.Sscan(v, &n)
		return n, q + " " + per
	}
	for _, root := range []string{"/sys/fs/cgroup", "/sys/fs/cgroup/unified"} {
		if v, ok := read(filepath.Join(root, rel, "memory.max")); ok {
			c, _ := read(filepath.Join(root, rel, "cpu.max"))
			var n int64
			fmt.Sscan(v, &n)
			return n, c
		}
	}
	t.Fatalf("no cgroup found for container %s of pod %s", id, podUID)
	return 0, ""
}

// checkNoSwap checks kubelet's NoSwap (memorySwap's default) on a
// container with memory limit mem: cgroup v1 memory+swap equal to the
// memory limit, cgroup v2 memory.swap.max 0, where the host has the swap
// controller (no file: nothing to check, as kubelet sets nothing).
func checkNoSwap(t *testing.T, podUID, id string, mem int64) {
	t.Helper()
	rel := podContainerCgroup(podUID, id)
	if b, err := os.ReadFile(filepath.Join("/sys/fs/cgroup/memory", rel, "memory.memsw.limit_in_bytes")); err == nil {
		if got := strings.TrimSpace(string(b)); got != strconv.FormatInt(mem, 10) {
			t.Errorf("container %s: memory.memsw.limit_in_bytes %s, want the memory limit %d (NoSwap)", id, got, mem)
		}
		return
	}
	for _, root := range []string{"/sys/fs/cgroup", "/sys/fs/cgroup/unified"} {
		if b, err := os.ReadFile(filepath.Join(root, rel, "memory.swap.max")); err == nil {
			if got := strings.TrimSpace(string(b)); got != "0" {
				t.Errorf("container %s: memory.swap.max %s, want 0 (NoSwap)", id, got)
			}
			return
		}
	}
}

// Pods that do not fit are refused with kubelet's reasons.
func TestPodsThatDoNotFitAreRefused(t *testing.T) {
	t.Parallel()
	a, _ := readyPodAgent(t, "maxPods: 2\n")
	ctx := context.Background()
	sleeper := func(name, resources string) {
		kubectl(t, a.env, podYAML(a.node+"-"+name, a.node, fmt.Sprintf(`  containers:
  - name: c
    image: %s
    command: ["sleep", "3600"]
%s`, testimage.Ref, resources)), "apply", "-f", "-")
	}
	sleeper("big", "    resources: {requests: {cpu: \"1000\"}}\n")
	p := a.waitPod(ctx, a.node+"-big", 30*time.Second, "phase Failed", phaseIs(corev1.PodFailed))
	if p.Status.Reason != "OutOfcpu" || !strings.Contains(p.Status.Message, "cpu") {
		t.Errorf("big pod: reason %q message %q", p.Status.Reason, p.Status.Message)
	}
	sleeper("a", "")
	a.waitPod(ctx, a.node+"-a", 30*time.Second, "running", running)
	sleeper("b", "")
	a.waitPod(ctx, a.node+"-b", 30*time.Second, "running", running)
	sleeper("c", "")
	p = a.waitPod(ctx, a.node+"-c", 30*time.Second, "phase Failed", phaseIs(corev1.PodFailed))
	if p.Status.Reason != "OutOfpods" {
		t.Errorf("third pod with maxPods 2: reason %q message %q", p.Status.Reason, p.Status.Message)
	}
}

// A hostNetwork pod shares the host's network (podIP = hostIP); any other
// pod gets its own network namespace with loopback only and no pod IP (no
// CNI yet).
func TestPodNetworking(t *testing.T) {
	t.Parallel()
	var hostIface string
	ifs, _ := net.Interfaces()
	for _, i := range ifs {
		if i.Flags&net.FlagLoopback == 0 && i.Flags&net.FlagUp != 0 {
			hostIface = i.Name
			break
		}
	}
	if hostIface == "" {
		t.Skip("the host has no non-loopback interface up")
	}
	a, _ := readyPodAgent(t, "")
	ctx := context.Background()
	for _, hostNetwork := range []bool{true, false} {
		name := fmt.Sprintf("%s-hostnet-%t", a.node, hostNetwork)
		kubectl(t, a.env, podYAML(name, a.node, fmt.Sprintf(`  hostNetwork: %t
  containers:
  - name: c
    image: %s
    command: ["sh", "-c", "cat /proc/net/dev; echo end-of-devices; exec sleep 3600"]
`, hostNetwork, testimage.Ref)), "apply", "-f", "-")
		p := a.waitPod(ctx, name, 30*time.Second, "running", running)
		log := a.waitLog(p, "c", 0, "end-of-devices")
		hasHost := strings.Contains(log, hostIface+":")
		if !strings.Contains(log, "lo:") || hasHost != hostNetwork {
			t.Errorf("hostNetwork=%t: the container's /proc/net/dev (host interface %s seen: %t):\n%s", hostNetwork, hostIface, hasHost, log)
		}
		if hostNetwork && (p.Status.PodIP == "" || p.Status.PodIP != p.Status.HostIP || len(p.Status.PodIPs) != 1) {
			t.Errorf("hostNetwork pod: podIP %q podIPs %v hostIP %q", p.Status.PodIP, p.Status.PodIPs, p.Status.HostIP)
		}
		if !hostNetwork && (p.Status.PodIP != "" || len(p.Status.PodIPs) != 0) {
			t.Errorf("pod without hostNetwork: podIP %q podIPs %v, want none", p.Status.PodIP, p.Status.PodIPs)
		}
	}
}

// Pods with requests survive agent restarts: admission after a restart sees
// the node's real allocatable (kubelet's getNodeAnyWay), even for static
// pods that are admitted before the node is registered again. Issue 11, bug
// 1: both pods were Failed/OutOfcpu after three SIGKILL restarts.
func TestAgentRestartsKeepPodsWithRequests(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	a, _ := podAgent(t, "staticPodPath: "+dir+"\n")
	ctx := context.Background()
	body := fmt.Sprintf(`  terminationGracePeriodSeconds: 1
  containers:
  - name: c
    image: %s
    command: ["sleep", "3600"]
    resources: {requests: {cpu: 100m, memory: 32Mi}}
`, testimage.Ref)
	if err := os.WriteFile(filepath.Join(dir, "static.yaml"), []byte("apiVersion: v1\nkind: Pod\nmetadata: {name: static, namespace: default}\nspec:\n"+body), 0o644); err != nil {
		t.Fatal(err)
	}
	a.start()
	a.waitReady(ctx, 30*time.Second)
	api := a.node + "-requests"
	kubectl(t, a.env, podYAML(api, a.node, body), "apply", "-f", "-")
	names := []string{api, "static-" + a.node}
	before := map[string]corev1.ContainerStatus{}
	for _, n := range names {
		before[n] = a.waitPod(ctx, n, 30*time.Second, "running", running).Status.ContainerStatuses[0]
	}
	for i := 1; i <= 10; i++ {
		a.stop(syscall.SIGKILL)
		a.start()
		a.waitReady(ctx, 30*time.Second)
		for deadline := time.Now().Add(10 * time.Second); !a.out.Contains("pod sources synced") && time.Now().Before(deadline); {
			time.Sleep(50 * time.Millisecond)
		}
		if a.out.Contains("pod rejected") || a.out.Contains("started container") {
			t.Fatalf("restart %d: the agent rejected or started a pod:\n%s", i, a.out)
		}
	}
	// The statuses written after the last restart.
	time.Sleep(2 * time.Second)
	for _, n := range names {
		p := a.waitPod(ctx, n, 10*time.Second, "running", running)
		b, c := before[n], p.Status.ContainerStatuses[0]
		if p.Status.Phase != corev1.PodRunning || c.ContainerID != b.ContainerID || c.RestartCount != 0 {
			t.Errorf("%s after 10 restarts: phase %s reason %q, container %s (was %s), restartCount %d",
				n, p.Status.Phase, p.Status.Reason, c.ContainerID, b.ContainerID, c.RestartCount)
		}
	}
}
