// Package e2e runs the nodeagent binary against the real local cluster
// (internal/testing/testenv): kube-apiserver with Node authorization and
// NodeRestriction, kube-controller-manager's node lifecycle controller,
// containerd. Every test uses its own node name, so tests run in parallel.
package e2e

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nodeagent/nodeagent/internal/testing/testlog"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/nodeagent/nodeagent/internal/testing/testenv"
)

var agentBin string

func TestMain(m *testing.M) {
	var cleanups []func()
	agentBin = os.Getenv("NODEAGENT_BIN")
	if agentBin == "" {
		dir, err := os.MkdirTemp("", "nodeagent-bin-")
		if err != nil {
			panic(err)
		}
		agentBin = filepath.Join(dir, "nodeagent")
		root, err := testenv.RepoRoot()
		if err != nil {
			panic(err)
		}
		// make build's build (hack/build.sh): the agent and, beside it, the
		// static log writer that is also shareProcessNamespace pods' pause
		// (a pause from a plain go build of the agent, dynamically linked,
		// cannot run in the pause's rootfs of one file).
		cmd := exec.Command("hack/build.sh", dir)
		cmd.Dir, cmd.Stdout, cmd.Stderr = root, os.Stderr, os.Stderr
		if err := cmd.Run(); err != nil {
			fmt.Fprintln(os.Stderr, "e2e: building nodeagent:", err)
			os.Exit(1)
		}
		cleanups = append(cleanups, func() { os.RemoveAll(dir) })
	}
	testenv.Main(m, cleanups...)
}

// agent is one nodeagent process.
type agent struct {
	t          *testing.T
	env        *testenv.Env
	node       string
	dir        string
	configPath string
	configDir  string
	kubeconfig string
	healthURL  string
	apiPort    int // the node API's port
	args       []string
	cmd        *exec.Cmd
	out        *syncBuffer
	exited     chan struct{} // closed when the process has exited
}

type agentOpts struct {
	node       string // default: testenv.NodeName(t)
	config     string // extra YAML lines for the main config file
	kubeconfig string // default: node credentials for node
	noRuntime  bool   // do not point the agent at containerd
}

