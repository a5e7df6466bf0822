// Command pods benchmarks the agent running pods (issue 6): pod start
// latency (pod bound to the node → Running in the API, image present) and
// the agent's memory and CPU with many running pods, for the event-driven
// PLEG (the default) and the relist-only PLEG (`pleg: {eventSources: []}`,
// a relist every second) in the same run.
//
//	go run ./hack/bench/pods -agent _output/benchpods/nodeagent [-cluster-dir DIR] [-pods 50] [-rss-pods 100] [-json FILE]
//
// hack/bench/pods/pods.sh builds the agent as `make build` does and runs it.
//
// It uses the local cluster in -cluster-dir (default $NODEAGENT_CLUSTER_DIR)
// when one is running there, else starts one in a temporary directory and
// stops it at the end. Each PLEG mode gets its own agent process (the real
// binary), node name with node credentials, root directory and containerd
// namespace (bench-pods-<mode>-<run>, so that runs can share a cluster, with the busybox test image imported, so no
// pull is measured). Phases, one mode after the other so that the two agents
// never work at the same time:
//
//   - idle, 0 pods: RSS, and CPU over the idle window (both agents at once);
//   - sequential: create a pod, wait until it is Running, create the next;
//   - burst: create all pods back to back;
//   - many pods: create -rss-pods pods in bursts of -rss-batch (each burst
//     Running before the next), wait -settle, then RSS, Go heap (from
//     /metrics) and CPU over the idle window; delete them, wait -settle,
//     RSS again;
//   - with -hold, the many pods are kept that long while the run watches
//     the agent's Lease renewals, /livez and memory PSI (pressure.go);
//     with -memory-limit every agent runs under that limit from its start
//     (the pressure test of issue 16: memcg.go says what the limit is on
//     cgroup v1 and v2);
//   - runtime floor: the same container starts without the agent, through
//     the runtime adapter in this process (network namespace, image lookup,
//     create, start), one after the other and all at once, in a containerd
//     namespace of their own: what containerd, the shim and runc cost.
//
// -baseline-agent adds mode "baseline": a previous build, event-driven, in
// the same run (issue 16 compares memory against the build before). -pods 0
// leaves the latency phases out.
//
// Latency of a pod: from just before its Create call to the moment an
// informer (a watch on the node's pods, as admin) first sees phase Running
// with every container running. The agents log JSON; their "started
// container" lines split that time into the agent's work up to a started
// container and the rest (detection, status patch, watch). Pods are deleted (grace period 1s) and their
// containers gone between phases. Everything the run creates is removed at
// the end, also after an error or Ctrl-C.
//
// Needs root, the control plane binaries (hack/build-controlplane.sh),
// containerd, runc and busybox-static.
package main

import (
	"bufio"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	goruntime "runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"

	"github.com/nodeagent/nodeagent/config"
	"github.com/nodeagent/nodeagent/internal/netns"
	"github.com/nodeagent/nodeagent/internal/testing/localcluster"
	"github.com/nodeagent/nodeagent/internal/testing/testenv"
	"github.com/nodeagent/nodeagent/internal/testing/testimage"
	"github.com/nodeagent/nodeagent/pods/volume"
	"github.com/nodeagent/nodeagent/runtime"
)

// PLEG modes, in run order.
const (
	modeEvent  = "event"
	modeRelist = "relist"
	// modeBaseline is event-driven, with the -baseline-agent binary.
	modeBaseline = "baseline"
)

var modeTitle = map[string]string{modeEvent: "event-driven", modeRelist: "relist-only 1s", modeCNI: "event-driven + CNI", modeBaseline: "baseline build, event-driven"}

// Latency phases: pods one at a time, the same with a workload's pod spec
// (probes and a restricted securityContext), and all at once.
const (
	phaseSequential = "sequential"
	phaseWorkload   = "sequential, probes + restricted securityContext"
	phaseBurst      = "burst"
)

// benchLabel marks every pod of a run (value: the run ID).
const benchLabel = "nodeagent.io/bench-pods"

type options struct {
	clusterDir string
	binDir     string
	agentBin   string
	pods       int
	rssPods    int
	settle     time.Duration
	idle       time.Duration
	podTimeout time.Duration
	modes      []string
	jsonOut    string
	logDir     string
	floor      int
	rssBatch   int
	// baselineAgent runs as mode "baseline" (event-driven PLEG), the
	// previous build measured in the same run (issue 16).
	baselineAgent string
	memoryLimit   int64         // bytes, on each agent's memory cgroup from its start; 0: none
	hold          time.Duration // keep the memory phase's pods this long, watching the agent (pressure.go)
}

func main() {
	var o options
	fs := flag.NewFlagSet("pods", flag.ExitOnError)
	fs.StringVar(&o.clusterDir, "cluster-dir", os.Getenv("NODEAGENT_CLUSTER_DIR"), "running local cluster to use (default $NODEAGENT_CLUSTER_DIR); none: start one in a temporary directory")
	fs.StringVar(&o.binDir, "bin-dir", filepath.Join("_output", "bin"), "control plane binaries, to start a cluster")
	fs.StringVar(&o.agentBin, "agent", filepath.Join("_output", "bin", "nodeagent"), "nodeagent binary")
	fs.IntVar(&o.pods, "pods", 50, "pods per latency phase (sequential and burst)")
	fs.IntVar(&o.rssPods, "rss-pods", 100, "running pods for the memory and CPU phase (0: skip it)")
	fs.DurationVar(&o.settle, "settle", 30*time.Second, "wait after start, after the pods are Running and after they are gone, before measuring memory")
	fs.DurationVar(&o.idle, "idle", 60*time.Second, "CPU measurement window")
	fs.DurationVar(&o.podTimeout, "pod-timeout", 2*time.Minute, "how long a pod may take to run before the run fails")
	modes := fs.String("modes", modeEvent+","+modeRelist, "PLEG modes to run: event, relist, cni (event-driven with a CNI bridge network)")
	fs.StringVar(&o.jsonOut, "json", "", "also write the results as JSON to this file")
	fs.IntVar(&o.rssBatch, "rss-batch", 10, "the memory phase creates its pods in batches of this many, each batch Running before the next (bursts of 100 overload containerd on a small machine and the retries would distort the memory figures)")
	fs.IntVar(&o.floor, "floor", 50, "containers for the runtime floor phase (0: skip it)")
	fs.StringVar(&o.logDir, "logs", "", "copy the agents' logs (JSON) to this directory at the end, also after an error")
	fs.StringVar(&o.baselineAgent, "baseline-agent", "", "a previous nodeagent binary to measure in the same run, as mode \"baseline\" (event-driven; added to -modes)")
	limit := fs.String("memory-limit", "", "memory limit of each agent's cgroup from its start, e.g. 32M (cgroup v2: memory.high; v1: memory.limit_in_bytes)")
	fs.DurationVar(&o.hold, "hold", 0, "keep the memory phase's pods running this long, watching Lease renewals, /livez and memory PSI (0: no hold)")
	_ = fs.Parse(os.Args[1:])
	for _, m := range strings.Split(*modes, ",") {
		if m != modeEvent && m != modeRelist && m != modeCNI && m != modeBaseline {
			fmt.Fprintf(os.Stderr, "pods: bad -modes %q: each must be %q, %q, %q or %q\n", *modes, modeEvent, modeRelist, modeCNI, modeBaseline)
			os.Exit(2)
		}
		o.modes = append(o.modes, m)
	}
	if o.baselineAgent != "" && !slices.Contains(o.modes, modeBaseline) {
		o.modes = append(o.modes, modeBaseline)
	}
	if slices.Contains(o.modes, modeBaseline) && o.baselineAgent == "" {
		fmt.Fprintln(os.Stderr, "pods: mode baseline needs -baseline-agent")
		os.Exit(2)
	}
	if *limit != "" {
		q, err := resource.ParseQuantity(*limit)
		if err != nil || q.Value() <= 0 {
			fmt.Fprintf(os.Stderr, "pods: bad -memory-limit %q: want a positive quantity such as 32M or 32Mi\n", *limit)
			os.Exit(2)
		}
		o.memoryLimit = q.Value()
	}
	if o.hold < 0 || (o.hold > 0 && o.rssPods == 0) {
		fmt.Fprintln(os.Stderr, "pods: -hold must not be negative, and needs -rss-pods")
		os.Exit(2)
	}
	if o.pods < 0 || o.rssPods < 0 || o.floor < 0 || o.rssBatch <= 0 || o.settle < 0 || o.idle <= 0 || o.podTimeout <= 0 {
		fmt.Fprintln(os.Stderr, "pods: -idle and -pod-timeout must be positive; -pods (0: no latency phases), -rss-pods and -settle not negative")
		os.Exit(2)
	}
	if os.Geteuid() != 0 {
		fmt.Fprintln(os.Stderr, "pods: must run as root (containerd, cgroups, network namespaces)")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, o); err != nil {
		fmt.Fprintln(os.Stderr, "pods:", err)
		os.Exit(1)
	}
}

