// Command fleet runs N simulated nodes against a local control plane and
// measures what their heartbeats and status reports cost it (issue #17).
//
//	go run ./hack/fleet --nodes 200 --duration 3m --mode both
//	go run ./hack/fleet --nodes 200 --duration 3m --restart-apiserver-at 1m --defrag-at 2m
//
// Every simulated node is the agent's own heartbeat.Controller and
// nodestatus.Manager (internal/testing/fleetsim) with its own node credentials
// (system:node:<name>), its own main client and its own heartbeat
// connection, the default timings and jitter, a simulated host and a
// stand-in runtime reporting --images images. Nodes start in a ramp
// (--ramp-rate per second); after --warmup the measured window starts.
//
// --mode both measures the default mode, then switches every node to the
// legacy behaviour (status reported every 10 s, nodeStatusReportFrequency:
// 10s, through the agent's own SetFrequencies) and measures again, in the
// same run. Scenarios (offsets into the first window): --restart-apiserver-at
// restarts kube-apiserver; --defrag-at compacts and defragments etcd.
// --restart-window D moves the restart out of the steady-state window: a
// window of its own (default mode, length D) follows the first one, with the
// restart --restart-apiserver-at into it, so the steady-state figures do not
// include the outage's missed windows.
//
// It uses the cluster in --cluster-dir ($NODEAGENT_CLUSTER_DIR) when one is
// running, else starts one in a temporary directory and stops it at the end.
// The control plane's own writes and CPU, measured for --baseline before
// any node starts, are subtracted from the per-node figures.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"

	"github.com/nodeagent/nodeagent/heartbeat"
	"github.com/nodeagent/nodeagent/internal/testing/fleetsim"
	"github.com/nodeagent/nodeagent/internal/testing/localcluster"
)

type flags struct {
	clusterDir        string
	nodes             int
	duration          time.Duration
	legacyDuration    time.Duration
	mode              string
	rampRate          float64
	warmup            time.Duration
	baseline          time.Duration
	images            int
	restartAPIServer  time.Duration
	restartWindow     time.Duration
	defragAt          time.Duration
	agentLog          string
	keep              bool
	legacyFrequency   time.Duration
	recoveryTimeLimit time.Duration
}

