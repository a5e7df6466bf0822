// Package fault is the fault suite of issue 15: it breaks the real
// components under a running nodeagent (stops and freezes the API server and
// etcd, blackholes, delays and resets the agent's connections through
// internal/testing/faultproxy, kills containerd, starves the agent of CPU) and checks
// what must hold: the Lease keeps being renewed, the Node never goes
// NotReady, no container restarts, the agent neither crashes nor leaks.
//
// The tests stop the API server and containerd, so the package never shares
// a cluster: it starts its own (NODEAGENT_CLUSTER_DIR is ignored; set
// NODEAGENT_FAULT_CLUSTER_DIR to reuse a dedicated one while iterating).
// Tests that break shared components run one at a time, first; tests whose
// fault is confined to their own agent (proxy, CPU quota) then run in
// parallel. The short forms run in `make test` (hack/test.sh);
// NODEAGENT_FAULT_LONG=1 runs the durations of the issue (API server down
// 60s, latency 5 min, CPU quota 10 min, 20 pods); see docs/reliability.md.
package fault

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nodeagent/nodeagent/internal/testing/testlog"

	"github.com/opencontainers/cgroups"
	cgmanager "github.com/opencontainers/cgroups/manager"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	restclient "k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/nodeagent/nodeagent/internal/testing/faultproxy"
	"github.com/nodeagent/nodeagent/internal/testing/localcluster"
	"github.com/nodeagent/nodeagent/internal/testing/testenv"
	"github.com/nodeagent/nodeagent/internal/testing/testimage"
	"github.com/nodeagent/nodeagent/runtime"
)

var agentBin string

// long says whether to run the full durations of the issue.
var long = os.Getenv("NODEAGENT_FAULT_LONG") != ""

// pick returns short in the CI form and full under NODEAGENT_FAULT_LONG.
func pick[T any](short, full T) T {
	if long {
		return full
	}
	return short
}

const renewInterval = 10 * time.Second // nodeLeaseDurationSeconds 40 × 0.25

func TestMain(m *testing.M) {
	if d := os.Getenv("NODEAGENT_FAULT_CLUSTER_DIR"); d != "" {
		os.Setenv("NODEAGENT_CLUSTER_DIR", d)
	} else {
		os.Unsetenv("NODEAGENT_CLUSTER_DIR") // testenv starts a private one
	}
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
		cmd := exec.Command("go", "build", "-o", agentBin, "./cmd/nodeagent")
		cmd.Dir, cmd.Stdout, cmd.Stderr = root, os.Stderr, os.Stderr
		if err := cmd.Run(); err != nil {
			fmt.Fprintln(os.Stderr, "fault: building nodeagent:", err)
			os.Exit(1)
		}
		cleanups = append(cleanups, func() { os.RemoveAll(dir) })
	}
	testenv.Main(m, cleanups...)
}

// agent is one nodeagent process with its own containerd namespace.
type agent struct {
	t       *testing.T
	env     *testenv.Env
	node    string
	ns      string // containerd namespace
	dir     string
	health  string
	proxy   *faultproxy.Proxy // nil when the agent talks to the API server directly
	cmd     *exec.Cmd
	out     *syncBuffer
	exited  chan struct{}
	started time.Time
	pods    int // pods created by startPods
}

type agentOpts struct {
	viaProxy bool // the kubeconfig points at a faultproxy in front of the API server
	// config is extra YAML for the agent's config file; one that sets
	// cniConfDir replaces the default (no pod network).
	config string
}

