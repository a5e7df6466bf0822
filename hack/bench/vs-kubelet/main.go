// Command vs-kubelet measures nodeagent against upstream kubelet (v1.34.4,
// built from hack/controlplane by hack/build-kubelet.sh) on the same
// machine, containerd, runc, images and bridge CNI, in the same run
// (issue 32). hack/bench/vs-kubelet/vs-kubelet.sh builds what it needs and
// runs it; it prints one table with the ratios.
//
//	go run ./hack/bench/vs-kubelet -kubelet _output/bin/kubelet -nodeagent _output/bin/nodeagent [-rounds 2] [-pods 10] [-bursts 30,100]
//
// Setup: a local control plane of its own (internal/testing/localcluster,
// etcd 3.6) and one containerd of its own (the host's, Debian's 1.6, with
// the CRI plugin on, in a config of the bench's: kubelet talks CRI to it,
// nodeagent containerd's own API, in a namespace of its own). Both agents
// get the same bridge + host-local CNI network (a subnet each), the same
// busybox image, and kubelet's sandbox image (pause) is imported, so nothing
// is pulled. Each agent is the only agent of its node; the agents never run
// at the same time: every round starts one agent, measures, deletes its pods,
// stops it, then does the same with the other (the order alternates by
// round).
//
// Figures, per agent (all rounds pooled):
//   - process start → Node Ready (a fresh Node each start);
//   - pod create → pod Ready condition True seen in a watch, one at a time;
//   - the same for bursts (all pods created back to back, each measured);
//   - container exit → pod phase Succeeded seen in a watch: the container
//     blocks reading a FIFO on a hostPath; writing to the FIFO makes it exit 0;
//   - `kubectl logs -f` latency: a container echoes what it reads from a
//     FIFO; from the write to the line arriving on a follow stream through
//     the API server (the same request kubectl logs -f makes);
//   - CPU of the agent (and its helper processes) and of containerd over an
//     idle window with -idle-pods running pods; the agent's RSS then.
package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"math"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"

	"github.com/nodeagent/nodeagent/internal/testing/localcluster"
	"github.com/nodeagent/nodeagent/internal/testing/testimage"
	"github.com/nodeagent/nodeagent/runtime"
)

type options struct {
	kubelet, nodeagent, pause, binDir string
	// baseline is a second nodeagent build (another commit) measured in
	// the same rounds: before/after figures of a change.
	baseline string
	// nodeagentArgs are extra arguments for both nodeagent builds (-v=4
	// turns on the latency trace).
	nodeagentArgs             []string
	rounds, pods, exits, logs int
	bursts                    []int
	idlePods                  int
	idleWindow                time.Duration
	workDir                   string
	agents                    []string
}

// nodeIP is both nodes' InternalIP, on an empty bridge the bench adds
// (kubelet refuses a loopback node IP; the API server reaches the node API
// there for logs).
const (
	nodeIP    = "10.252.255.1"
	dummyLink = "vsk-node0"
)

const (
	kubeletName   = "kubelet"
	nodeagentName = "nodeagent"
	baselineName  = "baseline"      // -baseline: nodeagent built from another commit
	nsNodeagent   = "vsk-nodeagent" // nodeagent's containerd namespace (kubelet's CRI uses k8s.io)
	podNS         = "default"
)

