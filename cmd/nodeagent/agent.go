package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/coreos/go-systemd/v22/journal"
	"github.com/opencontainers/cgroups"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/nodeagent/nodeagent/certificate"
	"github.com/nodeagent/nodeagent/cm"
	"github.com/nodeagent/nodeagent/cm/cpumanager"
	"github.com/nodeagent/nodeagent/cm/devicemanager"
	"github.com/nodeagent/nodeagent/cm/topologymanager"
	"github.com/nodeagent/nodeagent/config"
	"github.com/nodeagent/nodeagent/heartbeat"
	"github.com/nodeagent/nodeagent/imagegc"
	"github.com/nodeagent/nodeagent/internal/kubeclient"
	"github.com/nodeagent/nodeagent/network"
	"github.com/nodeagent/nodeagent/nodestatus"
	"github.com/nodeagent/nodeagent/pleg"
	"github.com/nodeagent/nodeagent/pods"
	"github.com/nodeagent/nodeagent/pods/keyring/credprovider"
	"github.com/nodeagent/nodeagent/pods/volume"
	"github.com/nodeagent/nodeagent/runtime"
	"github.com/nodeagent/nodeagent/systemd"
)

// shutdownGrace bounds how long the agent waits for its loops on SIGTERM.
const shutdownGrace = 5 * time.Second

// runAgent runs the node agent until SIGTERM or SIGINT. Configuration and
// credential errors exit 1 before any API call; everything that can recover
// (API server, containerd) is retried with backoff while the agent runs.
func runAgent(args []string, stderr io.Writer) int {
	f := newConfigFlags("", stderr, true)
	f.fs.Init("nodeagent", flag.ContinueOnError)
	f.fs.Usage = func() { fmt.Fprint(stderr, usage, "\nFlags:\n"); f.fs.PrintDefaults() }
	if err := f.fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if f.fs.NArg() > 0 {
		fmt.Fprintf(stderr, "nodeagent: unexpected arguments %q (see nodeagent --help)\n", f.fs.Args())
		return 2
	}
	opts, err := f.options()
	if err != nil {
		fmt.Fprintf(stderr, "nodeagent: %v\n", err)
		return 2
	}
	return startAgent(opts, stderr, nil)
}

// startAgent loads the configuration, logs its warnings and flagWarnings,
// and runs the agent until SIGTERM or SIGINT.
func startAgent(opts config.LoadOptions, stderr io.Writer, flagWarnings []string) int {
	cfg, warnings, err := config.Load(opts)
	if err != nil {
		printLoadError(stderr, err)
		return 1
	}
	level := new(slog.LevelVar)
	out := &logOutput{w: stderr}
	log := newLogger(out, cfg.Logging, level)
	for _, w := range append(flagWarnings, warnings...) {
		log.Warn("configuration warning", "warning", w)
	}
	a, err := newAgent(cfg, opts, log, level)
	if err != nil {
		log.Error("cannot start", "err", err)
		return 1
	}
	a.flushLogs = out.flush
	a.configWarnings = warnings
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if err := a.run(ctx); err != nil {
		log.Error("agent failed", "err", err)
		return 1
	}
	return 0
}

// newLogger logs to w (journald takes stderr) in the configured format, at a
// level that follows the verbosity: 0 is Info, 1..3 more detail, 4+ Debug.
func newLogger(w io.Writer, lc config.LoggingConfiguration, level *slog.LevelVar) *slog.Logger {
	level.Set(verbosityLevel(lc.Verbosity))
	hopts := &slog.HandlerOptions{Level: level}
	newHandler := func(w io.Writer) slog.Handler {
		if lc.Format == "json" {
			return slog.NewJSONHandler(w, hopts)
		}
		return slog.NewTextHandler(w, hopts)
	}
	h := newHandler(w)
	// A malformed JOURNAL_STREAM means "not the journal"; it is logged below.
	toJournal, journalErr := journal.StderrIsJournalStream()
	if toJournal {
		// journald stores each line with its level (journalctl -p warning).
		h = systemd.NewJournalHandler(w, newHandler)
	}
	log := slog.New(h)
	if journalErr != nil {
		log.Warn("cannot tell whether stderr is the journal; logging without priority prefixes", "err", journalErr)
	}
	klog.SetSlogLogger(log.With("logger", "client-go"))
	return log
}