func main() {
	var f flags
	def := os.Getenv("NODEAGENT_CLUSTER_DIR")
	if def == "" {
		def = filepath.Join("_output", "local")
	}
	flag.StringVar(&f.clusterDir, "cluster-dir", def, "directory of a running local cluster (a temporary one is started if none runs there)")
	flag.IntVar(&f.nodes, "nodes", 100, "simulated nodes")
	flag.DurationVar(&f.duration, "duration", 10*time.Minute, "measured window of each mode")
	flag.DurationVar(&f.legacyDuration, "legacy-duration", 0, "measured window of the legacy mode under --mode both (0: --duration)")
	flag.StringVar(&f.mode, "mode", "default", "default (report on change or 5m), legacy (report every 10s) or both (default, then legacy, same nodes)")
	flag.Float64Var(&f.rampRate, "ramp-rate", 20, "nodes started per second")
	flag.DurationVar(&f.warmup, "warmup", 30*time.Second, "wait after the ramp (and after switching modes) before a window")
	flag.DurationVar(&f.baseline, "baseline", 30*time.Second, "measure the control plane without nodes this long first (0: skip, nothing subtracted)")
	flag.IntVar(&f.images, "images", 50, "images each node's stand-in runtime reports")
	flag.DurationVar(&f.restartAPIServer, "restart-apiserver-at", 0, "restart kube-apiserver this far into the first window (0: no)")
	flag.DurationVar(&f.restartWindow, "restart-window", 0, "restart kube-apiserver in a window of its own this long, after the first (0: in the first window)")
	flag.DurationVar(&f.defragAt, "defrag-at", 0, "compact and defragment etcd this far into the first window (0: no)")
	flag.StringVar(&f.agentLog, "agent-log", "", "write the simulated agents' warnings and errors to this file")
	flag.BoolVar(&f.keep, "keep", false, "keep the Nodes and Leases at the end (a running cluster's are deleted otherwise)")
	flag.Parse()
	f.legacyFrequency = 10 * time.Second
	if f.legacyDuration == 0 {
		f.legacyDuration = f.duration
	}
	f.recoveryTimeLimit = 2 * heartbeat.DefaultLeaseDuration
	if err := f.validate(); err != nil {
		fmt.Fprintln(os.Stderr, "fleet:", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, f); err != nil {
		fmt.Fprintln(os.Stderr, "fleet:", err)
		os.Exit(1)
	}
}

func (f flags) validate() error {
	switch {
	case f.nodes < 1:
		return fmt.Errorf("--nodes: must be at least 1, got %d", f.nodes)
	case f.mode != "default" && f.mode != "legacy" && f.mode != "both":
		return fmt.Errorf("--mode: %q is not default, legacy or both", f.mode)
	case f.rampRate <= 0:
		return fmt.Errorf("--ramp-rate: must be positive, got %v", f.rampRate)
	case f.duration <= 0:
		return fmt.Errorf("--duration: must be positive, got %v", f.duration)
	case f.legacyDuration < 0:
		return fmt.Errorf("--legacy-duration: must not be negative, got %v", f.legacyDuration)
	case f.restartWindow < 0:
		return fmt.Errorf("--restart-window: must not be negative, got %v", f.restartWindow)
	case f.restartWindow > 0 && f.restartAPIServer <= 0:
		return fmt.Errorf("--restart-window %v: needs --restart-apiserver-at", f.restartWindow)
	case f.restartWindow > 0 && f.restartAPIServer >= f.restartWindow:
		return fmt.Errorf("--restart-apiserver-at %v: must fall inside --restart-window %v", f.restartAPIServer, f.restartWindow)
	case f.restartWindow == 0 && f.restartAPIServer >= f.duration:
		return fmt.Errorf("--restart-apiserver-at %v: must fall inside --duration %v", f.restartAPIServer, f.duration)
	case f.defragAt >= f.duration:
		return fmt.Errorf("--defrag-at %v: must fall inside --duration %v", f.defragAt, f.duration)
	}
	return nil
}

type sim struct {
	f      flags
	state  *localcluster.State
	admin  kubernetes.Interface
	names  []string
	agents []*fleetsim.Agent
	rec    *fleetsim.Recorder
	reg    *prometheus.Registry
	procs  *procTracker
	watch  *fleetsim.NodeWatcher
	sched  fleetsim.Schedule
	// mu serializes a restart (which changes state.Pids) with the sampler.
	mu sync.Mutex
}

func run(ctx context.Context, f flags) error {
	s := &sim{f: f, reg: prometheus.NewRegistry()}
	raiseFileLimit()
	stopCluster, err := s.cluster(ctx)
	if err != nil {
		return err
	}
	defer stopCluster()
	prefix := fmt.Sprintf("fleet-%d-", time.Now().Unix()%100000)
	for i := 0; i < f.nodes; i++ {
		s.names = append(s.names, fmt.Sprintf("%s%05d", prefix, i))
	}
	s.sched = fleetsim.Schedule{
		Interval: heartbeat.RenewInterval(heartbeat.DefaultLeaseDuration), Jitter: heartbeat.DefaultJitterFactor,
		Slack: time.Second, LeaseDuration: heartbeat.DefaultLeaseDuration,
	}
	s.rec = fleetsim.NewRecorder(f.nodes, s.sched)
	s.procs = newProcTracker()
	go s.sampleLoop(ctx)

	if s.watch, err = fleetsim.WatchNodes(ctx, s.admin, prefix); err != nil {
		return err
	}
	hostDir, err := os.MkdirTemp("", "na-fleet-host-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(hostDir)
	host, err := fleetsim.NewHost(hostDir)
	if err != nil {
		return err
	}
	agentLog := slog.New(slog.DiscardHandler)
	if f.agentLog != "" {
		lf, err := os.Create(f.agentLog)
		if err != nil {
			return err
		}
		defer lf.Close()
		agentLog = slog.New(slog.NewTextHandler(lf, &slog.HandlerOptions{Level: slog.LevelWarn}))
	}
	klog.SetSlogLogger(agentLog.With("logger", "client-go")) // client-go's own complaints go with the agents' logs
	fleet := &fleetsim.Fleet{
		State: s.state, Host: host, RootDir: hostDir, Images: fleetsim.Images(f.images),
		Log: agentLog, HBMetrics: heartbeat.NewMetrics(s.reg),
	}

	logf("minting node credentials for %d nodes", f.nodes)
	t0 := time.Now()
	cfgs := make([]*rest.Config, f.nodes)
	for i, name := range s.names {
		if cfgs[i], err = fleet.RestConfig(name); err != nil {
			return err
		}
	}
	logf("credentials minted in %v", time.Since(t0).Round(time.Millisecond))
	if !f.keep {
		defer s.cleanup()
	}

	var base *sample
	if f.baseline > 0 {
		logf("baseline: %v without nodes", f.baseline)
		b0, err := s.sample(ctx)
		if err != nil {
			return err
		}
		if err := sleep(ctx, f.baseline); err != nil {
			return err
		}
		b1, err := s.sample(ctx)
		if err != nil {
			return err
		}
		base = &sample{}
		*base = b1.sub(b0)
	}

	mem0 := selfMemory()
	report := 0 * time.Second // nodestatus default
	if f.mode == "legacy" {
		report = f.legacyFrequency
	}
	logf("starting %d nodes at %.0f/s (mode %s)", f.nodes, f.rampRate, f.mode)
	rampStart := time.Now()
	agentCtx, stopAgents := context.WithCancel(context.Background())
	defer stopAgents()
	gap := time.Duration(float64(time.Second) / f.rampRate)
	for i, name := range s.names {
		a, err := fleet.Start(agentCtx, fleetsim.Node{Index: i, Name: name, ReportFrequency: report}, cfgs[i], s.rec)
		if err != nil {
			return err
		}
		s.agents = append(s.agents, a)
		if err := sleep(ctx, gap); err != nil {
			return err
		}
	}
	ramp := time.Since(rampStart)
	logf("ramp done in %v; warm-up %v", ramp.Round(time.Second), f.warmup)
	if err := sleep(ctx, f.warmup); err != nil {
		return err
	}
	healthy, seen := s.watch.Healthy()
	logf("%d of %d nodes healthy in the control plane's eyes", healthy, seen)

	modes := []string{f.mode}
	if f.mode == "both" {
		modes = []string{"default", "legacy"}
	}
	if f.restartWindow > 0 {
		// The restart's own window, right after the first, in its mode.
		modes = append([]string{modes[0], modes[0] + "+restart"}, modes[1:]...)
	}
	var windows []*window
	var mem memUse
	var failed string
	for i, m := range modes {
		if i > 0 && m == "legacy" {
			logf("switching every node to the legacy report frequency (%v); warm-up %v", f.legacyFrequency, f.warmup)
			for _, a := range s.agents {
				a.Status.SetFrequencies(0, f.legacyFrequency)
			}
			if err := sleep(ctx, f.warmup); err != nil {
				return err
			}
		}
		w, err := s.runWindow(ctx, m, i == 0, strings.HasSuffix(m, "+restart"))
		if err != nil {
			if len(windows) == 0 || ctx.Err() != nil {
				return err
			}
			// A 30-minute window is not thrown away because a later one
			// failed (an API server that did not come back): report it.
			logf("window %s failed, reporting the %d window(s) before it: %v", m, len(windows), err)
			failed = fmt.Sprintf("window %s failed: %v", m, err)
			break
		}
		windows = append(windows, w)
		if i == 0 {
			mem = selfMemory().sub(mem0)
		}
	}
	end := time.Now()
	open := s.rec.Close(end)
	sizes, err := fleetsim.ObjectSizes(ctx, s.admin, s.names[0])
	if err != nil && failed == "" {
		return err
	}
	etcdEnd, err := fleetsim.Status(ctx, s.state.EtcdURL)
	if err != nil && failed == "" {
		return err
	}
	logf("stopping the nodes")
	for _, a := range s.agents {
		a.Stop()
	}
	fmt.Print(s.report(reportInput{
		windows: windows, base: base, sizes: sizes, etcdEnd: etcdEnd, open: open,
		mem: mem, ramp: ramp, transitions: s.watch.Transitions(),
	}))
	if failed != "" {
		return errors.New(failed)
	}
	return nil
}

// window is one measured window and what happened in it.
type window struct {
	mode      string
	start     time.Time
	s0, s1    sample
	d         sample // s1 − s0
	latencies []time.Duration
	restart   *restartResult
	defrag    *defragResult
}

// runWindow measures one window. The first window has the defragmentation
// and the restart, unless the restart has a window of its own (restartOnly).
func (s *sim) runWindow(ctx context.Context, mode string, first, restartOnly bool) (*window, error) {
	d := s.f.duration
	if mode == "legacy" && s.f.mode == "both" {
		d = s.f.legacyDuration
	}
	if restartOnly {
		d = s.f.restartWindow
	}
	logf("window %s: %v", mode, d)
	w := &window{mode: mode, start: time.Now()}
	var err error
	if w.s0, err = s.sample(ctx); err != nil {
		return nil, err
	}
	var wg sync.WaitGroup
	var restartErr, defragErr error
	if (first && s.f.restartWindow == 0 || restartOnly) && s.f.restartAPIServer > 0 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if sleep(ctx, s.f.restartAPIServer) != nil {
				return
			}
			w.restart, restartErr = s.restartAPIServer(ctx)
		}()
	}
	if first && !restartOnly && s.f.defragAt > 0 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if sleep(ctx, s.f.defragAt) != nil {
				return
			}
			w.defrag, defragErr = s.defrag(ctx)
		}()
	}
	if err := sleep(ctx, d); err != nil {
		return nil, err
	}
	wg.Wait()
	if err := errors.Join(restartErr, defragErr); err != nil {
		return nil, err
	}
	if w.s1, err = s.sample(ctx); err != nil {
		return nil, err
	}
	w.d = w.s1.sub(w.s0)
	w.latencies = s.rec.Latencies(w.s0.rec, w.s1.rec)
	return w, nil
}