func main() {
	var o options
	var bursts string
	flag.StringVar(&o.kubelet, "kubelet", "_output/bin/kubelet", "kubelet binary (hack/build-kubelet.sh)")
	flag.StringVar(&o.nodeagent, "nodeagent", "_output/bin/nodeagent", "nodeagent binary (make build)")
	flag.StringVar(&o.baseline, "baseline", "", "a second nodeagent binary (e.g. built from main) measured in the same rounds, for before/after figures")
	var naArgs string
	flag.StringVar(&naArgs, "nodeagent-args", "", "extra arguments for nodeagent (and -baseline), space-separated (-v=4: the latency trace, summarized after the table)")
	flag.StringVar(&o.pause, "pause", "", "static pause binary for kubelet's sandbox image (vs-kubelet.sh compiles upstream's pause.c)")
	flag.StringVar(&o.binDir, "bin-dir", "_output/bin", "control plane binaries (make controlplane)")
	flag.IntVar(&o.rounds, "rounds", 2, "rounds; each runs both agents, one after the other")
	flag.IntVar(&o.pods, "pods", 10, "pods created one at a time per round")
	flag.StringVar(&bursts, "bursts", "30,100", "burst sizes, comma-separated")
	flag.IntVar(&o.exits, "exits", 10, "container exits per round")
	flag.IntVar(&o.logs, "logs", 10, "log lines followed per round")
	flag.IntVar(&o.idlePods, "idle-pods", 30, "running pods during the idle CPU window")
	flag.DurationVar(&o.idleWindow, "idle-window", 30*time.Second, "idle CPU window")
	var agents string
	flag.StringVar(&agents, "agents", "kubelet,nodeagent", "the agents to run (both for the ratios)")
	flag.StringVar(&o.workDir, "work-dir", "", "work directory (default: a new one under /tmp; short: containerd's socket is in it)")
	flag.Parse()
	for _, s := range strings.Split(bursts, ",") {
		if s = strings.TrimSpace(s); s == "" {
			continue
		}
		n, err := strconv.Atoi(s)
		if err != nil || n <= 0 {
			fatalf("-bursts: %q is not a positive number", s)
		}
		o.bursts = append(o.bursts, n)
	}
	o.agents = strings.Split(agents, ",")
	o.nodeagentArgs = strings.Fields(naArgs)
	if o.baseline != "" {
		o.agents = append(o.agents, baselineName)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	b, err := setup(ctx, o)
	if err != nil {
		if b != nil {
			b.teardown()
		}
		fatalf("setup: %v", err)
	}
	defer b.teardown()
	res := map[string]*results{kubeletName: newResults(), nodeagentName: newResults(), baselineName: newResults()}
	load0 := loadavg()
	start := time.Now()
	for r := 0; r < o.rounds; r++ {
		order := append([]string(nil), o.agents...)
		if r%2 == 1 {
			slices.Reverse(order)
		}
		for _, name := range order {
			progress("round %d/%d: %s", r+1, o.rounds, name)
			if err := b.round(ctx, name, res[name]); err != nil {
				b.teardown()
				fatalf("round %d, %s: %v", r+1, name, err)
			}
		}
	}
	fmt.Print(report(o, res, load0, loadavg(), time.Since(start)))
	for _, name := range []string{nodeagentName, baselineName} {
		fmt.Print(traceReport(name, res[name]))
	}
}

func fatalf(format string, a ...any) {
	fmt.Fprintf(os.Stderr, "vs-kubelet: "+format+"\n", a...)
	os.Exit(1)
}

func progress(format string, a ...any) {
	fmt.Fprintf(os.Stderr, "vs-kubelet: %s "+format+"\n", append([]any{time.Now().Format("15:04:05")}, a...)...)
}

type bench struct {
	o           options
	dir         string
	state       *localcluster.State
	admin       *kubernetes.Clientset
	ctrd        *exec.Cmd
	ctrdSock    string
	ctrdExited  chan struct{}
	fifoDir     string
	cleanupOnce sync.Once
}

// setup starts the control plane, containerd, imports the images and writes
// the CNI networks.
func setup(ctx context.Context, o options) (*bench, error) {
	if o.workDir == "" {
		d, err := os.MkdirTemp("", "vsk-")
		if err != nil {
			return nil, err
		}
		o.workDir = d
	}
	b := &bench{o: o, dir: o.workDir}
	bin, err := filepath.Abs(o.binDir)
	if err != nil {
		return nil, err
	}
	progress("work directory %s; starting the control plane", b.dir)
	b.state, err = localcluster.Up(ctx, localcluster.Options{Dir: filepath.Join(b.dir, "cp"), BinDir: bin, NoContainerd: true, Log: os.Stderr})
	if err != nil {
		return b, err
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", b.state.AdminKubeconfig)
	if err != nil {
		return b, err
	}
	cfg.QPS, cfg.Burst = 200, 400
	if b.admin, err = kubernetes.NewForConfig(cfg); err != nil {
		return b, err
	}
	_ = exec.Command("ip", "link", "del", dummyLink).Run()
	for _, c := range [][]string{{"link", "add", dummyLink, "type", "bridge"}, {"addr", "add", nodeIP + "/32", "dev", dummyLink}, {"link", "set", dummyLink, "up"}} {
		if out, err := exec.Command("ip", c...).CombinedOutput(); err != nil {
			return b, fmt.Errorf("ip %v: %v: %s", c, err, out)
		}
	}
	if err := b.startContainerd(ctx); err != nil {
		return b, err
	}
	for _, name := range []string{kubeletName, nodeagentName, baselineName} {
		if err := b.writeCNI(name); err != nil {
			return b, err
		}
	}
	b.fifoDir = filepath.Join(b.dir, "fifo")
	if err := os.MkdirAll(b.fifoDir, 0o755); err != nil {
		return b, err
	}
	// The default ServiceAccount must exist before pods are admitted.
	for i := 0; ; i++ {
		if _, err := b.admin.CoreV1().ServiceAccounts(podNS).Get(ctx, "default", metav1.GetOptions{}); err == nil {
			break
		} else if i > 300 {
			return b, fmt.Errorf("no default ServiceAccount: %w", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	return b, nil
}

// startContainerd runs Debian's containerd with the CRI plugin on, kubelet's
// CNI network and the pause image as its sandbox image. Without
// CAP_SYS_RESOURCE runc cannot write the negative oom_score_adj kubelet asks
// for (sandboxes -998, Guaranteed -997) and every sandbox fails with "can't
// get final child's PID from pipe: EOF": restrict_oom_score_adj raises
// kubelet's scores to containerd's own, as nodeagent raises its own to the
// agent's (runtime.OOMScoreAdjFloor), so both agents run under the same rule.
func (b *bench) startContainerd(ctx context.Context) error {
	cdir := filepath.Join(b.dir, "ctrd")
	b.ctrdSock = filepath.Join(cdir, "c.sock")
	for _, d := range []string{"root", "state"} {
		if err := os.MkdirAll(filepath.Join(cdir, d), 0o711); err != nil {
			return err
		}
	}
	cfg := fmt.Sprintf(`version = 2
root = %q
state = %q

[grpc]
  address = %q

[ttrpc]
  address = "%s.ttrpc"

[debug]
  address = ""

[metrics]
  address = ""

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = %q
  restrict_oom_score_adj = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = %q
`, filepath.Join(cdir, "root"), filepath.Join(cdir, "state"), b.ctrdSock, b.ctrdSock, testimage.E2EPauseRef, b.cniDir(kubeletName))
	p := filepath.Join(cdir, "config.toml")
	if err := os.WriteFile(p, []byte(cfg), 0o644); err != nil {
		return err
	}
	logf, err := os.Create(filepath.Join(cdir, "containerd.log"))
	if err != nil {
		return err
	}
	defer logf.Close()
	b.ctrd = exec.Command("containerd", "--config", p)
	b.ctrd.Stdout, b.ctrd.Stderr = logf, logf
	b.ctrd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := b.ctrd.Start(); err != nil {
		return err
	}
	b.ctrdExited = make(chan struct{})
	go func() { _ = b.ctrd.Wait(); close(b.ctrdExited) }()
	for i := 0; ; i++ {
		if c, err := net.Dial("unix", b.ctrdSock); err == nil {
			c.Close()
			break
		}
		if i > 300 {
			return errors.New("containerd does not answer after 30s: see " + filepath.Join(cdir, "containerd.log"))
		}
		time.Sleep(100 * time.Millisecond)
	}
	pause, err := os.ReadFile(b.o.pause)
	if err != nil {
		return fmt.Errorf("-pause: %w", err)
	}
	pauseImg := testimage.Spec{Ref: testimage.E2EPauseRef, Files: []testimage.File{testimage.Reg("pause", 0o755, pause)},
		Entrypoint: []string{"/pause"}, User: "65535:65535"}
	for _, ns := range []string{"k8s.io", nsNodeagent} {
		rt, err := runtime.New(runtime.Options{Address: b.ctrdSock, Namespace: ns, CallTimeout: time.Minute})
		if err != nil {
			return err
		}
		err = testimage.Import(ctx, rt)
		if err == nil && ns == "k8s.io" {
			var a []byte
			if a, err = pauseImg.Archive(); err == nil {
				_, err = rt.ImportImage(ctx, strings.NewReader(string(a)))
			}
		}
		rt.Close()
		if err != nil {
			return fmt.Errorf("importing images into %s: %w", ns, err)
		}
	}
	return nil
}

func (b *bench) cniDir(agent string) string { return filepath.Join(b.dir, agent, "net.d") }

// writeCNI writes the same bridge + host-local + portmap network for both
// agents, a bridge and a /24 each.
func (b *bench) writeCNI(agent string) error {
	subnet, br := "10.251.1.0/24", "vsknodeagent0"
	switch agent {
	case kubeletName:
		subnet, br = "10.251.2.0/24", "vskkubelet0"
	case baselineName:
		subnet, br = "10.251.3.0/24", "vskbaseline0"
	}
	conf := fmt.Sprintf(`{
  "cniVersion": "1.0.0",
  "name": "vsk-%s",
  "plugins": [
    {"type": "bridge", "bridge": %q, "isGateway": true, "ipMasq": false, "hairpinMode": true,
     "ipam": {"type": "host-local", "ranges": [[{"subnet": %q}]], "routes": [{"dst": "0.0.0.0/0"}]}},
    {"type": "portmap", "capabilities": {"portMappings": true}}
  ]
}
`, agent, br, subnet)
	if err := os.MkdirAll(b.cniDir(agent), 0o755); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(b.cniDir(agent), "10-vsk.conflist"), []byte(conf), 0o644)
}

func (b *bench) teardown() {
	b.cleanupOnce.Do(func() {
		if b.ctrd != nil && b.ctrd.Process != nil {
			_ = b.ctrd.Process.Signal(syscall.SIGTERM)
			select {
			case <-b.ctrdExited:
			case <-time.After(20 * time.Second):
				_ = b.ctrd.Process.Kill()
			}
			// The shims (their own process groups) of anything left behind.
			killShims(b.ctrdSock)
		}
		if b.state != nil {
			_ = localcluster.Down(b.state.Dir)
		}
		for _, n := range []string{kubeletName, nodeagentName, baselineName} {
			removeCgroupRoot("vsk-" + n)
			removeAgentCgroup(n)
		}
		for _, br := range []string{"vsknodeagent0", "vskkubelet0", "vskbaseline0", dummyLink} {
			_ = exec.Command("ip", "link", "del", br).Run()
		}
	})
}

// makeCgroupRoot creates the agent's cgroupRoot in every hierarchy (kubelet
// requires it to exist), with the cpuset of the root on cgroup v1.
func makeCgroupRoot(name string) error {
	if _, err := os.Stat("/sys/fs/cgroup/cgroup.controllers"); err == nil {
		return os.MkdirAll(filepath.Join("/sys/fs/cgroup", name), 0o755)
	}
	ents, err := os.ReadDir("/sys/fs/cgroup")
	if err != nil {
		return err
	}
	for _, e := range ents {
		if !e.IsDir() {
			continue
		}
		d := filepath.Join("/sys/fs/cgroup", e.Name(), name)
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
		for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
			if v, err := os.ReadFile(filepath.Join("/sys/fs/cgroup", e.Name(), f)); err == nil {
				if err := os.WriteFile(filepath.Join(d, f), v, 0o644); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// removeCgroupRoot removes what makeCgroupRoot made and what is left under
// it (empty cgroups only), deepest first.
func removeCgroupRoot(name string) {
	var dirs []string
	_ = filepath.WalkDir("/sys/fs/cgroup", func(p string, d os.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return nil
		}
		rel, _ := filepath.Rel("/sys/fs/cgroup", p)
		parts := strings.Split(rel, string(filepath.Separator))
		if len(parts) > 2 || (len(parts) == 2 && parts[1] != name) || (len(parts) == 1 && parts[0] == name) {
			if !strings.Contains(rel, name) {
				return filepath.SkipDir
			}
		}
		if strings.Contains(rel, name) {
			dirs = append(dirs, p)
		}
		return nil
	})
	for i := len(dirs) - 1; i >= 0; i-- {
		_ = syscall.Rmdir(dirs[i])
	}
}

// killShims kills containerd-shim processes whose command line names sock.
func killShims(sock string) {
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cl, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if strings.Contains(string(cl), "containerd-shim") && strings.Contains(string(cl), sock) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

// agent is one running agent process.
type agent struct {
	name, node, dir string
	cgroup          string // the agent's memory cgroup (agentCgroup)
	log             string // its log file
	cmd             *exec.Cmd
	exited          chan struct{}
	started         time.Time
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// startAgent writes the agent's configuration as a production node's (CNI,
// webhook authentication and authorization of its API, the cgroupfs
// driver of this host) and starts it.
func (b *bench) startAgent(ctx context.Context, name string) (*agent, error) {
	a := &agent{name: name, node: "vsk-" + name, dir: filepath.Join(b.dir, name)}
	// A fresh Node for every start: Ready is measured from nothing.
	_ = b.admin.CoreV1().Nodes().Delete(ctx, a.node, metav1.DeleteOptions{})
	_ = b.admin.CoordinationV1().Leases("kube-node-lease").Delete(ctx, a.node, metav1.DeleteOptions{})
	for i := 0; i < 100; i++ {
		if _, err := b.admin.CoreV1().Nodes().Get(ctx, a.node, metav1.GetOptions{}); apierrors.IsNotFound(err) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	kc, err := b.state.NodeKubeconfig(a.node)
	if err != nil {
		return nil, err
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	hport, err := freePort()
	if err != nil {
		return nil, err
	}
	root := filepath.Join(a.dir, "root")
	var args []string
	var cfg string
	switch name {
	case kubeletName:
		cfg = fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
cgroupDriver: cgroupfs
cgroupRoot: /vsk-kubelet
containerRuntimeEndpoint: unix://%s
failSwapOn: false
failCgroupV1: false
port: %d
healthzPort: %d
healthzBindAddress: 127.0.0.1
readOnlyPort: 0
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: %s}
authorization: {mode: Webhook}
podLogsDir: %s
resolvConf: /etc/resolv.conf
# The machine is shared: other work fills its disk to near the 15 %% imagefs default.
evictionHard:
  memory.available: 100Mi
  nodefs.available: 5%%
  imagefs.available: 5%%
`, b.ctrdSock, port, hport, b.state.CACert, filepath.Join(a.dir, "pods-log"))
		args = []string{"--root-dir", root, "--cert-dir", filepath.Join(a.dir, "pki"), "--node-ip", nodeIP}
	case nodeagentName, baselineName:
		cfg = fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
cgroupDriver: cgroupfs
cgroupRoot: /vsk-`+name+`
containerRuntimeEndpoint: unix://%s
port: %d
healthzPort: %d
healthzBindAddress: 127.0.0.1
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: %s}
authorization: {mode: Webhook}
podLogsDir: %s
resolvConf: /etc/resolv.conf
# JSON: the latency trace (-nodeagent-args -v=4) is read back from it.
logging: {format: json}
evictionHard:
  memory.available: 100Mi
  nodefs.available: 5%%
  imagefs.available: 5%%
`, b.ctrdSock, port, hport, b.state.CACert, filepath.Join(a.dir, "pods-log"))
		// Configuration kubelet has no field for: the containerd namespace
		// (kubelet's CRI uses k8s.io) and the CNI directories (kubelet's are
		// containerd's).
		dropin := filepath.Join(a.dir, "conf.d")
		if err := os.MkdirAll(dropin, 0o755); err != nil {
			return nil, err
		}
		extra := fmt.Sprintf("apiVersion: config.nodeagent.io/v1alpha1\nkind: NodeAgentConfiguration\nrootDir: %s\ncontainerRuntimeNamespace: %s\ncniConfDir: %s\ncniBinDir: /opt/cni/bin,/usr/lib/cni\n",
			root, nsNodeagent, b.cniDir(name))
		if err := os.WriteFile(filepath.Join(dropin, "10-bench.conf"), []byte(extra), 0o644); err != nil {
			return nil, err
		}
		args = append([]string{"--config-dir", dropin, "--node-ip", nodeIP}, b.o.nodeagentArgs...)
	}
	if err := makeCgroupRoot("vsk-" + name); err != nil {
		return nil, err
	}
	cfgPath := filepath.Join(a.dir, "config.yaml")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
		return nil, err
	}
	bin := b.o.kubelet
	switch name {
	case nodeagentName:
		bin = b.o.nodeagent
	case baselineName:
		bin = b.o.baseline
	}
	args = append([]string{"--config", cfgPath, "--kubeconfig", kc, "--hostname-override", a.node}, args...)
	// Appended to: every round of the agent in one log.
	logf, err := os.OpenFile(filepath.Join(a.dir, name+".log"), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	a.log = logf.Name()
	// Each agent runs in a memory cgroup of its own, entered before the
	// exec, so that its working set is measured as kubelet's cAdvisor
	// measures a cgroup's (kubelet.service's, nodeagent.service's).
	cg, err := newAgentCgroup(name)
	if err != nil {
		return nil, err
	}
	a.cgroup = cg
	a.cmd = exec.Command("/bin/sh", append([]string{"-c", `echo $$ > "$0/cgroup.procs" && exec "$@"`, cg, bin}, args...)...)
	a.cmd.Stdout, a.cmd.Stderr = logf, logf
	a.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}

	// The Ready watch is open before the process starts.
	w, err := b.admin.CoreV1().Nodes().Watch(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.name", a.node).String()})
	if err != nil {
		return nil, err
	}
	defer w.Stop()
	a.started = time.Now()
	if err := testimage.StartOnStableThread(a.cmd); err != nil {
		return nil, err
	}
	a.exited = make(chan struct{})
	go func() { _ = a.cmd.Wait(); close(a.exited) }()
	timeout := time.After(3 * time.Minute)
	for {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				return a, errors.New("node watch ended")
			}
			if n, ok := ev.Object.(*corev1.Node); ok && nodeReady(n) {
				return a, nil
			}
		case <-a.exited:
			return a, fmt.Errorf("%s exited: see %s", name, logf.Name())
		case <-timeout:
			return a, fmt.Errorf("node %s not Ready within 3m: see %s", a.node, logf.Name())
		case <-ctx.Done():
			return a, ctx.Err()
		}
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

func (a *agent) stop() {
	if a.cmd == nil || a.cmd.Process == nil {
		return
	}
	_ = a.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-a.exited:
	case <-time.After(30 * time.Second):
		_ = a.cmd.Process.Kill()
		<-a.exited
	}
	// Both agents make their root directory a shared mount (a bind mount on
	// itself) and leave it when they stop, as kubelet does on a node; the
	// bench's directories go away, so their mounts go too (EINVAL: none).
	_ = syscall.Unmount(filepath.Join(a.dir, "root"), syscall.MNT_DETACH)
}

type results struct {
	ready             []time.Duration
	seq, exit, logs   []time.Duration
	burst             map[int][]time.Duration
	agentCPU, ctrdCPU []float64 // fraction of a core
	rss               []float64 // MiB
	workingSet        []float64 // MiB, the agent's cgroup (with its helpers)
	// exits and starts are the samples' pods, for the latency trace.
	exits, starts []tracedPod
	logs_         []string // the agent's log files
}

func newResults() *results { return &results{burst: map[int][]time.Duration{}} }

// round runs one agent through every phase.
func (b *bench) round(ctx context.Context, name string, res *results) (err error) {
	a, err := b.startAgent(ctx, name)
	if a != nil {
		defer func() {
			if cerr := b.deleteAll(ctx, a); cerr != nil && err == nil {
				err = cerr
			}
			a.stop()
		}()
	}
	if err != nil {
		return err
	}
	if name != kubeletName && !slices.Contains(res.logs_, a.log) {
		res.logs_ = append(res.logs_, a.log)
	}
	took := time.Since(a.started)
	res.ready = append(res.ready, took)
	progress("%s: node Ready %v after the process started", name, took.Round(time.Millisecond))
	tr := newTracker()
	tctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if err := tr.run(tctx, b.admin, a.node); err != nil {
		return err
	}
	// One at a time.
	for i := 0; i < b.o.pods; i++ {
		d, tps, err := b.createAndWait(ctx, tr, a, []string{fmt.Sprintf("seq-%d", i)})
		if err != nil {
			return err
		}
		res.seq = append(res.seq, d...)
		res.starts = append(res.starts, tps...)
	}
	if err := b.deleteAll(ctx, a); err != nil {
		return err
	}
	// Bursts.
	for _, n := range b.o.bursts {
		names := make([]string, n)
		for i := range names {
			names[i] = fmt.Sprintf("burst%d-%d", n, i)
		}
		d, _, err := b.createAndWait(ctx, tr, a, names)
		if err != nil {
			return err
		}
		res.burst[n] = append(res.burst[n], d...)
		progress("%s: burst of %d: p50 %v", name, n, pct(d, 50).Round(time.Millisecond))
		if err := b.deleteAll(ctx, a); err != nil {
			return err
		}
	}
	// Exits.
	for i := 0; i < b.o.exits; i++ {
		tp, err := b.exitToSucceeded(ctx, tr, a, i)
		if err != nil {
			return err
		}
		res.exit = append(res.exit, tp.end.Sub(tp.begin))
		res.exits = append(res.exits, tp)
	}
	// Logs.
	d, err := b.followLogs(ctx, tr, a)
	if err != nil {
		return err
	}
	res.logs = append(res.logs, d...)
	if err := b.deleteAll(ctx, a); err != nil {
		return err
	}
	// Idle with running pods.
	names := make([]string, b.o.idlePods)
	for i := range names {
		names[i] = fmt.Sprintf("idle-%d", i)
	}
	if _, _, err := b.createAndWait(ctx, tr, a, names); err != nil {
		return err
	}
	time.Sleep(10 * time.Second) // settle
	pids := append([]int{a.cmd.Process.Pid}, helpers(a)...)
	c0, t0 := cpuOf(pids), time.Now()
	d0 := cpuOf([]int{b.ctrd.Process.Pid})
	select {
	case <-time.After(b.o.idleWindow):
	case <-ctx.Done():
		return ctx.Err()
	}
	el := time.Since(t0).Seconds()
	pids = append([]int{a.cmd.Process.Pid}, helpers(a)...)
	res.agentCPU = append(res.agentCPU, (cpuOf(pids)-c0)/el)
	res.ctrdCPU = append(res.ctrdCPU, (cpuOf([]int{b.ctrd.Process.Pid})-d0)/el)
	res.rss = append(res.rss, rssMiB(a.cmd.Process.Pid))
	res.workingSet = append(res.workingSet, workingSetMiB(a.cgroup))
	progress("%s: idle with %d pods: agent %.2f%% of a core, containerd %.2f%%, RSS %.0f MiB, working set %.1f MiB", name, b.o.idlePods,
		100*res.agentCPU[len(res.agentCPU)-1], 100*res.ctrdCPU[len(res.ctrdCPU)-1], res.rss[len(res.rss)-1], res.workingSet[len(res.workingSet)-1])
	return nil
}

// helpers are the agent's own helper processes (nodeagent's per-container
// log writers: what the runtime's shim does for kubelet, but the agent's
// code), found by their command line naming the agent's root directory.
func helpers(a *agent) []int {
	if a.name == kubeletName {
		return nil
	}
	var out []int
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == a.cmd.Process.Pid {
			continue
		}
		cl, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if strings.Contains(string(cl), "container-logger") && strings.Contains(string(cl), a.dir) {
			out = append(out, pid)
		}
	}
	return out
}

// cpuOf sums utime+stime of pids, in seconds.
func cpuOf(pids []int) float64 {
	var s float64
	for _, p := range pids {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p))
		if err != nil {
			continue
		}
		f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+2:]))
		if len(f) < 13 {
			continue
		}
		u, _ := strconv.ParseFloat(f[11], 64)
		st, _ := strconv.ParseFloat(f[12], 64)
		s += (u + st) / 100 // USER_HZ
	}
	return s
}

// agentCgroup is the memory cgroup the bench runs an agent in: a child of
// the bench's own (cgroup v1's memory hierarchy, or the unified one).
func agentCgroup(name string) (string, error) {
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return "", err
	}
	v2 := ""
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		f := strings.SplitN(l, ":", 3)
		if len(f) != 3 {
			continue
		}
		if slices.Contains(strings.Split(f[1], ","), "memory") {
			return filepath.Join("/sys/fs/cgroup/memory", f[2], "vsk-agent-"+name), nil
		}
		if f[0] == "0" && f[1] == "" {
			v2 = filepath.Join("/sys/fs/cgroup", f[2], "vsk-agent-"+name)
		}
	}
	if v2 == "" {
		return "", errors.New("no memory cgroup in /proc/self/cgroup")
	}
	return v2, nil
}

