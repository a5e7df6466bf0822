// Command startup measures the agent's startup time (issue 16: "process
// start to Ready does not regress"): from just before the agent's exec to
// the moment its Node, read as admin every 20 ms, first shows the Ready
// condition True; and to the Node's registration on the way. Two builds alternate
// round by round (A B, then B A, ...) so that a noisy machine weighs on
// both alike.
//
//	go run ./hack/bench/startup -agent _output/bin/nodeagent -baseline-agent OLD [-rounds 10] [-warm]
//
// Every start is a fresh node (its own name with node credentials, root
// directory and containerd namespace), as a new machine joining: register,
// connect to containerd, first status. By default every start runs a fresh
// copy of the binary with its page cache dropped (a start after boot or
// upgrade reads the executable from disk); -warm leaves the page cache as
// it is. The agent is stopped with SIGTERM and its Node, Lease and
// directories removed before the next start.
//
// It needs a running local cluster with containerd (-cluster-dir, default
// $NODEAGENT_CLUSTER_DIR; hack/localcluster) and root.
package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/opencontainers/cgroups"
	cgmanager "github.com/opencontainers/cgroups/manager"

	"github.com/nodeagent/nodeagent/internal/testing/localcluster"
	"github.com/nodeagent/nodeagent/internal/testing/testenv"
)

type build struct {
	label string
	bin   string
	reg   []time.Duration // start → Node created
	ready []time.Duration // start → Ready=True seen
}