func verbosityLevel(v int32) slog.Level { return slog.LevelInfo - slog.Level(v) }

// logOutput is the log's writer, one write at a time, so that flush can
// tell whether writes go through: it returns once no write is stuck (the
// node API's /healthz/log, kubelet's klog.Flush check).
type logOutput struct {
	mu sync.Mutex
	w  io.Writer
}

func (o *logOutput) Write(p []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.w.Write(p)
}

func (o *logOutput) flush() {
	o.mu.Lock()
	o.mu.Unlock() //nolint:staticcheck // waiting for the write in progress is the point
}

// agent holds the running components. Fields set in newAgent are read-only
// afterwards; rt and pl appear once containerd has been reached.
type agent struct {
	cfg      *config.NodeAgentConfiguration
	loadOpts config.LoadOptions
	// configWarnings are the configuration's warnings logged at start; the
	// watcher logs them again only when they change.
	configWarnings []string
	log            *slog.Logger // with the node name
	base           *slog.Logger // without it, for components that add it
	level          *slog.LevelVar
	// flushLogs returns once the log output takes writes (nil: not
	// known; the node API's log check then always passes).
	flushLogs func()
	clock     clock.WithTicker
	nodeName  string
	reg       *prometheus.Registry
	// probeReg holds kubelet's prober metrics, served on the node API's
	// /metrics/probes as kubelet serves them (not on /metrics).
	probeReg *prometheus.Registry

	// client is the main API client; events writes Events on a rate
	// limiter of its own (client.go).
	client, events *kubeclient.Clientset
	// certs is the client certificate manager; nil when the kubeconfig's
	// credentials are used as they are (certs.go).
	certs *certificate.Manager
	hb    *heartbeat.Controller
	ns    *nodestatus.Manager
	// net is the CNI runtime; nil when cniConfDir is "" (pod networking
	// disabled).
	net *network.Network

	rt        atomic.Pointer[runtime.Runtime]
	handlers  runtimeHandlers // status.runtimeHandlers (handlers.go)
	rtErr     atomic.Pointer[error]
	firstDial event // fired when the first dial of containerd has an outcome
	pl        atomic.Pointer[pleg.PLEG]
	// pm is the pod workers once they run (their sync loop is /healthz's
	// syncloop check).
	pm         atomic.Pointer[pods.Manager]
	registered atomic.Bool
	started    time.Time
	// containerLogger is the agent's own executable, which the shim runs
	// as each container's log writer.
	containerLogger string
	// apiPods is the node API's view of the pods (see nodeapi.go).
	apiPods apiPods
	// imageGC is the image collector once the runtime is connected.
	imageGC atomic.Pointer[imagegc.Collector]
	// shutdown is graceful node shutdown; nil when off (see shutdown.go).
	shutdown *nodeShutdown
	// credProviders are kubelet's credential provider plugins; nil when
	// imageCredentialProviderConfig is "".
	credProviders *credprovider.Plugins
	// devices is the device manager (device plugins); it serves from
	// runOnRuntime on (devices.go).
	devices *devicemanager.Manager
	// cpus is the CPU manager (cpumanager.go), restored at start; its
	// reconcile loop runs from runOnRuntime on.
	cpus *cpumanager.Manager
	// topology is the topology manager (cpumanager.go) the devices and
	// CPUs are allocated through.
	topology *topologymanager.Manager
	// csi is the CSI node side (csi.go); nil without an API client.
	csi *csiNode
	// singleProcessOOMKill is the configuration's as kubelet applies it
	// on this host (config.EffectiveSingleProcessOOMKill).
	singleProcessOOMKill bool
}