// newAgentCgroup makes the agent's cgroup anew (nothing charged to it).
func newAgentCgroup(name string) (string, error) {
	removeAgentCgroup(name)
	d, err := agentCgroup(name)
	if err != nil {
		return "", err
	}
	return d, os.Mkdir(d, 0o755)
}

func removeAgentCgroup(name string) {
	if d, err := agentCgroup(name); err == nil {
		_ = syscall.Rmdir(d)
	}
}

// workingSetMiB is a cgroup's working set as cAdvisor (and so kubelet's
// eviction and `kubectl top`) defines it: memory usage less inactive file
// pages (v1: memory.usage_in_bytes − total_inactive_file; v2:
// memory.current − inactive_file).
func workingSetMiB(dir string) float64 {
	usageFile, inactiveKey := "memory.usage_in_bytes", "total_inactive_file"
	if _, err := os.Stat(filepath.Join(dir, "memory.current")); err == nil {
		usageFile, inactiveKey = "memory.current", "inactive_file"
	}
	u, err := os.ReadFile(filepath.Join(dir, usageFile))
	if err != nil {
		return math.NaN()
	}
	usage, err := strconv.ParseFloat(strings.TrimSpace(string(u)), 64)
	if err != nil {
		return math.NaN()
	}
	st, err := os.ReadFile(filepath.Join(dir, "memory.stat"))
	if err != nil {
		return math.NaN()
	}
	for _, l := range strings.Split(string(st), "\n") {
		if f := strings.Fields(l); len(f) == 2 && f[0] == inactiveKey {
			inactive, _ := strconv.ParseFloat(f[1], 64)
			return max(usage-inactive, 0) / (1 << 20)
		}
	}
	return math.NaN()
}