type restartResult struct {
	downtime     time.Duration // old process gone → new one ready
	stopping     time.Duration // SIGTERM → old process gone
	fromStopped  fleetsim.Recovery
	fromReady    fleetsim.Recovery
	recoveredAll bool
}

func (s *sim) restartAPIServer(ctx context.Context) (*restartResult, error) {
	logf("restarting kube-apiserver")
	s.mu.Lock()
	s.procs.sampleNow(s.pids()) // the old process's last CPU figures
	t0 := time.Now()
	var from time.Time
	stopped, err := s.state.Restart(ctx, "kube-apiserver", func() { from = s.rec.MarkRecovery() })
	s.mu.Unlock()
	if err != nil && (stopped.IsZero() || ctx.Err() != nil) {
		return nil, err
	}
	if err != nil {
		// Started, but not ready within localcluster's 90 s: that is the
		// scenario's result, not the end of the run. Wait for it a while
		// longer so the report can say when (or that) it came back.
		logf("restarted kube-apiserver: %v; waiting for /readyz up to %v more", err, notReadyLimit)
		if err := waitReady(ctx, s.state.APIServerReady, notReadyLimit); err != nil {
			return nil, fmt.Errorf("kube-apiserver not ready %v after its restart: %w", time.Since(stopped).Round(time.Second), err)
		}
	}
	ready := time.Now()
	r := &restartResult{downtime: ready.Sub(stopped), stopping: stopped.Sub(t0)}
	logf("kube-apiserver back after %v down; waiting for every Lease to be renewed", r.downtime.Round(time.Millisecond))
	deadline := ready.Add(s.f.recoveryTimeLimit)
	for time.Now().Before(deadline) {
		rec := fleetsim.Recover(from, s.rec.FirstRenewals())
		if rec.Recovered == rec.Nodes {
			r.recoveredAll = true
			break
		}
		if err := sleep(ctx, 500*time.Millisecond); err != nil {
			return nil, err
		}
	}
	first := s.rec.FirstRenewals()
	r.fromStopped, r.fromReady = fleetsim.Recover(from, first), fleetsim.Recover(ready, first)
	logf("restart: %d of %d Leases renewed; first %v, last %v after the old process's exit (%d before /readyz answered)", r.fromStopped.Recovered, r.fromStopped.Nodes,
		r.fromStopped.Min.Round(time.Millisecond), r.fromStopped.Max.Round(time.Millisecond), r.fromReady.Early)
	return r, nil
}