func newAgent(cfg *config.NodeAgentConfiguration, loadOpts config.LoadOptions, log *slog.Logger, level *slog.LevelVar) (*agent, error) {
	nodeName, err := nodeNameFor(cfg.HostnameOverride)
	if err != nil {
		return nil, err
	}
	// As kubelet, before anything runs: no start on a host with swap on
	// unless failSwapOn is false.
	if err := checkSwap(cfg.FailSwapOn, cm.HostSwapOn); err != nil {
		return nil, err
	}
	// As kubelet's container manager at start: kernel tunables checked
	// (protectKernelDefaults) or set.
	if err := cm.SetupKernelTunables(cm.Sysctls{Root: cm.ProcSys}, cfg.ProtectKernelDefaults, log.With("node", nodeName)); err != nil {
		return nil, fmt.Errorf("Failed to start ContainerManager: %w", err)
	}
	// As kubelet: failCgroupV1 refuses a cgroup v1 host.
	if err := cfg.CheckCgroupV1(cgroups.IsCgroup2UnifiedMode()); err != nil {
		return nil, err
	}
	// As kubelet: singleProcessOOMKill false is refused on cgroup v1.
	singleProcessOOMKill, err := cfg.EffectiveSingleProcessOOMKill(cgroups.IsCgroup2UnifiedMode())
	if err != nil {
		return nil, err
	}
	base := log // the components add the node key themselves
	log = log.With("node", nodeName)
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	// As kubelet: the main client's connections (informer watches, status
	// writes) are tracked so that repeated heartbeat failures close them
	// all, not only the idle ones (heartbeat.NewClientConfigs); with a
	// managed client certificate, a rotation closes them too (certs.go).
	leaseDuration := time.Duration(cfg.NodeLeaseDurationSeconds) * time.Second
	clients, err := newAPIClients(cfg, nodeName, heartbeat.RenewInterval(leaseDuration), log, clock.RealClock{}, reg)
	if err != nil {
		return nil, err
	}
	// As kubelet: the main client at kubeAPIQPS/kubeAPIBurst, Events on
	// their own limiter, node status and Lease unthrottled.
	kc, err := newKubeClients(cfg, clients, "nodeagent/"+version)
	if err != nil {
		return nil, err
	}
	client := kc.main
	if clients.setMain != nil {
		clients.setMain(client)
	}
	a := &agent{
		cfg: cfg, loadOpts: loadOpts, log: log, level: level, clock: clock.RealClock{},
		base: base, nodeName: nodeName, reg: reg, client: client, events: kc.events, started: time.Now(), certs: clients.certs,
		singleProcessOOMKill: singleProcessOOMKill,
	}
	a.apiPods.a = a
	a.probeReg = probeRegistry(a.started)
	a.csi = a.newCSINode(client, kc.events)
	if a.containerLogger, err = containerLogger(); err != nil {
		return nil, err
	}
	a.hb, err = heartbeat.New(heartbeat.Options{
		NodeName:          nodeName,
		Leases:            kc.heartbeat.Leases(heartbeat.Namespace),
		Nodes:             kc.heartbeat.Nodes(),
		LeaseDuration:     leaseDuration,
		Logger:            base.With("component", "heartbeat"),
		Metrics:           heartbeat.NewMetrics(reg),
		OnRepeatedFailure: clients.onHeartbeatFailure,
	})
	if err != nil {
		return nil, err
	}
	a.handlers.rt, a.handlers.handlers = a.rt.Load, cfg.RuntimeHandlers
	// As kubelet: reservedSystemCPUs replaces the reserved cpu.
	sysReserved, kubeReserved := cfg.Reservations()
	nsOpts := nodestatus.Options{
		NodeName:                         nodeName,
		Nodes:                            kc.status.Nodes(),
		Logger:                           base.With("component", "nodestatus"),
		UpdateFrequency:                  cfg.NodeStatusUpdateFrequency.Duration,
		ReportFrequency:                  cfg.NodeStatusReportFrequency.Duration,
		MaxImages:                        cfg.NodeStatusMaxImages,
		MaxPods:                          podCapacity(cfg),
		SystemReserved:                   sysReserved,
		KubeReserved:                     kubeReserved,
		EvictionHard:                     cfg.EvictionHard,
		EvictionPressureTransitionPeriod: cfg.EvictionPressureTransitionPeriod.Duration,
		EvictionSoft:                     cfg.EvictionSoft,
		EvictionMinimumReclaim:           cfg.EvictionMinimumReclaim,
		NodeIP:                           cfg.NodeIP,
		RootDir:                          cfg.RootDir,
		Labels:                           cfg.NodeLabels,
		Taints:                           cfg.RegisterWithTaints,
		ProviderID:                       cfg.ProviderID,
		NoRegister:                       !cfg.RegisterNode,
		AgentVersion:                     version,
		KubeletPort:                      cfg.Port,
		PLEGHealthy:                      a.plegHealthy,
		VolumesInUse:                     a.csi.volumesInUse(),
		RuntimeHandlers:                  a.handlers.get,
		VolumesInUseSynced:               a.csi.volumesSynced(),
		VolumesReportedInUse:             a.csi.markReported(),
		CSINodeReady:                     a.csi.initialized(),
	}
	if cfg.CNIConfDir != "" {
		a.net, err = network.New(network.Config{
			ConfDir:    cfg.CNIConfDir,
			BinDirs:    cfg.CNIBinDirs(),
			CacheDir:   filepath.Join(cfg.RootDir, "cni"),
			Logger:     base.With("component", "network", "node", nodeName),
			PodCIDRs:   a.podCIDRs,
			Registerer: reg,
		})
		if err != nil {
			return nil, err
		}
		nsOpts.NetworkReady = a.net.Status
	}
	if cfg.ContainerRuntimeEndpoint != "" {
		nsOpts.RuntimeVersion = a.runtimeVersion
		nsOpts.ListImages = a.listImages
		nsOpts.RuntimeHealthy = func() error {
			ctx, cancel := context.WithTimeout(context.Background(), firstDialWait)
			defer cancel()
			return a.runtimeHealthy(ctx)
		}
	}
	if cfg.ImageCredentialProviderConfig != "" {
		// As kubelet: a configuration that cannot be used stops the start.
		a.credProviders, err = credprovider.Load(cfg.ImageCredentialProviderConfig, credprovider.Options{
			BinDir: cfg.ImageCredentialProviderBinDir,
			Logger: base.With("component", "credentialprovider", "node", nodeName),
		})
		if err != nil {
			return nil, fmt.Errorf("image credential providers: %w", err)
		}
	}
	if a.shutdown, err = a.newShutdown(); err != nil {
		return nil, err
	}
	nsOpts.ShuttingDown = a.shutdown.ShuttingDown
	if a.topology, err = a.newTopologyManager(); err != nil {
		return nil, err
	}
	a.devices = a.newDevices()
	a.topology.AddHintProvider(a.devices)
	nsOpts.DevicePlugins = a.devices.Capacity
	if a.ns, err = nodestatus.New(nsOpts); err != nil {
		return nil, err
	}
	a.csi.syncStatusOnChange(a.ns)
	if err := os.MkdirAll(cfg.RootDir, 0o750); err != nil {
		return nil, fmt.Errorf("state directory: %w", err)
	}
	if a.cpus, err = a.newCPUManager(); err != nil {
		return nil, err
	}
	a.topology.AddHintProvider(a.cpus)
	// As kubelet: podLogsDir 0750, the symlink directory 0755.
	if err := os.MkdirAll(cfg.PodLogsDir, 0o750); err != nil {
		return nil, fmt.Errorf("pod logs directory (podLogsDir): %w", err)
	}
	if err := os.MkdirAll(cfg.ContainerLogsDir, 0o755); err != nil {
		return nil, fmt.Errorf("container logs directory (containerLogsDir): %w", err)
	}
	adoptLegacyRunDirs(cfg, log)
	// As kubelet: the root directory is a shared mount, for the mounts of
	// Bidirectional volumes (CSI plugins) to reach the host and other pods.
	if err := volume.MakeRShared(cfg.RootDir); err != nil {
		return nil, fmt.Errorf("error configuring root directory: %w", err)
	}
	return a, nil
}