// Results, as printed and as written with -json.

type stats struct {
	N    int     `json:"n"`
	P50  float64 `json:"p50Ms"`
	P90  float64 `json:"p90Ms"`
	P99  float64 `json:"p99Ms"`
	Max  float64 `json:"maxMs"`
	Mean float64 `json:"meanMs"`
}

type latencyResult struct {
	Mode    string `json:"mode"`
	Phase   string `json:"phase"`
	Running stats  `json:"running"` // create → Running seen
	// FirstStatus is create → the first status from the agent (startTime
	// set): admission, the pod's first status patch and the watch.
	FirstStatus stats `json:"firstStatus"`
	// Started is create → the agent's "started container" log line (after
	// its StartContainer call returned): the agent's own work before the
	// container runs. The rest up to Running is detection, status and watch.
	Started stats `json:"started"`
	// Ready is create → the Ready condition True seen (the workload
	// phase, whose readiness probe decides it).
	Ready stats `json:"ready,omitzero"`
	// AllRunningMs is the first create → the last pod seen Running.
	AllRunningMs float64 `json:"allRunningMs"`

	raw struct{ running, started, status []time.Duration }
}

// mergeLatency summarizes several batches as one phase (AllRunningMs is the
// sum of the batches').
func mergeLatency(mode, phase string, lrs []latencyResult) latencyResult {
	out := latencyResult{Mode: mode, Phase: phase}
	for _, l := range lrs {
		out.raw.running = append(out.raw.running, l.raw.running...)
		out.raw.started = append(out.raw.started, l.raw.started...)
		out.raw.status = append(out.raw.status, l.raw.status...)
		out.AllRunningMs += l.AllRunningMs
	}
	out.Running, out.Started, out.FirstStatus = summarize(out.raw.running), summarize(out.raw.started), summarize(out.raw.status)
	return out
}

type memSample struct {
	Pods    int     `json:"pods"`
	When    string  `json:"when"`
	RSSMiB  float64 `json:"rssMiB"`
	AnonMiB float64 `json:"anonymousMiB"`
	FileMiB float64 `json:"fileBackedMiB"`
	// CgroupAnonMiB is the anonymous memory of the agent's cgroup (v2
	// anon, v1 total_rss); CgroupUsageMiB its usage (file pages included).
	CgroupAnonMiB  float64 `json:"cgroupAnonMiB"`
	CgroupUsageMiB float64 `json:"cgroupUsageMiB"`
	LoadAvg        string  `json:"loadAverage"` // when the sample was taken
	// WorkingSetMiB is the working set of the agent's memory cgroup as
	// kubelet and cAdvisor compute it (usage − inactive file pages).
	WorkingSetMiB float64 `json:"workingSetMiB"`
	// KernelMiB, ActiveFileMiB and ShmemMiB are what the working set holds
	// besides anonymous memory (memStat).
	KernelMiB     float64 `json:"kernelMiB"`
	ActiveFileMiB float64 `json:"activeFileMiB"`
	ShmemMiB      float64 `json:"shmemMiB"`
	HeapInuse     float64 `json:"goHeapInuseMiB"`
	HeapObjects   float64 `json:"goHeapObjects"`
	StackInuse    float64 `json:"goStackInuseMiB"`
	GoSys         float64 `json:"goSysMiB"`
	Goroutines    float64 `json:"goroutines"`
	// IdleSeconds is the CPU measurement window; 0 when CPU was not measured.
	IdleSeconds float64 `json:"idleSeconds,omitempty"`
	CPUSeconds  float64 `json:"cpuSeconds,omitempty"`
	CPUPercent  float64 `json:"cpuPercentOfOneCore,omitempty"`
	// ContainerdCPUSeconds is containerd's CPU over the same window (it
	// serves every client of the cluster's containerd).
	ContainerdCPUSeconds float64 `json:"containerdCPUSeconds,omitempty"`
}

type result struct {
	Started   string                 `json:"started"`
	Machine   string                 `json:"machine"`
	LoadStart string                 `json:"loadAverageStart"`
	LoadEnd   string                 `json:"loadAverageEnd"`
	Idle      string                 `json:"idleWindow"`
	Settle    string                 `json:"settle"`
	Latency   []latencyResult        `json:"latency"`
	Memory    map[string][]memSample `json:"memory"` // mode → samples
	Floor     []floorResult          `json:"runtimeFloor"`
	Pressure  []pressureResult       `json:"pressure,omitempty"`
	Binaries  map[string]int64       `json:"agentBinaryBytes"` // mode → size of the binary it ran
	// Warnings counts the agents' WARN log lines by message, per mode.
	Warnings    map[string]map[string]int `json:"agentWarnings"`
	Containerd  string                    `json:"containerd"`
	ClusterNote string                    `json:"cluster"`
}

type bench struct {
	o       options
	state   *localcluster.State
	admin   kubernetes.Interface
	runID   string
	agents  map[string]*agentProc
	log     *slog.Logger
	workDir string
}