func rssMiB(pid int) float64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return math.NaN()
	}
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, "VmRSS:") {
			f := strings.Fields(l)
			kb, _ := strconv.ParseFloat(f[1], 64)
			return kb / 1024
		}
	}
	return math.NaN()
}

// tracker records when a watch on the node's pods first saw each pod Ready
// and each pod Succeeded.
type tracker struct {
	mu        sync.Mutex
	ready     map[string]time.Time
	succeeded map[string]time.Time
	changed   chan struct{}
}

func newTracker() *tracker {
	return &tracker{ready: map[string]time.Time{}, succeeded: map[string]time.Time{}, changed: make(chan struct{}, 1)}
}

func (t *tracker) run(ctx context.Context, c kubernetes.Interface, node string) error {
	sel := fields.OneTermEqualSelector("spec.nodeName", node).String()
	l, err := c.CoreV1().Pods(podNS).List(ctx, metav1.ListOptions{FieldSelector: sel})
	if err != nil {
		return err
	}
	go func() {
		rv := l.ResourceVersion
		for ctx.Err() == nil {
			w, err := c.CoreV1().Pods(podNS).Watch(ctx, metav1.ListOptions{FieldSelector: sel, ResourceVersion: rv, AllowWatchBookmarks: true})
			if err != nil {
				time.Sleep(100 * time.Millisecond)
				continue
			}
			for ev := range w.ResultChan() {
				now := time.Now()
				p, ok := ev.Object.(*corev1.Pod)
				if !ok {
					continue
				}
				rv = p.ResourceVersion
				if ev.Type == watch.Bookmark || ev.Type == watch.Deleted {
					continue
				}
				t.mu.Lock()
				if _, seen := t.ready[p.Name]; !seen && podReady(p) {
					t.ready[p.Name] = now
				}
				if _, seen := t.succeeded[p.Name]; !seen && p.Status.Phase == corev1.PodSucceeded {
					t.succeeded[p.Name] = now
				}
				t.mu.Unlock()
				select {
				case t.changed <- struct{}{}:
				default:
				}
			}
		}
	}()
	return nil
}