func newAgent(t *testing.T, o agentOpts) *agent {
	t.Helper()
	env := testenv.Cluster(t)
	a := &agent{t: t, env: env, node: testenv.NodeName(t), dir: t.TempDir()}
	a.ns = "fault-" + a.node
	_, kubeconfig := env.NodeConfig(t, a.node)
	if o.viaProxy {
		p, err := faultproxy.New(strings.TrimPrefix(env.APIServerURL, "https://"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { p.Close() })
		a.proxy = p
		// The API server's serving certificate has 127.0.0.1 among its
		// SANs, so TLS verifies through the proxy's loopback address.
		b, err := os.ReadFile(kubeconfig)
		if err != nil {
			t.Fatal(err)
		}
		kubeconfig = filepath.Join(a.dir, "kubeconfig")
		if err := os.WriteFile(kubeconfig, bytes.ReplaceAll(b, []byte(env.APIServerURL), []byte("https://"+p.Addr())), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	rt, err := runtime.New(runtime.Options{Address: env.ContainerdAddress, Namespace: a.ns})
	if err != nil {
		t.Fatal(err)
	}
	if err := testimage.Import(context.Background(), rt); err != nil {
		t.Fatal(err)
	}
	port := freePort(t)
	a.health = fmt.Sprintf("http://127.0.0.1:%d", port)
	cfg := fmt.Sprintf(`apiVersion: config.nodeagent.io/v1alpha1
kind: NodeAgentConfiguration
rootDir: %s
podLogsDir: %s
containerLogsDir: %s
healthzPort: %d
port: %d
containerRuntimeEndpoint: unix://%s
containerRuntimeNamespace: %s
imageGCHighThresholdPercent: 100
authentication:
  x509:
    clientCAFile: %s
`, filepath.Join(a.dir, "root"), filepath.Join(a.dir, "log", "pods"), filepath.Join(a.dir, "log", "containers"), port, freePort(t), env.ContainerdAddress, a.ns, env.CACert)
	if !strings.Contains(o.config, "cniConfDir:") {
		cfg += "cniConfDir: \"\"\n"
	}
	// Thresholds a shared test host (other builds and caches filling its
	// disk) does not cross: pods evicted or refused for the host's disk
	// would be failures of the fault under test (as in e2e's agents; a make
	// test once failed five fault tests on imagefs.available at 14 % free).
	// Eviction itself is tested by e2e/eviction_test.go.
	if !strings.Contains(o.config, "evictionHard:") {
		cfg += "evictionHard:\n  memory.available: 100Mi\n  nodefs.available: 1%\n  imagefs.available: 1%\n"
	}
	cfg += o.config
	cfgPath := filepath.Join(a.dir, "config.yaml")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	a.out = &syncBuffer{}
	a.cmd = exec.Command(agentBin, "--config", cfgPath, "--kubeconfig", kubeconfig, "--hostname-override", a.node)
	a.cmd.Stdout, a.cmd.Stderr = a.out, a.out
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		zero := int64(0)
		pods, _ := env.Admin.CoreV1().Pods("default").List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + a.node})
		if pods != nil {
			for _, p := range pods.Items {
				_ = env.Admin.CoreV1().Pods("default").Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: &zero})
			}
			// Let the agent stop them and clean up after them (volumes,
			// namespaces, cgroups), briefly.
			_ = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
				cs, err := rt.ListContainers(ctx)
				return err == nil && len(cs) == 0 && emptyDirs(append(testenv.AgentRunDirs(env.ContainerdAddress, a.ns), filepath.Join(a.dir, "root", "pods"))...), nil
			})
		}
		if a.cmd.Process != nil {
			_ = a.cmd.Process.Kill()
			<-a.exited
		}
		cs, _ := rt.ListContainers(ctx)
		for _, c := range cs {
			_ = rt.RemoveContainer(ctx, c.ID)
		}
		_ = rt.Close()
		// What the agent did not clean up: mounts under its pod
		// directories (volumes) and its namespace directories.
		if _, err := testenv.RemoveHostLeftovers(filepath.Join(a.dir, "root", "pods")); err != nil {
			t.Errorf("host cleanup: %v", err)
		}
		// The rootDir's own shared bind mount (volume.MakeRShared).
		if err := testenv.UnmountRootDir(filepath.Join(a.dir, "root")); err != nil {
			t.Errorf("host cleanup: %v", err)
		}
		testenv.CleanAgentRunDirs(t, env.ContainerdAddress, a.ns)
		// The agent's cgroup root (its namespace's), in every controller.
		if m, err := cgmanager.New(&cgroups.Cgroup{Path: "/nodeagent-" + a.ns, Resources: &cgroups.Resources{SkipDevices: true}}); err == nil {
			_ = m.Destroy()
		}
		_ = env.Admin.CoreV1().Nodes().Delete(ctx, a.node, metav1.DeleteOptions{})
		_ = env.Admin.CoordinationV1().Leases(corev1.NamespaceNodeLease).Delete(ctx, a.node, metav1.DeleteOptions{})
		if t.Failed() || os.Getenv("NODEAGENT_FAULT_LOGS") != "" {
			t.Logf("agent %s log:\n%s", a.node, a.out)
		}
	})
	if err := a.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	a.started = time.Now()
	a.exited = make(chan struct{})
	go func() { _ = a.cmd.Wait(); close(a.exited) }()
	return a
}