// podCIDRs are the node's spec.podCIDRs as last seen (for CNI plugins with
// the ipRanges capability).
func (a *agent) podCIDRs() []string {
	if n := a.ns.Node(); n != nil {
		return n.Spec.PodCIDRs
	}
	return nil
}

// loggerBinary is the small log writer installed beside the agent.
const loggerBinary = "nodeagent-container-logger"

// containerLogger is the executable the shim runs as each container's log
// writer: nodeagent-container-logger beside the agent's executable when it
// is there (~1 MiB of private memory per container), else the agent's own
// executable (~7 MiB: every package of the agent initialises).
func containerLogger() (string, error) {
	exe, err := os.Executable()
	if err != nil {
		return "", fmt.Errorf("container log writer: the agent's own executable: %w", err)
	}
	small := filepath.Join(filepath.Dir(exe), loggerBinary)
	if st, err := os.Stat(small); err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0 {
		return small, nil
	}
	return exe, nil
}

// nodeNameFor is the override or the hostname, lowercased, as kubelet.
func nodeNameFor(override string) (string, error) {
	name := override
	if name == "" {
		h, err := os.Hostname()
		if err != nil {
			return "", fmt.Errorf("node name: %w (set --hostname-override)", err)
		}
		name = h
	}
	name = strings.ToLower(strings.TrimSpace(name))
	if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 {
		return "", fmt.Errorf("node name %q is not valid: %s", name, strings.Join(errs, "; "))
	}
	return name, nil
}