func run(ctx context.Context, o options) error {
	b := &bench{o: o, agents: map[string]*agentProc{}, runID: strconv.Itoa(os.Getpid()),
		log: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))}
	res := result{Started: time.Now().UTC().Format("2006-01-02 15:04 UTC"), Machine: machine(), LoadStart: loadavg(),
		Idle: o.idle.String(), Settle: o.settle.String(), Memory: map[string][]memSample{}, Binaries: map[string]int64{}}
	for _, m := range o.modes {
		fi, err := os.Stat(o.binary(m))
		if err != nil {
			return fmt.Errorf("agent binary: %w (build it with hack/bench/pods/pods.sh or make build)", err)
		}
		res.Binaries[m] = fi.Size()
	}
	var err error
	if b.workDir, err = os.MkdirTemp("", "na-benchpods-"); err != nil {
		return err
	}
	defer os.RemoveAll(b.workDir)
	stopCluster, note, err := b.cluster(ctx)
	if err != nil {
		return err
	}
	defer stopCluster()
	res.ClusterNote = note
	defer b.cleanup()
	if o.logDir != "" {
		defer b.copyLogs()
	}

	for _, m := range o.modes {
		a, err := b.startAgent(ctx, m)
		if err != nil {
			return fmt.Errorf("agent %s: %w", m, err)
		}
		b.agents[m] = a
		if v, err := a.rt.Version(ctx); err == nil {
			res.Containerd = v.RuntimeVersion
		}
	}
	progress("agents ready; settling %s", o.settle)
	if err := sleep(ctx, o.settle); err != nil {
		return err
	}
	// Idle with no pods, both agents at once (they do not interact).
	samples, err := b.idleSample(ctx, 0, "after start", o.modes...)
	if err != nil {
		return err
	}
	for m, s := range samples {
		res.Memory[m] = append(res.Memory[m], s)
	}

	for _, phase := range []string{phaseSequential, phaseWorkload, phaseBurst} {
		if o.pods == 0 {
			break
		}
		for _, m := range o.modes {
			lr, err := b.latencyPhase(ctx, b.agents[m], phase, o.pods)
			if err != nil {
				return err
			}
			res.Latency = append(res.Latency, lr)
		}
	}

	for _, m := range o.modes {
		if o.rssPods == 0 {
			break
		}
		a := b.agents[m]
		var names []string
		var lrs []latencyResult
		for len(names) < o.rssPods {
			n := min(o.rssBatch, o.rssPods-len(names))
			batch, lr, err := b.startPods(ctx, a, fmt.Sprintf("many%d", len(names)), "", n, false)
			names = append(names, batch...)
			if err != nil {
				return err
			}
			lrs = append(lrs, lr)
		}
		res.Latency = append(res.Latency, mergeLatency(a.mode, fmt.Sprintf("%d pods in bursts of %d (memory phase)", o.rssPods, o.rssBatch), lrs))
		progress("%s: %d pods running; settling %s", m, o.rssPods, o.settle)
		if err := sleep(ctx, o.settle); err != nil {
			return err
		}
		s, err := b.idleSample(ctx, o.rssPods, "running", m)
		if err != nil {
			return err
		}
		res.Memory[m] = append(res.Memory[m], s[m])
		if o.hold > 0 {
			pr, err := b.hold(ctx, a, names, o.hold)
			if err != nil {
				return err
			}
			res.Pressure = append(res.Pressure, pr)
		}
		if err := b.deletePods(ctx, a, names); err != nil {
			return err
		}
		if err := sleep(ctx, o.settle); err != nil {
			return err
		}
		ms, err := a.memory(ctx)
		if err != nil {
			return err
		}
		ms.When = "after deleting them"
		res.Memory[m] = append(res.Memory[m], ms)
	}
	if o.floor > 0 {
		for _, burst := range []bool{false, true} {
			fr, err := b.runtimeFloor(ctx, o.floor, burst)
			if err != nil {
				return fmt.Errorf("runtime floor: %w", err)
			}
			res.Floor = append(res.Floor, fr)
		}
	}
	for m, a := range b.agents {
		select {
		case <-a.exited:
			return fmt.Errorf("agent %s exited during the run: %s", m, tail(a.logPath()))
		default:
		}
	}
	res.LoadEnd = loadavg()
	res.Warnings = map[string]map[string]int{}
	for m, a := range b.agents {
		if res.Warnings[m], err = warnings(a.logPath()); err != nil {
			return err
		}
	}
	report(os.Stdout, res, o)
	if o.jsonOut != "" {
		data, _ := json.MarshalIndent(res, "", "  ")
		if err := os.WriteFile(o.jsonOut, append(data, '\n'), 0o644); err != nil {
			return err
		}
	}
	return nil
}

func progress(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "%s bench: %s\n", time.Now().Format("15:04:05"), fmt.Sprintf(format, args...))
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// cluster uses the running cluster in -cluster-dir or starts one in a
// temporary directory; the returned function stops what it started.
func (b *bench) cluster(ctx context.Context) (func(), string, error) {
	noop := func() {}
	if b.o.clusterDir != "" {
		if s, err := localcluster.Load(b.o.clusterDir); err == nil {
			hctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			err = s.Healthy(hctx)
			cancel()
			if err == nil && s.ContainerdAddress != "" {
				b.state = s
				progress("using the running cluster in %s", b.o.clusterDir)
				return noop, "the running cluster in " + b.o.clusterDir, b.adminClient()
			}
		}
		progress("no healthy cluster with containerd in %s: starting one", b.o.clusterDir)
	}
	dir, err := os.MkdirTemp("", "na-benchpods-cluster-")
	if err != nil {
		return noop, "", err
	}
	bin, err := filepath.Abs(b.o.binDir)
	if err != nil {
		return noop, "", err
	}
	progress("starting a local cluster in %s", dir)
	s, err := localcluster.Up(ctx, localcluster.Options{Dir: dir, BinDir: bin, Log: os.Stderr})
	if err != nil {
		_ = localcluster.Down(dir)
		_ = os.RemoveAll(dir)
		return noop, "", fmt.Errorf("starting the local cluster (build it with hack/build-controlplane.sh): %w", err)
	}
	b.state = s
	stop := func() {
		progress("stopping the local cluster")
		_ = localcluster.Down(dir)
		_ = os.RemoveAll(dir)
	}
	return stop, "a cluster started for the run", b.adminClient()
}

func (b *bench) adminClient() error {
	cfg, err := clientcmd.BuildConfigFromFlags("", b.state.AdminKubeconfig)
	if err != nil {
		return err
	}
	// The burst phase must not be throttled on our side.
	cfg.QPS, cfg.Burst = 500, 1000
	b.admin, err = kubernetes.NewForConfig(cfg)
	return err
}

// agentProc is one nodeagent process and what it needs.
type agentProc struct {
	mode, node, ns string
	dir            string // config, log and rootDir
	metricsURL     string
	rt             *runtime.Runtime // the agent's containerd namespace
	cmd            *exec.Cmd
	exited         chan struct{}
	tracker        *tracker
	stopInformer   context.CancelFunc
	cg             *memCgroup // the agent's own memory cgroup
}

// binary is the agent binary mode runs.
func (o options) binary(mode string) string {
	if mode == modeBaseline {
		return o.baselineAgent
	}
	return o.agentBin
}

func (a *agentProc) rootDir() string { return filepath.Join(a.dir, "root") }
func (a *agentProc) logPath() string { return filepath.Join(a.dir, "agent.log") }