func main() {
	clusterDir := flag.String("cluster-dir", os.Getenv("NODEAGENT_CLUSTER_DIR"), "running local cluster (with containerd)")
	agent := flag.String("agent", "", "the agent binary to measure")
	baseline := flag.String("baseline-agent", "", "a previous build, measured in the same run (optional)")
	rounds := flag.Int("rounds", 10, "starts per build")
	warm := flag.Bool("warm", false, "keep the executable's page cache between starts")
	flag.Parse()
	if err := validate(*clusterDir, *agent, *baseline, *rounds); err != nil {
		fmt.Fprintln(os.Stderr, "startup:", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	builds := []*build{{label: "current", bin: *agent}}
	if *baseline != "" {
		builds = append(builds, &build{label: "baseline", bin: *baseline})
	}
	if err := run(ctx, *clusterDir, builds, *rounds, *warm); err != nil {
		fmt.Fprintln(os.Stderr, "startup:", err)
		os.Exit(1)
	}
	report(builds, *warm)
}

func validate(clusterDir, agent, baseline string, rounds int) error {
	switch {
	case clusterDir == "":
		return errors.New("-cluster-dir: a running local cluster is needed (or set NODEAGENT_CLUSTER_DIR)")
	case agent == "":
		return errors.New("-agent: required")
	case rounds < 1:
		return fmt.Errorf("-rounds: must be at least 1, got %d", rounds)
	}
	for _, b := range []string{agent, baseline} {
		if b == "" {
			continue
		}
		if _, err := os.Stat(b); err != nil {
			return err
		}
	}
	return nil
}

func run(ctx context.Context, clusterDir string, builds []*build, rounds int, warm bool) error {
	state, err := localcluster.Load(clusterDir)
	if err != nil {
		return err
	}
	if err := state.Healthy(ctx); err != nil {
		return fmt.Errorf("cluster in %s: %w", clusterDir, err)
	}
	if state.ContainerdAddress == "" {
		return fmt.Errorf("cluster in %s runs without containerd: the agent would never be Ready", clusterDir)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", state.AdminKubeconfig)
	if err != nil {
		return err
	}
	admin, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	runID := time.Now().Unix() % 100000
	for r := range rounds {
		order := slices.Clone(builds)
		if r%2 == 1 {
			slices.Reverse(order)
		}
		for _, b := range order {
			reg, ready, err := startOnce(ctx, state, admin, b, fmt.Sprintf("startup-%s-%d-%d", b.label, runID, r), warm)
			if err != nil {
				return fmt.Errorf("%s, round %d: %w", b.label, r+1, err)
			}
			b.reg, b.ready = append(b.reg, reg), append(b.ready, ready)
			fmt.Fprintf(os.Stderr, "%s startup: round %d %-8s registered %v, Ready %v\n", time.Now().Format("15:04:05"), r+1, b.label, ms(reg), ms(ready))
		}
	}
	return nil
}

// startOnce starts b as a new node and returns start → Node created and
// start → Ready=True, then stops it and removes what it made.
func startOnce(ctx context.Context, state *localcluster.State, admin kubernetes.Interface, b *build, node string, warm bool) (reg, ready time.Duration, err error) {
	dir, err := os.MkdirTemp("", "na-startup-")
	if err != nil {
		return 0, 0, err
	}
	ns := "bench-" + node
	defer func() {
		if err != nil { // keep the agent's log
			saved := filepath.Join(os.TempDir(), "na-startup-"+node+".log")
			if b, rerr := os.ReadFile(filepath.Join(dir, "agent.log")); rerr == nil && os.WriteFile(saved, b, 0o644) == nil {
				err = fmt.Errorf("%w; agent log: %s", err, saved)
			}
		}
		bg := context.Background()
		_ = admin.CoreV1().Nodes().Delete(bg, node, metav1.DeleteOptions{})
		_ = admin.CoordinationV1().Leases(corev1.NamespaceNodeLease).Delete(bg, node, metav1.DeleteOptions{})
		if _, cerr := testenv.RemoveHostLeftovers(append(testenv.AgentRunDirs(state.ContainerdAddress, ns), dir)...); cerr != nil && err == nil {
			err = cerr
		}
		// The agent's cgroup root for its namespace (cm.RootForNamespace).
		if m, cerr := cgmanager.New(&cgroups.Cgroup{Path: "/nodeagent-" + ns, Resources: &cgroups.Resources{SkipDevices: true}}); cerr == nil {
			if cerr := m.Destroy(); cerr != nil && err == nil {
				err = cerr
			}
		}
	}()
	kc, err := state.NodeKubeconfig(node)
	if err != nil {
		return 0, 0, err
	}
	port, err := freePort()
	if err != nil {
		return 0, 0, err
	}
	cfg := fmt.Sprintf(`apiVersion: config.nodeagent.io/v1alpha1
kind: NodeAgentConfiguration
rootDir: %s
podLogsDir: %s
containerLogsDir: %s
healthzPort: %d
port: 0
cniConfDir: ""
containerRuntimeEndpoint: unix://%s
containerRuntimeNamespace: %s
# The machine is shared: other work fills its disk to near the 15 %% imagefs default.
evictionHard:
  memory.available: 100Mi
  nodefs.available: 1%%
  imagefs.available: 1%%
`, filepath.Join(dir, "root"), filepath.Join(dir, "log", "pods"), filepath.Join(dir, "log", "containers"), port, state.ContainerdAddress, ns)
	cfgPath := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
		return 0, 0, err
	}
	bin := filepath.Join(dir, "nodeagent")
	if err := copyBinary(b.bin, bin, !warm); err != nil {
		return 0, 0, err
	}
	logf, err := os.Create(filepath.Join(dir, "agent.log"))
	if err != nil {
		return 0, 0, err
	}
	defer logf.Close()
	cmd := exec.Command(bin, "--config", cfgPath, "--kubeconfig", kc, "--hostname-override", node)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return 0, 0, err
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	defer stopAgent(cmd, exited)
	// Polled every 20 ms: a watch on a fresh cluster's Nodes can fail
	// with "too large resource version" while its cache catches up.
	deadline := start.Add(2 * time.Minute)
	for ready == 0 {
		n, err := admin.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
		at := time.Since(start)
		switch {
		case err == nil:
			if reg == 0 {
				reg = at
			}
			if nodeReady(n) {
				ready = at
			}
		case !apierrors.IsNotFound(err):
			return 0, 0, err
		}
		if ready != 0 {
			break
		}
		if time.Now().After(deadline) {
			return 0, 0, fmt.Errorf("node %s not Ready within 2m", node)
		}
		select {
		case <-exited:
			return 0, 0, errors.New("the agent exited before its node was Ready")
		case <-ctx.Done():
			return 0, 0, ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
	return reg, ready, nil
}

func stopAgent(cmd *exec.Cmd, exited <-chan struct{}) {
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-exited:
	case <-time.After(15 * time.Second):
		_ = cmd.Process.Kill()
		<-exited
	}
}

func nodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// copyBinary copies src to dst, executable, and drops dst's page cache when
// cold (so that the start reads it from disk).
func copyBinary(src, dst string, cold bool) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o755)
	if err != nil {
		return err
	}
	defer out.Close()
	if _, err := io.Copy(out, in); err != nil {
		return err
	}
	if err := out.Sync(); err != nil {
		return err
	}
	if cold {
		if err := unix.Fadvise(int(out.Fd()), 0, 0, unix.FADV_DONTNEED); err != nil {
			return fmt.Errorf("drop the page cache of %s: %w", dst, err)
		}
	}
	return out.Close()
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func report(builds []*build, warm bool) {
	cache := "cold page cache (a fresh copy of the binary, its pages dropped)"
	if warm {
		cache = "warm page cache"
	}
	fmt.Printf("\nStartup, process start → Node Ready=True (read every 20 ms); %d starts per build, alternating, %s.\n\n", len(builds[0].ready), cache)
	fmt.Println("| build | registered p50 / max | Ready min / p50 / max |")
	fmt.Println("|---|---:|---:|")
	for _, b := range builds {
		fmt.Printf("| %s | %v / %v | %v / %v / %v |\n", b.label, ms(pct(b.reg, 50)), ms(pct(b.reg, 100)),
			ms(pct(b.ready, 0)), ms(pct(b.ready, 50)), ms(pct(b.ready, 100)))
	}
	if len(builds) == 2 {
		fmt.Printf("\nReady p50, current ÷ baseline: %.2f×\n", float64(pct(builds[0].ready, 50))/float64(pct(builds[1].ready, 50)))
	}
}

// pct is the p-th percentile (nearest rank; 0 is the minimum).
func pct(ds []time.Duration, p int) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.SortFunc(s, cmp.Compare)
	i := max(0, (p*len(s)+99)/100-1)
	return s[min(i, len(s)-1)]
}

func ms(d time.Duration) time.Duration { return d.Round(time.Millisecond) }