// notReadyLimit is how much longer than localcluster's 90 s the fleet waits
// for a restarted kube-apiserver before giving up on the run.
const notReadyLimit = 5 * time.Minute

// waitReady polls ready every second until it succeeds or limit passes.
func waitReady(ctx context.Context, ready func(context.Context) error, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for {
		rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		err := ready(rctx)
		cancel()
		if err == nil || ctx.Err() != nil || time.Now().After(deadline) {
			return err
		}
		if err := sleep(ctx, time.Second); err != nil {
			return err
		}
	}
}

type defragResult struct {
	before, after fleetsim.EtcdStatus
	took          time.Duration
}

func (s *sim) defrag(ctx context.Context) (*defragResult, error) {
	logf("compacting and defragmenting etcd")
	t0 := time.Now()
	before, after, err := fleetsim.CompactAndDefrag(ctx, s.state.EtcdURL)
	if err != nil {
		return nil, err
	}
	r := &defragResult{before: before, after: after, took: time.Since(t0)}
	logf("etcd compacted and defragmented in %v: %d → %d B", r.took.Round(time.Millisecond), before.DBSize, after.DBSize)
	return r, nil
}

// sample is everything measured at one moment.
type sample struct {
	at      time.Time
	elapsed time.Duration // for differences
	etcd    map[string]float64
	cpu     map[string]float64 // component → CPU seconds (all its processes)
	rss     map[string]int64   // component → RSS of the current process
	rec     fleetsim.Counts
	hb      hbCounts
	etcdDB  fleetsim.EtcdStatus // absolute, not differenced
	load    string              // /proc/loadavg at the sample
	busy    machineCPU          // whole machine, for its busy share
}