func (b *bench) startAgent(ctx context.Context, mode string) (*agentProc, error) {
	a := &agentProc{mode: mode, node: fmt.Sprintf("bench-pods-%s-%s", mode, b.runID), ns: "bench-pods-" + mode + "-" + b.runID,
		dir: filepath.Join(b.workDir, mode)}
	if err := os.MkdirAll(a.dir, 0o755); err != nil {
		return nil, err
	}
	var err error
	a.rt, err = runtime.New(runtime.Options{Address: b.state.ContainerdAddress, Namespace: a.ns, Logger: b.log, CallTimeout: time.Minute})
	if err != nil {
		return nil, err
	}
	// A namespace left over by an interrupted run must start empty.
	if err := removeContainers(ctx, a.rt); err != nil {
		return nil, err
	}
	if err := testimage.Import(ctx, a.rt); err != nil {
		return nil, fmt.Errorf("importing the test image: %w", err)
	}
	kc, err := b.state.NodeKubeconfig(a.node)
	if err != nil {
		return nil, err
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	a.metricsURL = fmt.Sprintf("http://127.0.0.1:%d/metrics", port)
	cfg := fmt.Sprintf("apiVersion: config.nodeagent.io/v1alpha1\nkind: NodeAgentConfiguration\nrootDir: %s\npodLogsDir: %s\ncontainerLogsDir: %s\nhealthzPort: %d\nport: 0\ncniConfDir: \"\"\ncontainerRuntimeEndpoint: unix://%s\ncontainerRuntimeNamespace: %s\nlogging:\n  format: json\n\n# The machine is shared: other work fills its disk to near the 15 %% imagefs default.\nevictionHard:\n  memory.available: 100Mi\n  nodefs.available: 5%%\n  imagefs.available: 5%%\n",
		a.rootDir(), filepath.Join(a.dir, "log", "pods"), filepath.Join(a.dir, "log", "containers"), port, b.state.ContainerdAddress, a.ns)
	if mode == modeRelist {
		cfg += "pleg:\n  eventSources: []\n"
	}
	if mode == modeCNI {
		cfg = strings.Replace(cfg, "cniConfDir: \"\"\n", a.cniConfig(), 1)
	}
	cfgPath := filepath.Join(a.dir, "config.yaml")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
		return nil, err
	}
	logf, err := os.Create(a.logPath())
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	bin := filepath.Join(a.dir, "nodeagent")
	if err := freshCopy(b.o.binary(mode), bin); err != nil {
		return nil, err
	}
	if a.cg, err = newMemCgroup(agentMemCgroupName(mode, b.runID), b.o.memoryLimit); err != nil {
		return nil, err
	}
	argv := a.cg.wrap(bin, "--config", cfgPath, "--kubeconfig", kc, "--hostname-override", a.node)
	a.cmd = exec.Command(argv[0], argv[1:]...)
	a.cmd.Stdout, a.cmd.Stderr = logf, logf
	// The agent dies with this program, whatever happens to it.
	a.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := testimage.StartOnStableThread(a.cmd); err != nil {
		return nil, err
	}
	a.exited = make(chan struct{})
	go func() { _ = a.cmd.Wait(); close(a.exited) }()

	a.tracker = newTracker()
	ictx, cancel := context.WithCancel(context.Background())
	a.stopInformer = cancel
	if err := a.tracker.run(ictx, b.admin, a.node); err != nil {
		return a, err
	}
	progress("%s: agent pid %d, node %s, containerd namespace %s, log %s", mode, a.cmd.Process.Pid, a.node, a.ns, a.logPath())
	if mode == modeCNI {
		if err := b.installCNI(ctx, a); err != nil {
			return a, err
		}
	}
	deadline := time.Now().Add(2 * time.Minute)
	for {
		n, err := b.admin.CoreV1().Nodes().Get(ctx, a.node, metav1.GetOptions{})
		if err == nil && nodeReady(n) {
			return a, nil
		}
		select {
		case <-a.exited:
			return a, fmt.Errorf("the agent exited: %s", tail(a.logPath()))
		case <-ctx.Done():
			return a, ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return a, fmt.Errorf("node %s not Ready within 2m: %s", a.node, tail(a.logPath()))
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

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// tail returns the end of a log file, for error messages.
func tail(path string) string {
	b, _ := os.ReadFile(path)
	if len(b) > 3000 {
		b = b[len(b)-3000:]
	}
	return string(b)
}

// tracker records, per pod name, when the node's pod watch first showed it
// with a status from the agent and Running.
type tracker struct {
	mu      sync.Mutex
	status  map[string]time.Time
	running map[string]time.Time
	ready   map[string]time.Time
	failed  map[string]string
	live    map[string]bool
	now     map[string]bool // running now (podRunning on the latest update)
	changed chan struct{}   // closed and replaced on every change
}

func newTracker() *tracker {
	return &tracker{status: map[string]time.Time{}, running: map[string]time.Time{}, ready: map[string]time.Time{}, failed: map[string]string{},
		live: map[string]bool{}, now: map[string]bool{}, changed: make(chan struct{})}
}

func (t *tracker) run(ctx context.Context, c kubernetes.Interface, node string) error {
	f := informers.NewSharedInformerFactoryWithOptions(c, 0, informers.WithTweakListOptions(func(o *metav1.ListOptions) {
		o.FieldSelector = fields.OneTermEqualSelector("spec.nodeName", node).String()
	}))
	inf := f.Core().V1().Pods().Informer()
	_, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { t.observe(obj, false) },
		UpdateFunc: func(_, obj any) { t.observe(obj, false) },
		DeleteFunc: func(obj any) {
			if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = d.Obj
			}
			t.observe(obj, true)
		},
	})
	if err != nil {
		return err
	}
	f.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		return errors.New("pod informer did not sync")
	}
	return nil
}

func (t *tracker) observe(obj any, deleted bool) {
	now := time.Now()
	p, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	name := p.Name
	if deleted {
		delete(t.live, name)
	} else {
		t.live[name] = true
	}
	if _, ok := t.status[name]; !ok && p.Status.StartTime != nil {
		t.status[name] = now
	}
	t.now[name] = !deleted && podRunning(p)
	if _, ok := t.running[name]; !ok && podRunning(p) {
		t.running[name] = now
	}
	if _, ok := t.ready[name]; !ok && podReady(p) {
		t.ready[name] = now
	}
	if p.Status.Phase == corev1.PodFailed {
		t.failed[name] = fmt.Sprintf("reason=%q message=%q", p.Status.Reason, p.Status.Message)
	}
	close(t.changed)
	t.changed = make(chan struct{})
}

// runningNow reports whether the pod's latest state seen is running.
func (t *tracker) runningNow(name string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.now[name]
}

func podRunning(p *corev1.Pod) bool {
	if p.Status.Phase != corev1.PodRunning || len(p.Status.ContainerStatuses) != len(p.Spec.Containers) {
		return false
	}
	for _, cs := range p.Status.ContainerStatuses {
		if cs.State.Running == nil {
			return false
		}
	}
	return true
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// waitFor waits until cond, called with t.mu held, holds or fails, the
// agent exits, ctx ends or timeout passes.
func (t *tracker) waitFor(ctx context.Context, timeout time.Duration, exited <-chan struct{}, cond func() (bool, error)) error {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		t.mu.Lock()
		ok, err := cond()
		ch := t.changed
		t.mu.Unlock()
		if ok || err != nil {
			return err
		}
		select {
		case <-ch:
		case <-exited:
			return errors.New("the agent exited")
		case <-ctx.Done():
			return ctx.Err()
		case <-deadline.C:
			return fmt.Errorf("timed out after %s", timeout)
		}
	}
}