func (t *tracker) forget(names ...string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, n := range names {
		delete(t.ready, n)
		delete(t.succeeded, n)
	}
}

// wait waits until pick says every name has a time, and returns them.
func (t *tracker) wait(ctx context.Context, names []string, pick func(*tracker) map[string]time.Time, limit time.Duration) ([]time.Time, error) {
	deadline := time.After(limit)
	for {
		t.mu.Lock()
		m := pick(t)
		out := make([]time.Time, 0, len(names))
		for _, n := range names {
			if at, ok := m[n]; ok {
				out = append(out, at)
			}
		}
		t.mu.Unlock()
		if len(out) == len(names) {
			return out, nil
		}
		select {
		case <-t.changed:
		case <-deadline:
			return nil, fmt.Errorf("%d of %d pods not there within %v", len(names)-len(out), len(names), limit)
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func (b *bench) pod(a *agent, name string, cmd string, fifo bool) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"vsk": a.name}},
		Spec: corev1.PodSpec{
			NodeName:                      a.node,
			TerminationGracePeriodSeconds: ptr.To[int64](1),
			AutomountServiceAccountToken:  ptr.To(false),
			Containers: []corev1.Container{{
				Name: "c", Image: testimage.Ref, ImagePullPolicy: corev1.PullNever,
				Command: []string{"/bin/sh", "-c", cmd},
			}},
		},
	}
	if fifo {
		p.Spec.RestartPolicy = corev1.RestartPolicyNever
		p.Spec.Volumes = []corev1.Volume{{Name: "f", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: b.fifoDir}}}}
		p.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "f", MountPath: "/f"}}
	}
	return p
}

