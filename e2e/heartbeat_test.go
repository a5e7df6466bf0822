package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/nodeagent/nodeagent/internal/testing/testenv"
)

// checkCadence asserts the gaps between consecutive renewTimes are want±1s.
func checkCadence(t *testing.T, times []time.Time, want time.Duration) {
	t.Helper()
	for i := 1; i < len(times); i++ {
		gap := times[i].Sub(times[i-1])
		t.Logf("renewTime gap %d: %s", i, gap.Round(time.Millisecond))
		if gap < want-time.Second || gap > want+time.Second {
			t.Errorf("renewTime advanced by %s, want %s ± 1s", gap, want)
		}
	}
}

func TestNodeReadyAndLeaseRenewedEvery10s(t *testing.T) {
	t.Parallel()
	env := testenv.Cluster(t)
	ctx := context.Background()
	a := newAgent(t, env, agentOpts{})
	a.start()
	took := a.waitReady(ctx, 30*time.Second)
	t.Logf("node Ready %s after start", took.Round(time.Millisecond))

	node, err := env.Admin.CoreV1().Nodes().Get(ctx, a.node, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range map[string]string{"kubernetes.io/hostname": a.node, "kubernetes.io/os": "linux"} {
		if node.Labels[k] != v {
			t.Errorf("label %s = %q, want %q", k, node.Labels[k], v)
		}
	}
	if node.Labels["kubernetes.io/arch"] == "" {
		t.Error("no kubernetes.io/arch label")
	}
	// The agent registers without taints; the node lifecycle controller may
	// add node.kubernetes.io/not-ready while the first status is on its way,
	// and must take it off once the node is Ready.
	a.waitNode(ctx, 20*time.Second, "no taints", func(n *corev1.Node) bool { return len(n.Spec.Taints) == 0 })
	for _, r := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory, corev1.ResourcePods} {
		if q, ok := node.Status.Capacity[r]; !ok || q.IsZero() {
			t.Errorf("capacity %s missing", r)
		}
		if _, ok := node.Status.Allocatable[r]; !ok {
			t.Errorf("allocatable %s missing", r)
		}
	}
	if node.Status.NodeInfo.KernelVersion == "" || node.Status.NodeInfo.OperatingSystem != "linux" {
		t.Errorf("nodeInfo = %+v", node.Status.NodeInfo)
	}
	if c := condition(node, corev1.NodeReady); c.Reason != "KubeletReady" {
		t.Errorf("Ready reason = %q, want KubeletReady", c.Reason)
	}

	var lease *coordinationv1.Lease
	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
		var err error
		lease, err = a.lease(ctx)
		return err == nil && len(lease.OwnerReferences) > 0, nil
	}); err != nil {
		t.Fatalf("no Lease with an owner reference within 10s: %v", err)
	}
	if ptr.Deref(lease.Spec.HolderIdentity, "") != a.node || ptr.Deref(lease.Spec.LeaseDurationSeconds, 0) != 40 {
		t.Errorf("lease spec = holder %v duration %v", lease.Spec.HolderIdentity, lease.Spec.LeaseDurationSeconds)
	}
	want := metav1.OwnerReference{APIVersion: "v1", Kind: "Node", Name: a.node, UID: node.UID}
	if len(lease.OwnerReferences) != 1 || lease.OwnerReferences[0] != want {
		t.Errorf("lease owner references = %+v, want [%+v]", lease.OwnerReferences, want)
	}
	checkCadence(t, a.renewTimes(ctx, 4, 45*time.Second), 10*time.Second)

	code, body := a.get("/readyz")
	if code != 200 {
		t.Errorf("/readyz = %d %s", code, body)
	}
	if code, body := a.get("/livez"); code != 200 {
		t.Errorf("/livez = %d %s", code, body)
	}
	_, metrics := a.get("/metrics")
	for _, m := range []string{"nodeagent_lease_renew_duration_seconds_bucket", "nodeagent_lease_renew_attempts_total{result=\"success\"}", "nodeagent_lease_renew_failures_total", "nodeagent_lease_last_renew_timestamp_seconds"} {
		if !strings.Contains(metrics, m) {
			t.Errorf("/metrics lacks %s", m)
		}
	}

	// SIGTERM: exit 0 within a few seconds, and the Lease stays.
	code, stopTook := a.stop(syscall.SIGTERM)
	if code != 0 || stopTook > 5*time.Second {
		t.Errorf("SIGTERM: exit code %d after %s, want 0 within 5s", code, stopTook)
	}
	if _, err := a.lease(ctx); err != nil {
		t.Errorf("lease after SIGTERM: %v (it must not be deleted)", err)
	}
}