// waitRunning waits until every named pod has been seen Running.
func (t *tracker) waitRunning(ctx context.Context, timeout time.Duration, exited <-chan struct{}, names ...string) error {
	return t.waitSeen(ctx, timeout, exited, t.running, names)
}

// waitSeen waits until every pod of names is in seen (running or ready).
func (t *tracker) waitSeen(ctx context.Context, timeout time.Duration, exited <-chan struct{}, seen map[string]time.Time, names []string) error {
	return t.waitFor(ctx, timeout, exited, func() (bool, error) {
		for _, n := range names {
			if msg, ok := t.failed[n]; ok {
				return false, fmt.Errorf("pod %s failed: %s", n, msg)
			}
			if _, ok := seen[n]; !ok {
				return false, nil
			}
		}
		return true, nil
	})
}

func (b *bench) pod(a *agentProc, name, phase string) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: metav1.NamespaceDefault, Labels: map[string]string{benchLabel: b.runID}},
		Spec: corev1.PodSpec{
			NodeName:                      a.node,
			AutomountServiceAccountToken:  ptr.To(false),
			TerminationGracePeriodSeconds: ptr.To[int64](1), // `sleep` as PID 1 ignores SIGTERM: keep deletions short
			Containers: []corev1.Container{{
				Name:    "c",
				Image:   testimage.Ref,
				Command: []string{"sleep", "3600"},
			}},
		},
	}
	if phase == phaseWorkload {
		workload(p)
	}
	return p
}

// workload gives a pod what a typical chart sets: the PodSecurity
// restricted profile's securityContext and startup, readiness and liveness
// probes (exec, the only kind a `sleep` container can answer).
func workload(p *corev1.Pod) {
	p.Spec.SecurityContext = &corev1.PodSecurityContext{
		RunAsNonRoot:   ptr.To(true),
		RunAsUser:      ptr.To[int64](65534),
		SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
	}
	c := &p.Spec.Containers[0]
	c.SecurityContext = &corev1.SecurityContext{
		AllowPrivilegeEscalation: ptr.To(false),
		Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
		ReadOnlyRootFilesystem:   ptr.To(true),
	}
	// Kubernetes' default period (10s) for readiness and liveness: each
	// exec probe is a runc exec, and with 1s periods 13 pods (26 execs a
	// second) saturated the 2-core machine's containerd until probes timed
	// out. The startup probe polls every second until it first succeeds.
	probe := func(period, failures int32) *corev1.Probe {
		return &corev1.Probe{
			ProbeHandler:  corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"true"}}},
			PeriodSeconds: period, TimeoutSeconds: 1, FailureThreshold: failures, SuccessThreshold: 1,
		}
	}
	c.StartupProbe, c.ReadinessProbe, c.LivenessProbe = probe(1, 30), probe(10, 3), probe(10, 3)
}

// latencyPhase runs n pods sequentially or in a burst, then deletes them.
func (b *bench) latencyPhase(ctx context.Context, a *agentProc, phase string, n int) (latencyResult, error) {
	key := map[string]string{phaseSequential: "seq", phaseWorkload: "wl", phaseBurst: "burst"}[phase]
	names, lr, err := b.startPods(ctx, a, key, phase, n, phase != phaseBurst)
	if err != nil {
		return lr, err
	}
	return lr, b.deletePods(ctx, a, names)
}

// startPods creates n pods bound to a's node (named after key), one at a
// time (each waited for) or back to back, and returns their latencies once
// all are Running.
func (b *bench) startPods(ctx context.Context, a *agentProc, key, phase string, n int, sequential bool) ([]string, latencyResult, error) {
	lr := latencyResult{Mode: a.mode, Phase: phase}
	progress("%s: %s, %d pods", a.mode, cmp.Or(phase, key), n)
	var names []string
	created := map[string]time.Time{}
	for i := 0; i < n; i++ {
		name := fmt.Sprintf("bp-%s-%s-%s-%d", b.runID, a.mode, key, i)
		t0 := time.Now()
		if _, err := b.admin.CoreV1().Pods(metav1.NamespaceDefault).Create(ctx, b.pod(a, name, phase), metav1.CreateOptions{}); err != nil {
			return names, lr, fmt.Errorf("create %s: %w", name, err)
		}
		names = append(names, name)
		created[name] = t0
		if sequential {
			if err := a.tracker.waitRunning(ctx, b.o.podTimeout, a.exited, name); err != nil {
				return names, lr, fmt.Errorf("%s: pod %s: %w; agent log: %s", a.mode, name, err, a.logPath())
			}
			if phase == phaseWorkload {
				if err := a.tracker.waitSeen(ctx, b.o.podTimeout, a.exited, a.tracker.ready, []string{name}); err != nil {
					return names, lr, fmt.Errorf("%s: pod %s not Ready: %w; agent log: %s", a.mode, name, err, a.logPath())
				}
			}
		}
	}
	if err := a.tracker.waitRunning(ctx, b.o.podTimeout+time.Duration(n)*time.Second, a.exited, names...); err != nil {
		return names, lr, fmt.Errorf("%s: %s pods: %w; agent log: %s", a.mode, phase, err, a.logPath())
	}
	var run, status, ready []time.Duration
	var first, last time.Time
	a.tracker.mu.Lock()
	for _, name := range names {
		t0 := created[name]
		run = append(run, a.tracker.running[name].Sub(t0))
		if ts, ok := a.tracker.ready[name]; ok && phase == phaseWorkload {
			ready = append(ready, ts.Sub(t0))
		}
		if ts, ok := a.tracker.status[name]; ok {
			status = append(status, ts.Sub(t0))
		}
		if first.IsZero() || t0.Before(first) {
			first = t0
		}
		if r := a.tracker.running[name]; r.After(last) {
			last = r
		}
	}
	a.tracker.mu.Unlock()
	lr.Running, lr.FirstStatus, lr.Ready = summarize(run), summarize(status), summarize(ready)
	startedAt, err := startedTimes(a.logPath())
	if err != nil {
		return names, lr, err
	}
	var started []time.Duration
	for _, name := range names {
		if ts, ok := startedAt[metav1.NamespaceDefault+"/"+name]; ok {
			started = append(started, ts.Sub(created[name]))
		}
	}
	lr.Started = summarize(started)
	lr.raw.running, lr.raw.started, lr.raw.status = run, started, status
	lr.AllRunningMs = ms(last.Sub(first))
	progress("%s: %s: p50 %.0f ms, p99 %.0f ms, max %.0f ms", a.mode, cmp.Or(phase, key), lr.Running.P50, lr.Running.P99, lr.Running.Max)
	return names, lr, nil
}

// warnings counts the WARN and ERROR lines of the agent's JSON log by
// message.
func warnings(path string) (map[string]int, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	out := map[string]int{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64<<10), 4<<20)
	for sc.Scan() {
		var l struct{ Level, Msg string }
		if json.Unmarshal(sc.Bytes(), &l) == nil && (l.Level == "WARN" || l.Level == "ERROR") {
			out[l.Msg]++
		}
	}
	return out, sc.Err()
}