func (a sample) sub(b sample) sample {
	d := sample{at: a.at, elapsed: a.at.Sub(b.at), etcd: fleetsim.Delta(b.etcd, a.etcd), cpu: map[string]float64{}, rss: a.rss,
		rec: a.rec.Sub(b.rec), hb: hbCounts{renewed: a.hb.renewed - b.hb.renewed, failed: a.hb.failed - b.hb.failed},
		etcdDB: a.etcdDB, load: a.load, busy: a.busy.sub(b.busy)}
	for k, v := range a.cpu {
		d.cpu[k] = v - b.cpu[k]
	}
	return d
}

func (s *sim) sample(ctx context.Context) (sample, error) {
	out := sample{at: time.Now()}
	var err error
	if out.etcd, err = fleetsim.ScrapeEtcd(ctx, s.state.EtcdURL); err != nil {
		return out, err
	}
	if out.etcdDB, err = fleetsim.Status(ctx, s.state.EtcdURL); err != nil {
		return out, err
	}
	s.mu.Lock()
	s.procs.sampleNow(s.pids())
	s.mu.Unlock()
	out.cpu, out.rss = s.procs.totals()
	out.load, out.busy = loadavg(), readMachineCPU()
	out.rec = s.rec.Snapshot()
	out.hb = readHB(s.reg)
	return out, nil
}