// createAndWait creates the pods back to back and returns each one's
// create → Ready time.
func (b *bench) createAndWait(ctx context.Context, tr *tracker, a *agent, names []string) ([]time.Duration, []tracedPod, error) {
	tr.forget(names...)
	created := make([]time.Time, len(names))
	uids := make([]string, len(names))
	var wg sync.WaitGroup
	errs := make(chan error, len(names))
	sem := make(chan struct{}, 8)
	for i, n := range names {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			created[i] = time.Now()
			p, err := b.admin.CoreV1().Pods(podNS).Create(ctx, b.pod(a, n, "exec sleep 100000", false), metav1.CreateOptions{})
			if err != nil {
				errs <- err
				return
			}
			uids[i] = string(p.UID)
		}()
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return nil, nil, err
	}
	at, err := tr.wait(ctx, names, func(t *tracker) map[string]time.Time { return t.ready }, 5*time.Minute)
	if err != nil {
		return nil, nil, err
	}
	out := make([]time.Duration, len(names))
	tps := make([]tracedPod, len(names))
	for i := range names {
		out[i] = at[i].Sub(created[i])
		tps[i] = tracedPod{uid: uids[i], begin: created[i], end: at[i]}
	}
	if len(names) == 1 {
		progress("%s: %s: created at %s, Ready seen %v later", a.name, names[0], created[0].UTC().Format("15:04:05.000000"), out[0])
	}
	return out, tps, nil
}