// alive fails the test if the agent process exited (or was replaced).
func (a *agent) checkAlive() {
	a.t.Helper()
	select {
	case <-a.exited:
		a.t.Fatalf("the agent (pid %d) exited: %v", a.cmd.Process.Pid, a.cmd.ProcessState)
	default:
	}
	a.t.Logf("agent process pid %d still running since %s", a.cmd.Process.Pid, time.Since(a.started).Round(time.Second))
}

// waitReady waits for the Node to be Ready and its Lease renewed with the
// Node as owner (the steady state every fault starts from).
func (a *agent) waitReady(timeout time.Duration) {
	a.t.Helper()
	ctx := context.Background()
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		n, err := a.env.Admin.CoreV1().Nodes().Get(ctx, a.node, metav1.GetOptions{})
		if err != nil || !ready(n) {
			return false, nil
		}
		l, err := a.env.Admin.CoordinationV1().Leases(corev1.NamespaceNodeLease).Get(ctx, a.node, metav1.GetOptions{})
		return err == nil && len(l.OwnerReferences) > 0 && l.Spec.RenewTime != nil, nil
	})
	if err != nil {
		a.t.Fatalf("node %s not Ready with an owned Lease within %s", a.node, timeout)
	}
}

func ready(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// get fetches a path of the agent's health server.
func (a *agent) get(path string) (int, string) {
	c := http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get(a.health + path)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	var b bytes.Buffer
	_, _ = b.ReadFrom(resp.Body)
	return resp.StatusCode, b.String()
}

// metric reads one unlabelled sample (e.g. go_goroutines) from /metrics.
func (a *agent) metric(name string) float64 {
	a.t.Helper()
	code, body := a.get("/metrics")
	if code != http.StatusOK {
		a.t.Fatalf("/metrics: %d %s", code, body)
	}
	sc := bufio.NewScanner(strings.NewReader(body))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 2 && f[0] == name {
			v, err := strconv.ParseFloat(f[1], 64)
			if err != nil {
				a.t.Fatalf("/metrics %s: %v", name, err)
			}
			return v
		}
	}
	a.t.Fatalf("/metrics has no %s", name)
	return 0
}

// observer polls the agent's Lease and Node (every 250ms, through the
// admin client, retrying through outages) and records every renewTime and
// every moment the Node was seen not Ready.
type observer struct {
	a      *agent
	cancel context.CancelFunc
	done   chan struct{}

	mu       sync.Mutex
	renewals []time.Time // distinct renewTimes, in order
	seen     []time.Time // when each of renewals was first seen
	notReady []string    // "at: condition" for every sighting of Ready != True
}