// startedTimes reads the agent's JSON log: pod → when its first container
// attempt was logged as started.
func startedTimes(path string) (map[string]time.Time, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	out := map[string]time.Time{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64<<10), 4<<20)
	for sc.Scan() {
		var l struct {
			Time    time.Time `json:"time"`
			Msg     string    `json:"msg"`
			Pod     string    `json:"pod"`
			Attempt int       `json:"attempt"`
		}
		if json.Unmarshal(sc.Bytes(), &l) != nil || l.Msg != "started container" || l.Attempt != 0 {
			continue
		}
		if _, ok := out[l.Pod]; !ok {
			out[l.Pod] = l.Time
		}
	}
	return out, sc.Err()
}

// deletePods deletes the pods through the API (their grace period) and
// waits until they are gone from the API and their containers from
// containerd.
func (b *bench) deletePods(ctx context.Context, a *agentProc, names []string) error {
	start := time.Now()
	for _, name := range names {
		err := b.admin.CoreV1().Pods(metav1.NamespaceDefault).Delete(ctx, name, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("delete %s: %w", name, err)
		}
	}
	err := a.tracker.waitFor(ctx, 3*time.Minute, a.exited, func() (bool, error) {
		for _, n := range names {
			if a.tracker.live[n] {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		return fmt.Errorf("%s: pods not gone from the API: %w; agent log: %s", a.mode, err, a.logPath())
	}
	for {
		cs, err := a.rt.ListContainers(ctx)
		if err != nil {
			return err
		}
		if len(cs) == 0 {
			break
		}
		if time.Since(start) > 3*time.Minute {
			return fmt.Errorf("%s: %d containers left 3m after deleting the pods", a.mode, len(cs))
		}
		if err := sleep(ctx, 200*time.Millisecond); err != nil {
			return err
		}
	}
	progress("%s: %d pods deleted and their containers gone in %s", a.mode, len(names), time.Since(start).Round(100*time.Millisecond))
	return nil
}

// idleSample measures memory and, over the idle window, CPU of the named
// agents at the same time.
func (b *bench) idleSample(ctx context.Context, podCount int, when string, modes ...string) (map[string]memSample, error) {
	progress("idle: measuring %v with %d pods over %s", modes, podCount, b.o.idle)
	cpu0 := map[string]time.Duration{}
	for _, m := range modes {
		cpu0[m] = cpuTime(b.agents[m].cmd.Process.Pid)
	}
	cdPid := b.state.Pids["containerd"]
	cd0 := cpuTime(cdPid)
	t0 := time.Now()
	if err := sleep(ctx, b.o.idle); err != nil {
		return nil, err
	}
	wall := time.Since(t0)
	cd := (cpuTime(cdPid) - cd0).Seconds()
	out := map[string]memSample{}
	for _, m := range modes {
		a := b.agents[m]
		cpu := (cpuTime(a.cmd.Process.Pid) - cpu0[m]).Seconds()
		s, err := a.memory(ctx)
		if err != nil {
			return nil, err
		}
		s.Pods, s.When = podCount, when
		s.IdleSeconds, s.CPUSeconds, s.CPUPercent = wall.Seconds(), cpu, 100*cpu/wall.Seconds()
		s.ContainerdCPUSeconds = cd
		out[m] = s
	}
	return out, nil
}

// memory reads the agent's RSS and its split (as hack/bench/idle does) and
// the Go runtime's view from /metrics.
func (a *agentProc) memory(ctx context.Context) (memSample, error) {
	var s memSample
	pid := a.cmd.Process.Pid
	st, err := procFields(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return s, err
	}
	rollup, err := procFields(fmt.Sprintf("/proc/%d/smaps_rollup", pid))
	if err != nil {
		return s, err
	}
	s.RSSMiB = st["VmRSS"] / 1024
	s.AnonMiB = rollup["Anonymous"] / 1024
	s.FileMiB = (rollup["Rss"] - rollup["Anonymous"]) / 1024
	s.LoadAvg = loadavg()
	if a.cg != nil {
		cs, err := a.cg.stat()
		if err != nil {
			return s, err
		}
		s.WorkingSetMiB, s.CgroupAnonMiB, s.CgroupUsageMiB = cs.WorkingSet, cs.Anon, cs.Usage
		s.KernelMiB, s.ActiveFileMiB, s.ShmemMiB = cs.Kernel, cs.ActiveFile, cs.Shmem
	}
	m, err := scrape(ctx, a.metricsURL)
	if err != nil {
		return s, err
	}
	s.HeapInuse = m["go_memstats_heap_inuse_bytes"] / (1 << 20)
	s.HeapObjects = m["go_memstats_heap_objects"]
	s.StackInuse = m["go_memstats_stack_inuse_bytes"] / (1 << 20)
	s.GoSys = m["go_memstats_sys_bytes"] / (1 << 20)
	s.Goroutines = m["go_goroutines"]
	return s, nil
}

// procFields parses "Key:   123 kB" lines (values in kB).
func procFields(path string) (map[string]float64, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	out := map[string]float64{}
	for _, line := range strings.Split(string(data), "\n") {
		k, v, ok := strings.Cut(line, ":")
		f := strings.Fields(v)
		if !ok || len(f) == 0 {
			continue
		}
		if n, err := strconv.ParseFloat(f[0], 64); err == nil {
			out[k] = n
		}
	}
	return out, nil
}

// scrape reads unlabelled samples from a Prometheus text endpoint.
func scrape(ctx context.Context, url string) (map[string]float64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s: %s", url, resp.Status)
	}
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "#") || strings.Contains(line, "{") {
			continue
		}
		if k, v, ok := strings.Cut(line, " "); ok {
			if n, err := strconv.ParseFloat(v, 64); err == nil {
				out[k] = n
			}
		}
	}
	return out, sc.Err()
}

// cpuTime is a process's user+system CPU time (10 ms resolution).
func cpuTime(pid int) time.Duration {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	s := string(data)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(s[i+2:])
	if len(f) < 13 {
		return 0
	}
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(ut+st) * time.Second / 100 // USER_HZ
}