// writeFIFO opens the FIFO for writing (this blocks until the container has
// it open for reading) and writes line; it returns when the write is done.
func writeFIFO(ctx context.Context, path, line string) (time.Time, error) {
	type r struct {
		at  time.Time
		err error
	}
	ch := make(chan r, 1)
	go func() {
		f, err := os.OpenFile(path, os.O_WRONLY, 0)
		if err != nil {
			ch <- r{err: err}
			return
		}
		defer f.Close()
		_, err = f.WriteString(line + "\n")
		ch <- r{time.Now(), err}
	}()
	select {
	case x := <-ch:
		return x.at, x.err
	case <-time.After(time.Minute):
		// Unblock the open: open the read end ourselves.
		if f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0); err == nil {
			f.Close()
		}
		return time.Time{}, errors.New("the container did not open " + path + " within 1m")
	case <-ctx.Done():
		return time.Time{}, ctx.Err()
	}
}

// exitToSucceeded: a Ready pod whose container exits 0 when a line is
// written to its FIFO; the time from the write to Succeeded in the watch.
func (b *bench) exitToSucceeded(ctx context.Context, tr *tracker, a *agent, i int) (tracedPod, error) {
	name := fmt.Sprintf("exit-%d", i)
	fifo := filepath.Join(b.fifoDir, a.name+"-"+name)
	_ = os.Remove(fifo)
	if err := syscall.Mkfifo(fifo, 0o666); err != nil {
		return tracedPod{}, err
	}
	defer os.Remove(fifo)
	tr.forget(name)
	created, err := b.admin.CoreV1().Pods(podNS).Create(ctx, b.pod(a, name, fmt.Sprintf("read x < /f/%s-%s; exit 0", a.name, name), true), metav1.CreateOptions{})
	if err != nil {
		return tracedPod{}, err
	}
	if _, err := tr.wait(ctx, []string{name}, func(t *tracker) map[string]time.Time { return t.ready }, 2*time.Minute); err != nil {
		return tracedPod{}, err
	}
	t0, err := writeFIFO(ctx, fifo, "exit")
	if err != nil {
		return tracedPod{}, err
	}
	at, err := tr.wait(ctx, []string{name}, func(t *tracker) map[string]time.Time { return t.succeeded }, time.Minute)
	if err != nil {
		return tracedPod{}, err
	}
	// With the agent's latency trace on (-v=4), its log has the pod's
	// stages under this UID.
	progress("%s: %s (podUID %s): exit at %s, Succeeded seen %v later", a.name, name, created.UID,
		t0.UTC().Format("15:04:05.000000"), at[0].Sub(t0))
	return tracedPod{uid: string(created.UID), begin: t0, end: at[0]}, nil
}