func newAgent(t *testing.T, env *testenv.Env, o agentOpts) *agent {
	t.Helper()
	if o.node == "" {
		o.node = testenv.NodeName(t)
	}
	a := &agent{t: t, env: env, node: o.node, dir: t.TempDir()}
	a.kubeconfig = o.kubeconfig
	if a.kubeconfig == "" {
		_, a.kubeconfig = env.NodeConfig(t, o.node)
	}
	port := freePort(t)
	a.healthURL = fmt.Sprintf("http://127.0.0.1:%d", port)
	// Agents run in parallel on one host: each serves its node API on a
	// port of its own (advertised in the Node's daemonEndpoints).
	a.apiPort = freePort(t)
	// The API server's kubelet client certificate is signed by the
	// cluster's CA.
	// Each agent keeps its container logs and their symlinks under its
	// own directory (podLogsDir, containerLogsDir), not the host's
	// /var/log/pods and /var/log/containers: an agent cleans up the log
	// directories of pods it does not know.
	cfg := fmt.Sprintf("apiVersion: config.nodeagent.io/v1alpha1\nkind: NodeAgentConfiguration\nrootDir: %s\nhealthzPort: %d\nport: %d\n"+
		"podLogsDir: %s\ncontainerLogsDir: %s\n"+
		"authentication:\n  x509:\n    clientCAFile: %s\n",
		filepath.Join(a.dir, "root"), port, a.apiPort, a.podLogsDir(), a.containerLogsDir(), env.CACert)
	if !o.noRuntime {
		cfg += fmt.Sprintf("containerRuntimeEndpoint: unix://%s\n", env.ContainerdAddress)
	} else {
		cfg += fmt.Sprintf("containerRuntimeEndpoint: unix://%s\n", filepath.Join(a.dir, "no-containerd.sock"))
	}
	if !strings.Contains(o.config, "cniConfDir:") {
		// No pod networking (and no network readiness) unless the test
		// configures a CNI network, e.g. with testenv.WriteCNIConfig.
		cfg += "cniConfDir: \"\"\n"
	}
	if !strings.Contains(o.config, "imageGCHighThresholdPercent:") {
		// The test image is imported, not pulled: a full disk must not
		// garbage-collect it under a running test.
		cfg += "imageGCHighThresholdPercent: 100\n"
	}
	if !strings.Contains(o.config, "evictionHard:") {
		// Agents evict pods under pressure: a shared test host whose disk
		// is 85% full must not evict (or refuse) the pods of unrelated
		// tests. The eviction tests set their own thresholds.
		cfg += "evictionHard:\n  memory.available: 100Mi\n  nodefs.available: 1%\n  imagefs.available: 1%\n"
	}
	cfg += o.config
	a.configPath = filepath.Join(a.dir, "config.yaml")
	a.configDir = filepath.Join(a.dir, "config.d")
	if err := os.MkdirAll(a.configDir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(a.configPath, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	a.args = []string{"--config", a.configPath, "--config-dir", a.configDir, "--kubeconfig", a.kubeconfig, "--hostname-override", a.node}
	t.Cleanup(func() {
		a.stop(syscall.SIGKILL)
		// The rootDir's own shared bind mount (volume.MakeRShared), before
		// t.TempDir's cleanup removes the directory.
		if err := testenv.UnmountRootDir(a.rootDir()); err != nil {
			t.Errorf("rootDir cleanup: %v", err)
		}
		ctx := context.Background()
		_ = env.Admin.CoreV1().Nodes().Delete(ctx, a.node, metav1.DeleteOptions{})
		_ = env.Admin.CoordinationV1().Leases(corev1.NamespaceNodeLease).Delete(ctx, a.node, metav1.DeleteOptions{})
		if t.Failed() {
			t.Logf("agent %s log:\n%s", a.node, a.out)
		}
	})
	return a
}

// start runs the agent; the process is killed when the test ends.
func (a *agent) start() {
	a.t.Helper()
	a.out = &syncBuffer{}
	a.cmd = exec.Command(agentBin, a.args...)
	a.cmd.Stdout, a.cmd.Stderr = a.out, a.out
	if err := a.cmd.Start(); err != nil {
		a.t.Fatal(err)
	}
	a.exited = make(chan struct{})
	go func(cmd *exec.Cmd, ch chan struct{}) { _ = cmd.Wait(); close(ch) }(a.cmd, a.exited)
}

// stop signals the agent and waits (10s at most) for it to exit.
func (a *agent) stop(sig syscall.Signal) (exitCode int, took time.Duration) {
	if a.cmd == nil || a.cmd.Process == nil {
		return -1, 0
	}
	start := time.Now()
	_ = a.cmd.Process.Signal(sig)
	select {
	case <-a.exited:
	case <-time.After(10 * time.Second):
		_ = a.cmd.Process.Kill()
		<-a.exited
	}
	code := a.cmd.ProcessState.ExitCode()
	a.cmd = nil
	return code, time.Since(start)
}

func (a *agent) lease(ctx context.Context) (*coordinationv1.Lease, error) {
	return a.env.Admin.CoordinationV1().Leases(corev1.NamespaceNodeLease).Get(ctx, a.node, metav1.GetOptions{})
}

// waitNode polls the agent's Node until cond holds (a missing Node is
// waited for) and returns it; it fails the test after timeout, saying what.
func (a *agent) waitNode(ctx context.Context, timeout time.Duration, what string, cond func(*corev1.Node) bool) *corev1.Node {
	a.t.Helper()
	var node *corev1.Node
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		n, err := a.env.Admin.CoreV1().Nodes().Get(ctx, a.node, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		if err != nil {
			return false, err
		}
		node = n
		return cond(n), nil
	})
	if err != nil {
		a.t.Fatalf("node %s: %s not seen within %s: %v", a.node, what, timeout, err)
	}
	return node
}

// readyIs says whether the Ready condition has status st.
func readyIs(st corev1.ConditionStatus) func(*corev1.Node) bool {
	return func(n *corev1.Node) bool {
		c := condition(n, corev1.NodeReady)
		return c != nil && c.Status == st
	}
}

// waitReady waits for Ready=True and returns how long it took from the call.
func (a *agent) waitReady(ctx context.Context, timeout time.Duration) time.Duration {
	a.t.Helper()
	start := time.Now()
	a.waitNode(ctx, timeout, "Ready=True", readyIs(corev1.ConditionTrue))
	return time.Since(start)
}

// hasTaint says whether the Node carries a taint with key.
func hasTaint(key string) func(*corev1.Node) bool {
	return func(n *corev1.Node) bool {
		for _, tn := range n.Spec.Taints {
			if tn.Key == key {
				return true
			}
		}
		return false
	}
}

// renewTimes watches the Lease and returns the first n distinct renewTimes.
func (a *agent) renewTimes(ctx context.Context, n int, timeout time.Duration) []time.Time {
	a.t.Helper()
	var out []time.Time
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		l, err := a.lease(ctx)
		// The renewal that adds the Node as owner comes as soon as the
		// Node exists, off the cadence: count from the owned Lease.
		if err != nil || l.Spec.RenewTime == nil || len(l.OwnerReferences) == 0 {
			return false, nil
		}
		rt := l.Spec.RenewTime.Time
		if len(out) == 0 || !rt.Equal(out[len(out)-1]) {
			out = append(out, rt)
		}
		return len(out) >= n, nil
	})
	if err != nil {
		a.t.Fatalf("saw %d of %d lease renewals within %s: %v", len(out), n, timeout, err)
	}
	return out
}

func (a *agent) get(path string) (int, string) {
	resp, err := http.Get(a.healthURL + path)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	var b bytes.Buffer
	_, _ = b.ReadFrom(resp.Body)
	return resp.StatusCode, b.String()
}

func condition(n *corev1.Node, t corev1.NodeConditionType) *corev1.NodeCondition {
	for i := range n.Status.Conditions {
		if n.Status.Conditions[i].Type == t {
			return &n.Status.Conditions[i]
		}
	}
	return nil
}

func freePort(t *testing.T) int { return testenv.FreePort(t) }

type syncBuffer = testlog.Buffer

// netnsDir and podNSDir are the agent's pods' namespace directories
// (config's NetNSDir and PodNSDir for its containerd and namespace).
func (a *agent) netnsDir() string {
	return testenv.AgentRunDirs(a.env.ContainerdAddress, "e2e-"+a.node)[0]
}

func (a *agent) podNSDir() string {
	return testenv.AgentRunDirs(a.env.ContainerdAddress, "e2e-"+a.node)[1]
}