// cleanup deletes the run's pods, stops the agents, and removes what they
// leave behind: containers, volume mounts, network namespaces, the Nodes and
// Leases.
func (b *bench) cleanup() {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	progress("cleaning up")
	if b.admin != nil {
		sel := metav1.ListOptions{LabelSelector: benchLabel + "=" + b.runID}
		_ = b.admin.CoreV1().Pods(metav1.NamespaceDefault).DeleteCollection(ctx, metav1.DeleteOptions{}, sel)
	}
	for _, a := range b.agents {
		if a.cmd == nil {
			continue
		}
		// Let the agent stop the pods' containers itself.
		deadline := time.Now().Add(time.Minute)
		for time.Now().Before(deadline) {
			cs, err := a.rt.ListContainers(ctx)
			if err != nil || len(cs) == 0 {
				break
			}
			time.Sleep(200 * time.Millisecond)
		}
		_ = a.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-a.exited:
		case <-time.After(10 * time.Second):
			_ = a.cmd.Process.Kill()
			<-a.exited
		}
		if a.stopInformer != nil {
			a.stopInformer()
		}
		if a.cg != nil {
			if err := a.cg.remove(); err != nil {
				fmt.Fprintf(os.Stderr, "cleanup %s: %v\n", a.mode, err)
			}
		}
	}
	for _, a := range b.agents {
		if err := removeContainers(ctx, a.rt); err != nil {
			fmt.Fprintf(os.Stderr, "cleanup %s: %v\n", a.mode, err)
		}
		es, _ := os.ReadDir(filepath.Join(a.rootDir(), "pods"))
		for _, e := range es {
			if err := volume.TeardownVolumes(filepath.Join(a.rootDir(), "pods", e.Name())); err != nil {
				fmt.Fprintf(os.Stderr, "cleanup %s: %v\n", a.mode, err)
			}
			_ = netns.Remove(filepath.Join("/run/nodeagent/netns"+config.RunDirSuffix(b.state.ContainerdAddress, a.ns), e.Name())) // the agent's netns directory (config.NetNSDir)
		}
		// The rootDir's shared bind mount (volume.MakeRShared), which would
		// keep the work directory from being removed.
		if err := testenv.UnmountRootDir(a.rootDir()); err != nil {
			fmt.Fprintf(os.Stderr, "cleanup %s: %v\n", a.mode, err)
		}
		_ = a.rt.Close()
		if b.admin != nil {
			_ = b.admin.CoordinationV1().Leases(corev1.NamespaceNodeLease).Delete(ctx, a.node, metav1.DeleteOptions{})
			_ = b.admin.CoreV1().Nodes().Delete(ctx, a.node, metav1.DeleteOptions{})
		}
	}
	if _, ok := b.agents[modeCNI]; ok {
		b.removeCNIBridge()
	}
	if b.admin != nil {
		// Pods the agents could not finish (zero grace: they are gone already).
		sel := metav1.ListOptions{LabelSelector: benchLabel + "=" + b.runID}
		_ = b.admin.CoreV1().Pods(metav1.NamespaceDefault).DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}, sel)
	}
}

// floorResult is what the same container start costs without the agent:
// this program calling the runtime adapter directly.
type floorResult struct {
	Phase string `json:"phase"`
	NetNS stats  `json:"netns"`  // netns.Create
	Image stats  `json:"image"`  // GetImage
	Creat stats  `json:"create"` // CreateContainer
	Start stats  `json:"start"`  // StartContainer
	Total stats  `json:"total"`  // from the phase's start (burst) or the container's start (sequential) to started
}

// runtimeFloor starts n containers the way a pod worker does (network
// namespace, image lookup, create with a log file, start) through the
// runtime adapter in process, one after the other or all at once, in a
// containerd namespace of its own, and removes them.
func (b *bench) runtimeFloor(ctx context.Context, n int, burst bool) (floorResult, error) {
	fr := floorResult{Phase: "sequential"}
	if burst {
		fr.Phase = "burst"
	}
	progress("runtime floor: %s, %d containers", fr.Phase, n)
	rt, err := runtime.New(runtime.Options{Address: b.state.ContainerdAddress, Namespace: "bench-pods-floor", Logger: b.log, CallTimeout: time.Minute})
	if err != nil {
		return fr, err
	}
	defer rt.Close()
	dir := filepath.Join(b.workDir, "floor")
	nsDir := filepath.Join(dir, "netns")
	defer func() {
		cctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		if err := removeContainers(cctx, rt); err != nil {
			fmt.Fprintln(os.Stderr, "runtime floor cleanup:", err)
		}
		// One network namespace per pod UID; the pod cgroups are left to
		// the caller of the runtime (the agent), here to us.
		es, _ := os.ReadDir(nsDir)
		for _, e := range es {
			_ = netns.Remove(filepath.Join(nsDir, e.Name()))
			if err := rt.RemovePodCgroup(types.UID(e.Name())); err != nil {
				fmt.Fprintln(os.Stderr, "runtime floor cleanup:", err)
			}
		}
	}()
	if err := removeContainers(ctx, rt); err != nil {
		return fr, err
	}
	if err := testimage.Import(ctx, rt); err != nil {
		return fr, err
	}
	type times struct{ netns, image, create, start, total time.Duration }
	one := func(i int, t0 time.Time) (times, error) {
		var t times
		uid := fmt.Sprintf("floor-%s-%s-%d", b.runID, fr.Phase, i)
		nsPath := filepath.Join(nsDir, uid)
		a := time.Now()
		if err := netns.Create(nsPath); err != nil {
			return t, err
		}
		b1 := time.Now()
		img, err := rt.GetImage(ctx, testimage.Ref)
		if err != nil {
			return t, err
		}
		_ = img
		b2 := time.Now()
		id, err := rt.CreateContainer(ctx, runtime.ContainerSpec{
			Pod:       runtime.PodRef{UID: types.UID(uid), Name: uid, Namespace: "bench"},
			Name:      "c",
			Image:     testimage.Ref,
			Command:   []string{"sleep", "3600"},
			LogPath:   filepath.Join(dir, "logs", uid+".log"),
			NetNSPath: nsPath,
		})
		if err != nil {
			return t, err
		}
		b3 := time.Now()
		if err := rt.StartContainer(ctx, id); err != nil {
			return t, err
		}
		b4 := time.Now()
		return times{netns: b1.Sub(a), image: b2.Sub(b1), create: b3.Sub(b2), start: b4.Sub(b3), total: b4.Sub(t0)}, nil
	}
	all := make([]times, n)
	errs := make([]error, n)
	if burst {
		var wg sync.WaitGroup
		t0 := time.Now()
		for i := range n {
			wg.Add(1)
			go func() { defer wg.Done(); all[i], errs[i] = one(i, t0) }()
		}
		wg.Wait()
	} else {
		for i := range n {
			if all[i], errs[i] = one(i, time.Now()); errs[i] != nil {
				break
			}
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fr, err
	}
	var ns, im, cr, st, tot []time.Duration
	for _, t := range all {
		ns, im, cr, st, tot = append(ns, t.netns), append(im, t.image), append(cr, t.create), append(st, t.start), append(tot, t.total)
	}
	fr.NetNS, fr.Image, fr.Creat, fr.Start, fr.Total = summarize(ns), summarize(im), summarize(cr), summarize(st), summarize(tot)
	progress("runtime floor: %s: total p50 %.0f ms, p99 %.0f ms", fr.Phase, fr.Total.P50, fr.Total.P99)
	return fr, nil
}

// copyLogs copies the agents' logs to -logs.
func (b *bench) copyLogs() {
	if err := os.MkdirAll(b.o.logDir, 0o755); err != nil {
		fmt.Fprintln(os.Stderr, "logs:", err)
		return
	}
	for m, a := range b.agents {
		data, err := os.ReadFile(a.logPath())
		if err == nil {
			err = os.WriteFile(filepath.Join(b.o.logDir, "agent-"+m+".log"), data, 0o644)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "logs:", err)
		}
	}
}