func loadKubeconfig(path string) (*rest.Config, error) {
	if path == "" {
		return nil, errors.New("no kubeconfig: set --kubeconfig or the kubeconfig field")
	}
	if _, err := os.Stat(path); err != nil {
		return nil, fmt.Errorf("kubeconfig %s: %w", path, err)
	}
	c, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		return nil, fmt.Errorf("kubeconfig %s: %w", path, err)
	}
	return c, nil
}

// run starts every loop and blocks until ctx is done, then shuts down.
// newAgent has built the heartbeat, CNI, graceful shutdown and node status
// (in that order); run starts the agent's components in this order, the one
// place that decides it:
//
//  1. the agent's own oom_score_adj (before anything can use memory), and
//     the Go runtime's memory limit below its cgroup's (memlimit.go);
//  2. the health server (/healthz, /livez, /readyz, /metrics, /events) and
//     the node API's listener: a port that cannot be bound fails the start
//     before any loop runs;
//  3. the heartbeat, at once: it has the highest priority, and creates its
//     Lease even before the Node exists (the owner reference follows); then
//     the certificate manager (TLS bootstrap, client certificate rotation),
//     whose certificates every new TLS handshake picks up;
//  4. the Node's registration, then node status;
//  5. the containerd connection and, once it is up, the components that
//     need it in runOnRuntime's order: cm and the device manager, pleg,
//     imagegc, pods (and the pod-resources API), eviction;
//  6. systemd READY=1 once registered and heartbeating, and the watchdog;
//  7. the configuration watcher (SIGHUP, file changes);
//  8. graceful node shutdown (its pods are handed over in 5);
//  9. CNI;
//  10. the node API serving on the listener of 2;
//  11. CSI plugin registration, once the Node is registered (csi.go).
//
// Nothing waits for another step to have started: a step that needs
// another's result (node status the runtime, eviction the pods) reads it
// through the agent when it is there.
func (a *agent) run(ctx context.Context) error {
	a.log.Info("starting nodeagent", "version", version, "leaseDuration", a.hb.LeaseDuration(),
		"statusUpdate", a.cfg.NodeStatusUpdateFrequency.Duration, "statusReport", a.cfg.NodeStatusReportFrequency.Duration)
	// 1.
	a.protectFromOOMKiller()
	a.setMaxOpenFiles()
	a.limitGoMemory()
	// 2.
	srv, err := a.startServer()
	if err != nil {
		return err
	}
	api, apiListener, roListener, err := a.newNodeAPI()
	if err != nil {
		if srv != nil {
			_ = srv.Close()
		}
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	goLoop := func(f func(context.Context)) {
		wg.Add(1)
		go func() { defer wg.Done(); f(ctx) }()
	}
	// CSI volume reconstruction, before node status and the pods (csi.go).
	a.reconstructVolumes(ctx)
	// 3.
	goLoop(a.hb.Run)
	if a.certs != nil {
		goLoop(a.certs.Run)
	}
	// 4.
	goLoop(func(ctx context.Context) {
		if _, err := a.ns.Register(ctx); err != nil {
			return // ctx is done
		}
		a.registered.Store(true)
		a.log.Info("node registered")
		a.hb.NodeRegistered() // an ownerless Lease gets its owner now, not in 10s
		a.ns.Run(ctx)
	})
	// 5.
	if a.cfg.ContainerRuntimeEndpoint != "" {
		goLoop(a.connectRuntime)
	}
	// 6.
	goLoop(a.notifyReady)
	goLoop(func(ctx context.Context) {
		systemd.RunWatchdog(ctx, a.log.With("component", "watchdog"), a.clock, a.live)
	})
	// 7.
	goLoop(a.watchConfig)
	// 8.
	goLoop(a.shutdown.run)
	// 9.
	if a.net != nil {
		goLoop(a.net.Run)
	}
	// 10.
	if apiListener != nil {
		goLoop(func(ctx context.Context) {
			if err := api.Serve(ctx, apiListener); err != nil {
				a.log.Error("node API stopped", "err", err)
			}
		})
	}
	if roListener != nil {
		goLoop(func(ctx context.Context) {
			if err := api.ServeReadOnly(ctx, roListener); err != nil {
				a.log.Error("node API read-only server stopped", "err", err)
			}
		})
	}
	// 11.
	goLoop(a.runCSIRegistration)
	if a.csi != nil {
		goLoop(a.csi.mounter.RunVolumeHealth)
	}

	<-ctx.Done()
	a.log.Info("shutting down")
	_ = systemd.Stopping()
	cancel()
	sctx, scancel := context.WithTimeout(context.Background(), shutdownGrace)
	defer scancel()
	if srv != nil {
		_ = srv.Shutdown(sctx)
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-sctx.Done():
		a.log.Warn("loops did not stop in time", "grace", shutdownGrace)
	}
	if rt := a.rt.Load(); rt != nil {
		_ = rt.Close()
	}
	a.log.Info("stopped")
	return nil
}

// notifyReady tells systemd READY=1 once the node is registered and its
// Lease renewed: from then on the control plane sees a live node.
func (a *agent) notifyReady(ctx context.Context) {
	for {
		if err := a.ready(); err == nil {
			if err := systemd.Ready(); err != nil {
				a.log.Warn("sd_notify READY failed", "err", err)
			}
			a.log.Info("node is registered and heartbeating")
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-a.clock.After(100 * time.Millisecond):
		}
	}
}

// ready is the readiness check (/readyz): registered, Lease renewed within
// the lease duration.
func (a *agent) ready() error {
	if err := certificateReady(a.certs, a.clock.Now()); err != nil {
		return err
	}
	if !a.registered.Load() {
		return errors.New("node not registered yet")
	}
	st := a.hb.Status()
	return st.RenewedWithin(a.clock.Now(), st.LeaseDuration)
}

// live is the liveness check (/livez, /healthz, systemd watchdog): the loops
// are making progress. An unreachable API server or containerd is retried and
// does not fail it, so the agent never crash-loops over an outage; a wedged
// heartbeat loop or a stuck PLEG does.
func (a *agent) live() error {
	if err := a.hb.Status().Live(a.clock.Now(), a.started); err != nil {
		return err
	}
	return a.plegHealthy()
}

// syncLoopHealthy is kubelet's syncloop health check (/healthz/syncloop
// on the node API and the healthz port): the pod workers' sync loop has
// passed within max(2 × syncFrequency, 5 minutes), a pass counting only
// while the PLEG is healthy, as kubelet's. Healthy before the loop runs.
func (a *agent) syncLoopHealthy() error {
	if pm := a.pm.Load(); pm != nil {
		return pm.SyncLoopHealthCheck()
	}
	return nil
}

func (a *agent) plegHealthy() error {
	p := a.pl.Load()
	if p == nil {
		return nil // not started: the runtime check reports why
	}
	if ok, err := p.Healthy(); !ok {
		return err
	}
	return nil
}

// watchConfig applies live configuration changes (SIGHUP or a file change).
func (a *agent) watchConfig(ctx context.Context) {
	if a.loadOpts.Path == "" && a.loadOpts.DropInDir == "" {
		return
	}
	w := config.NewWatcher(a.loadOpts, a.log.With("component", "config"), a.clock, a.cfg)
	w.LoggedWarnings = a.configWarnings
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	go func() {
		if err := w.Run(ctx); err != nil && ctx.Err() == nil {
			a.log.Error("configuration watcher stopped; SIGHUP still reloads", "err", err)
		}
	}()
	for {
		select {
		case <-ctx.Done():
			return
		case <-hup:
			a.log.Info("SIGHUP: reloading configuration")
			w.Trigger()
		case c := <-w.Updates():
			a.apply(c)
		}
	}
}

// apply takes the live fields of a new, valid configuration.
func (a *agent) apply(c *config.NodeAgentConfiguration) {
	a.hb.SetLeaseDuration(time.Duration(c.NodeLeaseDurationSeconds) * time.Second)
	a.ns.SetFrequencies(c.NodeStatusUpdateFrequency.Duration, c.NodeStatusReportFrequency.Duration)
	a.level.Set(verbosityLevel(c.Logging.Verbosity))
}

// adoptLegacyRunDirs renames the pods' namespace directories of an agent
// before the runtime endpoint was part of their names (config's
// LegacyRunDirs) to their names now, once, so that an upgraded agent on a
// non-default containerd socket finds its running pods' namespaces. A
// rename keeps the namespace mounts below it. A directory is taken only
// when every pod in it has its pod directory under this agent's rootDir:
// the legacy name of a non-default socket can be the name a default-socket
// agent on the same host uses today, whose pods are not this agent's.
func adoptLegacyRunDirs(cfg *config.NodeAgentConfiguration, log *slog.Logger) {
	oldNetNS, oldPods := cfg.LegacyRunDirs()
	for _, d := range [][2]string{{oldNetNS, cfg.NetNSDir()}, {oldPods, cfg.PodNSDir()}} {
		if d[0] == d[1] {
			continue
		}
		if _, err := os.Stat(d[1]); !errors.Is(err, os.ErrNotExist) {
			continue
		}
		if _, err := os.Stat(d[0]); err != nil {
			continue
		}
		if foreign := foreignPods(d[0], cfg.RootDir); foreign != "" {
			log.Info("not taking over a pods' namespace directory of an earlier version: it holds pods this agent does not have", "dir", d[0], "pod", foreign, "rootDir", cfg.RootDir)
			continue
		}
		if err := os.Rename(d[0], d[1]); err != nil {
			log.Warn("cannot take over the pods' namespace directory of an earlier version", "from", d[0], "to", d[1], "err", err)
			continue
		}
		log.Info("took over the pods' namespace directory of an earlier version", "from", d[0], "to", d[1])
	}
}

// foreignPods is the first entry of dir (named by pod UID) without a pod
// directory under rootDir, or "" when every one is this agent's pod (an
// empty or unreadable dir is nobody's: nothing is taken).
func foreignPods(dir, rootDir string) string {
	es, err := os.ReadDir(dir)
	if err != nil || len(es) == 0 {
		return dir
	}
	for _, e := range es {
		if _, err := os.Stat(filepath.Join(rootDir, "pods", e.Name())); err != nil {
			return e.Name()
		}
	}
	return ""
}