func TestLeaseRenewedEvery15sWith60sDuration(t *testing.T) {
	t.Parallel()
	env := testenv.Cluster(t)
	ctx := context.Background()
	a := newAgent(t, env, agentOpts{config: "nodeLeaseDurationSeconds: 60\n"})
	a.start()
	a.waitReady(ctx, 30*time.Second)
	times := a.renewTimes(ctx, 3, 40*time.Second)
	checkCadence(t, times, 15*time.Second)
	if l, _ := a.lease(ctx); ptr.Deref(l.Spec.LeaseDurationSeconds, 0) != 60 {
		t.Errorf("leaseDurationSeconds = %v, want 60", l.Spec.LeaseDurationSeconds)
	}
}

// Issue #3: a drop-in changes the lease duration of a running agent.
func TestLiveLeaseDurationChange(t *testing.T) {
	t.Parallel()
	env := testenv.Cluster(t)
	ctx := context.Background()
	a := newAgent(t, env, agentOpts{})
	a.start()
	a.waitReady(ctx, 30*time.Second)
	a.renewTimes(ctx, 2, 25*time.Second)
	if err := os.WriteFile(filepath.Join(a.configDir, "10-lease.conf"),
		[]byte("apiVersion: config.nodeagent.io/v1alpha1\nkind: NodeAgentConfiguration\nnodeLeaseDurationSeconds: 60\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 15*time.Second, true, func(ctx context.Context) (bool, error) {
		l, err := a.lease(ctx)
		return err == nil && ptr.Deref(l.Spec.LeaseDurationSeconds, 0) == 60, nil
	})
	if err != nil {
		t.Fatalf("leaseDurationSeconds did not become 60: %v", err)
	}
	checkCadence(t, a.renewTimes(ctx, 3, 40*time.Second), 15*time.Second)
	select {
	case <-a.exited:
		t.Errorf("the agent exited during the change: %v", a.cmd.ProcessState)
	default:
	}
	if !a.out.Contains("applying configuration change without restart") {
		t.Errorf("the agent did not log the live change")
	}
}

// After kill -9 the node lifecycle controller marks the node Unknown about
// 40s after the last renewal and taints it; a restarted agent heals both.
func TestKilledAgentGoesUnknownAndRecovers(t *testing.T) {
	t.Parallel()
	env := testenv.Cluster(t)
	ctx := context.Background()
	a := newAgent(t, env, agentOpts{})
	a.start()
	a.waitReady(ctx, 30*time.Second)
	a.renewTimes(ctx, 2, 25*time.Second)
	a.stop(syscall.SIGKILL)
	l, err := a.lease(ctx)
	if err != nil {
		t.Fatal(err)
	}
	lastRenew := l.Spec.RenewTime.Time

	node := a.waitNode(ctx, 90*time.Second, "Ready=Unknown", readyIs(corev1.ConditionUnknown))
	unknownAt := time.Now()
	if c := condition(node, corev1.NodeReady); c.Reason != "NodeStatusUnknown" || c.Message != "Kubelet stopped posting node status." {
		t.Errorf("Ready condition = %s %q %q", c.Status, c.Reason, c.Message)
	}
	after := unknownAt.Sub(lastRenew)
	t.Logf("Ready=Unknown %s after the last renewal", after.Round(100*time.Millisecond))
	// grace period 40s, monitor period 5s.
	if after < 38*time.Second || after > 50*time.Second {
		t.Errorf("Ready=Unknown %s after the last renewal, want about 40s (grace 40s + monitor period 5s)", after)
	}
	a.waitNode(ctx, 30*time.Second, "the unreachable taint", hasTaint(corev1.TaintNodeUnreachable))

	a.start()
	took := a.waitReady(ctx, 30*time.Second)
	t.Logf("Ready again %s after restart", took.Round(time.Millisecond))
	a.waitNode(ctx, 30*time.Second, "the unreachable taint removed", func(n *corev1.Node) bool { return !hasTaint(corev1.TaintNodeUnreachable)(n) })
}