// removeContainers stops and removes every container in rt's namespace.
func removeContainers(ctx context.Context, rt *runtime.Runtime) error {
	cs, err := rt.ListContainers(ctx)
	if err != nil {
		return err
	}
	var errs []error
	for _, c := range cs {
		if err := rt.RemoveContainer(ctx, c.ID); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// summarize returns nearest-rank percentiles.
func summarize(ds []time.Duration) stats {
	if len(ds) == 0 {
		return stats{}
	}
	sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
	q := func(p float64) float64 {
		i := int(p*float64(len(ds))+0.999999) - 1
		return ms(ds[max(0, min(i, len(ds)-1))])
	}
	var sum time.Duration
	for _, d := range ds {
		sum += d
	}
	return stats{N: len(ds), P50: q(0.5), P90: q(0.9), P99: q(0.99), Max: ms(ds[len(ds)-1]), Mean: ms(sum / time.Duration(len(ds)))}
}

func machine() string {
	var mem string
	if f, err := procFields("/proc/meminfo"); err == nil {
		mem = fmt.Sprintf("%.1f GiB RAM", f["MemTotal"]/(1<<20))
	}
	kernel, _ := os.ReadFile("/proc/sys/kernel/osrelease")
	return fmt.Sprintf("%d CPUs, %s, Linux %s, %s", goruntime.NumCPU(), mem, strings.TrimSpace(string(kernel)), goruntime.Version())
}

func loadavg() string {
	b, _ := os.ReadFile("/proc/loadavg")
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

func report(w io.Writer, r result, o options) {
	fmt.Fprintf(w, "Run of %s. Machine: %s; containerd %s; %s. Load average %s at the start, %s at the end.\n\n",
		r.Started, r.Machine, r.Containerd, r.ClusterNote, r.LoadStart, r.LoadEnd)
	fmt.Fprintln(w, "Pod start latency: just before the Create call → the watch sees phase Running with the container running (ms).")
	fmt.Fprintln(w, "\"started\" is the same start → the agent's \"started container\" log line (its StartContainer call returned);")
	fmt.Fprintln(w, "\"first status\" → the watch first sees a status from the agent (startTime set).")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| PLEG | phase | pods | p50 | p90 | p99 | max | started p50 / p99 | first status p50 / p99 | first create → last Running |")
	fmt.Fprintln(w, "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
	for _, l := range r.Latency {
		fmt.Fprintf(w, "| %s | %s | %d | %.0f | %.0f | %.0f | %.0f | %.0f / %.0f | %.0f / %.0f | %.0f |\n", modeTitle[l.Mode], l.Phase, l.Running.N,
			l.Running.P50, l.Running.P90, l.Running.P99, l.Running.Max, l.Started.P50, l.Started.P99, l.FirstStatus.P50, l.FirstStatus.P99, l.AllRunningMs)
	}
	for _, l := range r.Latency {
		if l.Ready.N > 0 {
			fmt.Fprintf(w, "\n%s, %s: create → Ready (the readiness probe's first success seen) p50 %.0f, p90 %.0f, p99 %.0f, max %.0f ms.\n",
				modeTitle[l.Mode], l.Phase, l.Ready.P50, l.Ready.P90, l.Ready.P99, l.Ready.Max)
		}
	}
	fmt.Fprintf(w, "\nAgent memory (VmRSS; anonymous / file-backed from smaps_rollup; working set of the agent's own memory cgroup as kubelet and cAdvisor compute it, usage − inactive file, with the agent started from a copy of its binary whose page cache was dropped; Go heap and goroutines from /metrics) and CPU over %s idle; memory read %s after the pods are Running or gone:\n\n", r.Idle, r.Settle)
	fmt.Fprintln(w, "| PLEG | pods | when | VmRSS MiB | anonymous MiB | file-backed MiB | cgroup anon MiB | cgroup usage MiB | working set MiB | of which kernel / active file / shmem MiB | Go heap in use MiB | heap objects | goroutines | CPU s | % of one core | containerd CPU s | load average |")
	fmt.Fprintln(w, "| --- | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |")
	for _, m := range o.modes {
		for _, s := range r.Memory[m] {
			cpu, pct, cd := "", "", ""
			if s.IdleSeconds > 0 {
				cpu, pct, cd = fmt.Sprintf("%.2f", s.CPUSeconds), fmt.Sprintf("%.2f", s.CPUPercent), fmt.Sprintf("%.2f", s.ContainerdCPUSeconds)
			}
			fmt.Fprintf(w, "| %s | %d | %s | %.1f | %.1f | %.1f | %.1f | %.1f | %.1f | %.1f / %.1f / %.1f | %.1f | %.0f | %.0f | %s | %s | %s | %s |\n", modeTitle[m], s.Pods, s.When,
				s.RSSMiB, s.AnonMiB, s.FileMiB, s.CgroupAnonMiB, s.CgroupUsageMiB, s.WorkingSetMiB, s.KernelMiB, s.ActiveFileMiB, s.ShmemMiB, s.HeapInuse, s.HeapObjects, s.Goroutines, cpu, pct, cd, s.LoadAvg)
		}
	}
	fmt.Fprintln(w)
	for _, m := range o.modes {
		fmt.Fprintf(w, "Agent binary (%s): %d bytes.\n", modeTitle[m], r.Binaries[m])
	}
	if o.memoryLimit > 0 {
		fmt.Fprintf(w, "Every agent ran under a memory limit of %d bytes from its start.\n", o.memoryLimit)
	}
	reportPressure(w, r.Pressure)
	if len(r.Floor) > 0 {
		fmt.Fprintln(w, "\nRuntime floor: the same container start without the agent (network namespace, image lookup, create with a log file, start), in process (ms, p50 / p99):")
		fmt.Fprintln(w)
		fmt.Fprintln(w, "| phase | containers | netns | image | create | start | total p50 | total p90 | total p99 | total max |")
		fmt.Fprintln(w, "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
		for _, f := range r.Floor {
			fmt.Fprintf(w, "| %s | %d | %.0f / %.0f | %.0f / %.0f | %.0f / %.0f | %.0f / %.0f | %.0f | %.0f | %.0f | %.0f |\n", f.Phase, f.Total.N,
				f.NetNS.P50, f.NetNS.P99, f.Image.P50, f.Image.P99, f.Creat.P50, f.Creat.P99, f.Start.P50, f.Start.P99, f.Total.P50, f.Total.P90, f.Total.P99, f.Total.Max)
		}
	}
	fmt.Fprintln(w)
	for _, m := range o.modes {
		var ws []string
		for msg, n := range r.Warnings[m] {
			ws = append(ws, fmt.Sprintf("%d× %q", n, msg))
		}
		sort.Strings(ws)
		if len(ws) == 0 {
			ws = []string{"none"}
		}
		fmt.Fprintf(w, "Agent warnings (%s): %s.\n", modeTitle[m], strings.Join(ws, ", "))
	}
	fmt.Fprintln(w)
	for _, l := range r.Latency {
		if l.Mode == modeEvent {
			verdict := "met"
			if l.Running.P99 >= 1000 {
				verdict = "MISSED"
			}
			fmt.Fprintf(w, "Target p99 < 1s (event-driven, %s): %s (%.0f ms).\n", l.Phase, verdict, l.Running.P99)
		}
	}
	for _, s := range r.Memory[modeEvent] {
		if s.Pods > 0 {
			verdict := "met"
			if s.RSSMiB >= 60 {
				verdict = "MISSED"
			}
			fmt.Fprintf(w, "Target RSS < 60 MiB with %d pods (event-driven): %s (%.1f MiB).\n", s.Pods, verdict, s.RSSMiB)
		}
	}
	for _, s := range r.Memory[modeEvent] {
		if s.When != "after deleting them" {
			fmt.Fprintln(w, issue16Verdict(s))
		}
	}
}