// followLogs: a container echoes each line of its FIFO; a follow stream
// (what `kubectl logs -f` reads) gets them through the API server and the
// agent's node API.
func (b *bench) followLogs(ctx context.Context, tr *tracker, a *agent) ([]time.Duration, error) {
	name := "logs"
	fifo := filepath.Join(b.fifoDir, a.name+"-"+name)
	_ = os.Remove(fifo)
	if err := syscall.Mkfifo(fifo, 0o666); err != nil {
		return nil, err
	}
	defer os.Remove(fifo)
	tr.forget(name)
	p := b.pod(a, name, fmt.Sprintf("while :; do while read x; do echo $x; done < /f/%s-%s; done", a.name, name), true)
	p.Spec.RestartPolicy = corev1.RestartPolicyAlways
	if _, err := b.admin.CoreV1().Pods(podNS).Create(ctx, p, metav1.CreateOptions{}); err != nil {
		return nil, err
	}
	if _, err := tr.wait(ctx, []string{name}, func(t *tracker) map[string]time.Time { return t.ready }, 2*time.Minute); err != nil {
		return nil, err
	}
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	type line struct {
		s  string
		at time.Time
	}
	lines := make(chan line, 16)
	// The stream is opened beside the writes: a follow response may only
	// begin with the first line. The first line is a warm-up, not measured.
	go func() {
		defer close(lines)
		rc, err := b.admin.CoreV1().Pods(podNS).GetLogs(name, &corev1.PodLogOptions{Follow: true}).Stream(sctx)
		if err != nil {
			progress("%s: log stream: %v", a.name, err)
			return
		}
		defer rc.Close()
		sc := bufio.NewScanner(rc)
		for sc.Scan() {
			lines <- line{sc.Text(), time.Now()}
		}
	}()
	var out []time.Duration
	for i := -1; i < b.o.logs; i++ {
		tok := fmt.Sprintf("line-%d-%d", i, time.Now().UnixNano())
		t0, err := writeFIFO(ctx, fifo, tok)
		if err != nil {
			return nil, err
		}
		timeout := time.After(30 * time.Second)
	wait:
		for {
			select {
			case l, ok := <-lines:
				if !ok {
					return nil, errors.New("the log stream ended")
				}
				if strings.TrimSpace(l.s) == tok {
					if i >= 0 {
						out = append(out, l.at.Sub(t0))
					}
					break wait
				}
			case <-timeout:
				return nil, fmt.Errorf("log line %q not followed within 30s", tok)
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	return out, nil
}

// deleteAll deletes the agent's pods and waits until they are gone from
// the API (the agent has stopped their containers).
func (b *bench) deleteAll(ctx context.Context, a *agent) error {
	sel := "vsk=" + a.name
	if err := b.admin.CoreV1().Pods(podNS).DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](1)}, metav1.ListOptions{LabelSelector: sel}); err != nil {
		return err
	}
	for i := 0; ; i++ {
		l, err := b.admin.CoreV1().Pods(podNS).List(ctx, metav1.ListOptions{LabelSelector: sel})
		if err == nil && len(l.Items) == 0 {
			return nil
		}
		if i > 1200 {
			return fmt.Errorf("%d pods of %s not gone within 2m", len(l.Items), a.name)
		}
		select {
		case <-time.After(100 * time.Millisecond):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

func pct(d []time.Duration, p float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), d...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	i := int(math.Ceil(p/100*float64(len(s)))) - 1
	return s[max(i, 0)]
}

func mean(x []float64) float64 {
	var s float64
	for _, v := range x {
		s += v
	}
	return s / float64(len(x))
}

func loadavg() string {
	b, _ := os.ReadFile("/proc/loadavg")
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

func ms(d time.Duration) string { return strconv.FormatInt(d.Milliseconds(), 10) }

// ratio is kubelet's figure over nodeagent's ("×" above 1: nodeagent is
// better for figures where less is better).
func ratio(k, n float64) string {
	if n == 0 || math.IsNaN(k) || math.IsNaN(n) {
		return "—"
	}
	return fmt.Sprintf("%.1f×", k/n)
}

func report(o options, res map[string]*results, load0, load1 string, took time.Duration) string {
	k, n, base := res[kubeletName], res[nodeagentName], res[baselineName]
	withBase := o.baseline != ""
	var w strings.Builder
	kv, _ := exec.Command(o.kubelet, "--version").Output()
	fmt.Fprintf(&w, "\nvs-kubelet: %d rounds (alternating), %v; load average %s at the start, %s at the end; %s; nodeagent %s\n\n",
		o.rounds, took.Round(time.Second), load0, load1, strings.TrimSpace(string(kv)), o.nodeagent)
	if withBase {
		fmt.Fprintf(&w, "baseline: %s (another nodeagent build, same rounds)\n\n", o.baseline)
		fmt.Fprintln(&w, "| | kubelet | nodeagent | kubelet ÷ nodeagent | baseline | baseline ÷ nodeagent |")
		fmt.Fprintln(&w, "| --- | --- | --- | --- | --- | --- |")
	} else {
		fmt.Fprintln(&w, "| | kubelet | nodeagent | kubelet ÷ nodeagent |")
		fmt.Fprintln(&w, "| --- | --- | --- | --- |")
	}
	row := func(label string, cells ...string) {
		if !withBase {
			cells = cells[:3]
		}
		fmt.Fprintf(&w, "| %s | %s |\n", label, strings.Join(cells, " | "))
	}
	cell := func(d []time.Duration) string {
		if len(d) == 0 {
			return "—"
		}
		return ms(pct(d, 50)) + " / " + ms(pct(d, 99)) + " ms"
	}
	r2 := func(a, b []time.Duration) string {
		if len(a) == 0 || len(b) == 0 {
			return "—"
		}
		return ratio(float64(pct(a, 50)), float64(pct(b, 50))) + " / " + ratio(float64(pct(a, 99)), float64(pct(b, 99)))
	}
	lat := func(label string, kd, nd, bd []time.Duration) {
		ns := fmt.Sprintf("%d / %d", len(kd), len(nd))
		if withBase {
			ns += fmt.Sprintf(" / %d", len(bd))
		}
		row(fmt.Sprintf("%s (n=%s), p50 / p99", label, ns), cell(kd), cell(nd), r2(kd, nd), cell(bd), r2(bd, nd))
	}
	lat("pod create → Ready, one at a time", k.seq, n.seq, base.seq)
	for _, bs := range o.bursts {
		lat(fmt.Sprintf("%d pods at once, create → Ready", bs), k.burst[bs], n.burst[bs], base.burst[bs])
	}
	lat("container exit → pod Succeeded in a watch", k.exit, n.exit, base.exit)
	lat("`kubectl logs -f`: line written → followed", k.logs, n.logs, base.logs)
	lat("process start → Node Ready", k.ready, n.ready, base.ready)
	pc := func(x []float64) string { return fmt.Sprintf("%.2f %%", 100*mean(x)) }
	row(fmt.Sprintf("agent CPU, %d running pods, idle %v (of a core)", o.idlePods, o.idleWindow),
		pc(k.agentCPU), pc(n.agentCPU), ratio(mean(k.agentCPU), mean(n.agentCPU)), pc(base.agentCPU), ratio(mean(base.agentCPU), mean(n.agentCPU)))
	row("containerd CPU in the same window", pc(k.ctrdCPU), pc(n.ctrdCPU), ratio(mean(k.ctrdCPU), mean(n.ctrdCPU)), pc(base.ctrdCPU), ratio(mean(base.ctrdCPU), mean(n.ctrdCPU)))
	mib := func(x []float64) string { return fmt.Sprintf("%.1f MiB", mean(x)) }
	row(fmt.Sprintf("agent working set (its cgroup: usage − inactive_file), %d running pods", o.idlePods),
		mib(k.workingSet), mib(n.workingSet), ratio(mean(k.workingSet), mean(n.workingSet)), mib(base.workingSet), ratio(mean(base.workingSet), mean(n.workingSet)))
	row(fmt.Sprintf("agent RSS (the process), %d running pods", o.idlePods),
		mib(k.rss), mib(n.rss), ratio(mean(k.rss), mean(n.rss)), mib(base.rss), ratio(mean(base.rss), mean(n.rss)))
	// The exit latency's whole distribution: its tail is the target.
	fmt.Fprintln(&w)
	for _, a := range []struct {
		name string
		d    []time.Duration
	}{{kubeletName, k.exit}, {nodeagentName, n.exit}, {baselineName, base.exit}} {
		if len(a.d) == 0 {
			continue
		}
		s := append([]time.Duration(nil), a.d...)
		slices.Sort(s)
		var parts []string
		for _, d := range s {
			parts = append(parts, fmt.Sprintf("%.1f", float64(d)/float64(time.Millisecond)))
		}
		fmt.Fprintf(&w, "exit → Succeeded, %s, every sample (ms): %s\n", a.name, strings.Join(parts, " "))
	}
	return w.String()
}