// With node credentials the agent can only touch its own Node and Lease.
func TestNodeCredentialsAreConfined(t *testing.T) {
	t.Parallel()
	env := testenv.Cluster(t)
	ctx := context.Background()
	victim := newAgent(t, env, agentOpts{})
	victim.start()
	victim.waitReady(ctx, 30*time.Second)

	cfg, _ := env.NodeConfig(t, testenv.NodeName(t)+"-intruder")
	intruder := kubernetes.NewForConfigOrDie(cfg)
	leases := intruder.CoordinationV1().Leases(corev1.NamespaceNodeLease)
	// The first Lease may trail the first Ready status by a moment.
	var l *coordinationv1.Lease
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		var err error
		l, err = env.Admin.CoordinationV1().Leases(corev1.NamespaceNodeLease).Get(ctx, victim.node, metav1.GetOptions{})
		return err == nil, nil
	})
	if err != nil {
		t.Fatalf("the victim's Lease: %v", err)
	}
	l.Spec.HolderIdentity = ptr.To("intruder")
	if _, err := leases.Update(ctx, l, metav1.UpdateOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("updating another node's Lease: %v, want Forbidden", err)
	}
	if err := leases.Delete(ctx, victim.node, metav1.DeleteOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("deleting another node's Lease: %v, want Forbidden", err)
	}
	if _, err := leases.Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: victim.node + "-x"}}, metav1.CreateOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("creating a Lease for another node: %v, want Forbidden", err)
	}
	patch := []byte(`{"metadata":{"labels":{"stolen":"yes"}}}`)
	if _, err := intruder.CoreV1().Nodes().Patch(ctx, victim.node, types.StrategicMergePatchType, patch, metav1.PatchOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("patching another Node: %v, want Forbidden", err)
	}
	status := []byte(`{"status":{"conditions":[{"type":"Ready","status":"False","reason":"Intruder"}]}}`)
	if _, err := intruder.CoreV1().Nodes().PatchStatus(ctx, victim.node, status); !apierrors.IsForbidden(err) {
		t.Errorf("patching another Node's status: %v, want Forbidden", err)
	}
	if err := intruder.CoreV1().Nodes().Delete(ctx, victim.node, metav1.DeleteOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("deleting another Node: %v, want Forbidden", err)
	}
}

// A bad configuration is an error naming every problem, before any API call.
func TestBadConfigFailsBeforeAnyAPICall(t *testing.T) {
	t.Parallel()
	env := testenv.Cluster(t)
	a := newAgent(t, env, agentOpts{config: "nodeLeaseDurationSeconds: -1\nnodeStatusUpdateFrequncy: 10s\n"})
	a.start()
	select {
	case <-a.exited:
	case <-time.After(10 * time.Second):
		t.Fatal("agent with a bad config is still running")
	}
	if code := a.cmd.ProcessState.ExitCode(); code != 1 {
		t.Errorf("exit code %d, want 1", code)
	}
	out := a.out.String()
	for _, want := range []string{a.configPath, "nodeLeaseDurationSeconds", "nodeStatusUpdateFrequncy"} {
		if !strings.Contains(out, want) {
			t.Errorf("error output does not name %q:\n%s", want, out)
		}
	}
	if _, err := env.Admin.CoreV1().Nodes().Get(context.Background(), a.node, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("a Node was registered with a bad config: %v", err)
	}
}

// Without an API server the agent keeps retrying and stays alive; without
// containerd it registers, heartbeats and reports Ready=False with the cause.
func TestOutagesAreRetriedNotFatal(t *testing.T) {
	t.Parallel()
	env := testenv.Cluster(t)
	ctx := context.Background()

	t.Run("no API server", func(t *testing.T) {
		t.Parallel()
		kc := filepath.Join(t.TempDir(), "kubeconfig")
		_, good := env.NodeConfig(t, "unused")
		b, err := os.ReadFile(good)
		if err != nil {
			t.Fatal(err)
		}
		dead := freePort(t)
		b = []byte(strings.Replace(string(b), env.APIServerURL, "https://127.0.0.1:"+itoa(dead), 1))
		if err := os.WriteFile(kc, b, 0o600); err != nil {
			t.Fatal(err)
		}
		a := newAgent(t, env, agentOpts{kubeconfig: kc})
		a.start()
		time.Sleep(6 * time.Second)
		select {
		case <-a.exited:
			t.Fatalf("agent exited without an API server: %v\n%s", a.cmd.ProcessState, a.out)
		default:
		}
		if code, _ := a.get("/livez"); code != 200 {
			t.Errorf("/livez = %d without an API server; the agent must not ask to be restarted", code)
		}
		if code, _ := a.get("/readyz"); code == 200 {
			t.Errorf("/readyz = 200 without an API server")
		}
		if !a.out.Contains("retrying") {
			t.Errorf("log does not say it is retrying:\n%s", a.out)
		}
		if code, _ := a.stop(syscall.SIGTERM); code != 0 {
			t.Errorf("exit code %d", code)
		}
	})
	t.Run("no containerd", func(t *testing.T) {
		t.Parallel()
		a := newAgent(t, env, agentOpts{noRuntime: true})
		a.start()
		node := a.waitNode(ctx, 30*time.Second, "Ready=False without containerd", readyIs(corev1.ConditionFalse))
		msg := condition(node, corev1.NodeReady).Message
		if !strings.Contains(strings.ToLower(msg), "runtime") {
			t.Errorf("Ready=False message %q does not name the runtime", msg)
		}
		a.renewTimes(ctx, 2, 25*time.Second) // heartbeats all the same
		select {
		case <-a.exited:
			t.Fatalf("agent exited without containerd: %v", a.cmd.ProcessState)
		default:
		}
	})
}

func itoa(i int) string { return strconv.Itoa(i) }