func (s *sim) sampleLoop(ctx context.Context) {
	for sleep(ctx, 2*time.Second) == nil {
		s.mu.Lock()
		s.procs.sampleNow(s.pids())
		s.mu.Unlock()
	}
}

// pids are the processes whose CPU and RSS are followed: the control
// plane's and the simulator's own. Call with s.mu held.
func (s *sim) pids() map[string]int {
	m := map[string]int{"simulator": os.Getpid()}
	for k, v := range s.state.Pids {
		m[k] = v
	}
	return m
}

// fleetNodeCIDRMaskSize gives each simulated node a /29 of the local
// cluster's /16: pod CIDRs for 8,192 nodes (the e2e tests' /24s stop at 256).
const fleetNodeCIDRMaskSize = 29

// cluster loads the running cluster or starts one in a temporary directory.
func (s *sim) cluster(ctx context.Context) (func(), error) {
	noop := func() {}
	if st, err := localcluster.Load(s.f.clusterDir); err == nil {
		hctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		err = st.Healthy(hctx)
		cancel()
		if err == nil {
			if st.MaxNodes() < s.f.nodes {
				return noop, fmt.Errorf("the cluster in %s gives pod CIDRs to %d nodes, %d wanted: start it with `localcluster up --node-cidr-mask-size %d`",
					s.f.clusterDir, st.MaxNodes(), s.f.nodes, fleetNodeCIDRMaskSize)
			}
			s.state = st
			logf("using the running cluster in %s", s.f.clusterDir)
			return noop, s.adminClient()
		}
	}
	dir, err := os.MkdirTemp("", "na-fleet-")
	if err != nil {
		return noop, err
	}
	bin, err := filepath.Abs(filepath.Join("_output", "bin"))
	if err != nil {
		return noop, err
	}
	logf("starting a local cluster in %s", dir)
	st, err := localcluster.Up(ctx, localcluster.Options{Dir: dir, BinDir: bin, NoContainerd: true, Log: os.Stderr, NodeCIDRMaskSize: fleetNodeCIDRMaskSize})
	if err != nil {
		_ = localcluster.Down(dir)
		_ = os.RemoveAll(dir)
		return noop, fmt.Errorf("starting the local cluster (make controlplane first): %w", err)
	}
	s.state = st
	s.f.keep = true // the whole cluster goes
	return func() { _ = localcluster.Down(dir); _ = os.RemoveAll(dir) }, s.adminClient()
}

func (s *sim) adminClient() error {
	cfg, err := clientcmd.BuildConfigFromFlags("", s.state.AdminKubeconfig)
	if err != nil {
		return err
	}
	cfg.QPS, cfg.Burst = 200, 400
	s.admin, err = kubernetes.NewForConfig(cfg)
	return err
}

func (s *sim) cleanup() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	logf("deleting %d Nodes and Leases", len(s.names))
	for _, n := range s.names {
		_ = s.admin.CoreV1().Nodes().Delete(ctx, n, metav1.DeleteOptions{})
		_ = s.admin.CoordinationV1().Leases(heartbeat.Namespace).Delete(ctx, n, metav1.DeleteOptions{})
	}
}

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "fleet: %s %s\n", time.Now().UTC().Format("15:04:05"), fmt.Sprintf(format, args...))
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

func raiseFileLimit() {
	var l syscall.Rlimit
	if syscall.Getrlimit(syscall.RLIMIT_NOFILE, &l) == nil && l.Cur < l.Max {
		l.Cur = l.Max
		_ = syscall.Setrlimit(syscall.RLIMIT_NOFILE, &l)
	}
}

// memUse is the simulator's own memory.
type memUse struct{ rss, heap int64 }

func (a memUse) sub(b memUse) memUse { return memUse{a.rss - b.rss, a.heap - b.heap} }

func selfMemory() memUse {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	u, _ := fleetsim.ReadProc(os.Getpid())
	return memUse{rss: u.RSSBytes, heap: int64(ms.HeapInuse)}
}