func (a *agent) observe() *observer {
	ctx, cancel := context.WithCancel(context.Background())
	o := &observer{a: a, cancel: cancel, done: make(chan struct{})}
	// A client of its own with short timeouts: the API server may be gone.
	cfg := rest(a)
	cfg.Timeout = 2 * time.Second
	c := kubernetes.NewForConfigOrDie(cfg)
	go func() {
		defer close(o.done)
		tick := time.NewTicker(250 * time.Millisecond)
		defer tick.Stop()
		for {
			if l, err := c.CoordinationV1().Leases(corev1.NamespaceNodeLease).Get(ctx, a.node, metav1.GetOptions{}); err == nil && l.Spec.RenewTime != nil {
				o.mu.Lock()
				if rt := l.Spec.RenewTime.Time; len(o.renewals) == 0 || rt.After(o.renewals[len(o.renewals)-1]) {
					o.renewals = append(o.renewals, rt)
					o.seen = append(o.seen, time.Now())
				}
				o.mu.Unlock()
			}
			if n, err := c.CoreV1().Nodes().Get(ctx, a.node, metav1.GetOptions{}); err == nil && !ready(n) {
				var cond string
				for _, c := range n.Status.Conditions {
					if c.Type == corev1.NodeReady {
						cond = fmt.Sprintf("%s %s: %s", c.Status, c.Reason, c.Message)
					}
				}
				o.mu.Lock()
				o.notReady = append(o.notReady, time.Now().Format("15:04:05.000")+" Ready="+cond)
				o.mu.Unlock()
			} else if apierrors.IsNotFound(err) {
				o.mu.Lock()
				o.notReady = append(o.notReady, "node deleted")
				o.mu.Unlock()
			}
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
	return o
}

func rest(a *agent) *restclient.Config {
	cfg, err := clientcmd.BuildConfigFromFlags("", a.env.AdminKubeconfig)
	if err != nil {
		a.t.Fatal(err)
	}
	return cfg
}

// stop ends the observation.
func (o *observer) stop() {
	o.cancel()
	<-o.done
}

// renewedAfter returns when the first Lease renewal after t was seen (zero
// if none yet). A renewal counts when the API server has it: its renewTime
// is the agent's clock when it sent the update, which a delayed request
// (held by a partition) carries unchanged, so the time it was seen is what
// the node lifecycle controller goes by.
func (o *observer) renewedAfter(t time.Time) time.Time {
	o.mu.Lock()
	defer o.mu.Unlock()
	for i, s := range o.seen {
		if s.After(t) && i > 0 {
			return s
		}
	}
	return time.Time{}
}

// renewedSince returns when the first renewal whose renewTime is after t was
// seen (zero if none yet). After an API server restart, a renewal sent after
// the new process started cannot have been written before it: the agent's
// clock is this machine's.
func (o *observer) renewedSince(t time.Time) time.Time {
	o.mu.Lock()
	defer o.mu.Unlock()
	for i, r := range o.renewals {
		if r.After(t) {
			return o.seen[i]
		}
	}
	return time.Time{}
}

// log writes every renewal (renewTime, and when it was seen) since from.
func (o *observer) log(from time.Time) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for i, r := range o.renewals {
		if o.seen[i].After(from) {
			o.a.t.Logf("renewal: renewTime %s seen %s (+%s)", r.Format("15:04:05.000"), o.seen[i].Format("15:04:05.000"), o.seen[i].Sub(from).Round(time.Millisecond))
		}
	}
}

// waitRenewedAfter waits (up to timeout) for a renewal seen after t and
// returns when it was seen.
func (o *observer) waitRenewedAfter(t time.Time, timeout time.Duration) time.Time {
	o.a.t.Helper()
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if r := o.renewedAfter(t); !r.IsZero() {
			return r
		}
		time.Sleep(100 * time.Millisecond)
	}
	o.a.t.Fatalf("no Lease renewal within %s after %s", timeout, t.Format("15:04:05.000"))
	return time.Time{}
}

// maxGap returns the longest gap between consecutive renewals in [from, to]
// (counting from the last renewal before from).
func (o *observer) maxGap(from, to time.Time) (gap time.Duration, at time.Time, n int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	var prev time.Time
	for _, r := range o.renewals {
		if r.After(to) {
			break
		}
		if !r.After(from) {
			prev = r
			continue
		}
		n++
		if !prev.IsZero() && r.Sub(prev) > gap {
			gap, at = r.Sub(prev), prev
		}
		prev = r
	}
	if !prev.IsZero() && to.Sub(prev) > gap {
		gap, at = to.Sub(prev), prev // still waiting at the end
	}
	return gap, at, n
}

// checkNeverNotReady fails the test if the Node was ever seen not Ready.
func (o *observer) checkNeverNotReady() {
	o.a.t.Helper()
	o.mu.Lock()
	defer o.mu.Unlock()
	if len(o.notReady) > 0 {
		o.a.t.Errorf("the Node was seen not Ready %d times, first: %s", len(o.notReady), o.notReady[0])
	} else {
		o.a.t.Logf("the Node stayed Ready throughout (polled every 250ms)")
	}
}

func freePort(t *testing.T) int { return testenv.FreePort(t) }

type syncBuffer = testlog.Buffer

// emptyDirs reports whether every one of dirs is empty or missing.
func emptyDirs(dirs ...string) bool {
	for _, d := range dirs {
		if es, _ := os.ReadDir(d); len(es) > 0 {
			return false
		}
	}
	return true
}

// cluster is the test's cluster as a localcluster.State, for fault control.
func cluster(t *testing.T) *localcluster.State {
	return testenv.Cluster(t).State
}

// faultSeed is a test's random seed: NODEAGENT_FAULT_SEED when set (to
// replay a run's choices), else the time. It is logged.
func faultSeed(t *testing.T) uint64 {
	t.Helper()
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("NODEAGENT_FAULT_SEED"); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("NODEAGENT_FAULT_SEED=%q: %v", s, err)
		}
		seed = v
	}
	t.Logf("seed %d (NODEAGENT_FAULT_SEED=%d replays the choices)", seed, seed)
	return seed
}
