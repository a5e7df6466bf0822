package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"path/filepath"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/clock"

	"github.com/nodeagent/nodeagent/cm"
	"github.com/nodeagent/nodeagent/config"
	"github.com/nodeagent/nodeagent/crilog"
	"github.com/nodeagent/nodeagent/nodestatus"
	"github.com/nodeagent/nodeagent/pleg"
	"github.com/nodeagent/nodeagent/pods"
	"github.com/nodeagent/nodeagent/pods/admission"
	"github.com/nodeagent/nodeagent/pods/keyring"
	"github.com/nodeagent/nodeagent/pods/pullmanager"
	"github.com/nodeagent/nodeagent/pods/volume"
	"github.com/nodeagent/nodeagent/runtime"
	"github.com/nodeagent/nodeagent/userns"
)

// connectRuntime connects to containerd, retrying with backoff and logging
// why, then runs the components that need it (runOnRuntime) until ctx is
// done. It returns
// only after they have stopped, so the agent closes the runtime after its
// last user. A missing containerd never stops the agent: the node
// heartbeats and reports Ready=False naming the cause until containerd is
// there.
func (a *agent) connectRuntime(ctx context.Context) {
	log := a.log.With("component", "runtime", "endpoint", a.cfg.ContainerRuntimeEndpoint)
	callTimeout, startTimeout := runtimeTimeouts(a.cfg.RuntimeRequestTimeout.Duration)
	rt, ok := a.dialRuntime(ctx, log, func(ctx context.Context) (*runtime.Runtime, runtime.Version, error) {
		rt, err := runtime.New(runtime.Options{
			Address:   a.cfg.ContainerRuntimeEndpoint,
			Namespace: a.cfg.ContainerRuntimeNamespace,
			// Containers become systemd scopes in their pod's slice.
			SystemdCgroup: a.cfg.CgroupDriver == config.CgroupDriverSystemd,
			// kubelet's memory.oom.group=1 on cgroup v2 unless
			// singleProcessOOMKill.
			SingleProcessOOMKill: a.singleProcessOOMKill,
			Logger:               log,
			// The agent's own binary writes each container's log (CRI
			// format, rotation), started by the shim so that it
			// outlives the agent.
			ContainerLogger: a.containerLogger,
			LogRotation:     crilog.Rotation{MaxSize: a.cfg.ContainerLogMaxBytes(), MaxFiles: int(a.cfg.ContainerLogMaxFiles)},
			// Pulls follow containerd's hosts.toml files and fail
			// only when they stop making progress.
			RegistryConfigPath:  a.cfg.RegistryConfigPath,
			PullProgressTimeout: pullProgressTimeout(a.cfg.ImagePullProgressTimeout.Duration),
			ContainerLogsDir:    a.cfg.ContainerLogsDir,
			CallTimeout:         callTimeout,
			StartTimeout:        startTimeout,
		})
		if err != nil {
			return nil, runtime.Version{}, err
		}
		v, err := rt.Version(ctx)
		if err != nil {
			_ = rt.Close()
			return nil, runtime.Version{}, err
		}
		return rt, v, nil
	})
	if !ok {
		return
	}
	// Loggers of stdin containers run outside the shim; a stop of the
	// agent's unit may have killed them.
	if err := rt.RestoreStdioLoggers(ctx); err != nil {
		log.Warn("restarting the log writers of containers with stdin", "err", err)
	}
	// Symlinks for containers started without one (an upgrade from an
	// agent that kept none), none for containers that are gone.
	if err := rt.SyncLogSymlinks(ctx); err != nil {
		log.Warn("container log symlinks", "dir", a.cfg.ContainerLogsDir, "err", err)
	}
	a.runOnRuntime(ctx, rt)
}

// dialRuntime calls dial until it succeeds, waiting between attempts
// (1s doubling to 30s, no jitter: one agent per node), and stores the
// runtime or the last error for the health checks. ok is false when ctx
// ended first.
func (a *agent) dialRuntime(ctx context.Context, log *slog.Logger, dial func(context.Context) (*runtime.Runtime, runtime.Version, error)) (_ *runtime.Runtime, ok bool) {
	backoff := wait.Backoff{Duration: time.Second, Factor: 2, Jitter: 0, Steps: math.MaxInt32, Cap: 30 * time.Second}
	for {
		rt, v, err := dial(ctx)
		if err == nil {
			a.rt.Store(rt)
			a.firstDial.fire()
			log.Info("connected to the container runtime", "version", v.RuntimeVersion)
			return rt, true
		}
		a.rtErr.Store(&err)
		a.firstDial.fire()
		delay := backoff.Step()
		log.Warn("container runtime unreachable; retrying", "err", err, "retryIn", delay)
		select {
		case <-ctx.Done():
			return nil, false
		case <-a.clock.After(delay):
		}
	}
}

// runOnRuntime runs the components that need containerd, over rt, until
// ctx is done and every one of them has stopped. It builds and starts them
// in this order, each from those above it (run's comment gives the whole
// agent's order); one that cannot be built is logged and those below it
// are not started, while the node keeps heartbeating and reporting status:
//
//  1. cm: the pod cgroup layout (kubepods and its QoS levels), and the
//     device manager (the device plugins' registration socket);
//  2. pleg: over rt, watching 1's cgroup parents; its health feeds /livez;
//  3. imagegc: over rt;
//  4. pods: the pod workers over rt, 2 and 1 (and the CPU manager,
//     restored at start); the node API and the pod-resources API read
//     their pods from then on, the CPU manager's reconcile loop starts;
//  5. eviction: node-pressure eviction of 4's pods, reclaiming through 4
//     and 3; it stops when 4 stops;
//  6. graceful node shutdown gets 4's pods;
//  7. 4 runs until ctx is done and every worker has stopped.
func (a *agent) runOnRuntime(ctx context.Context, rt *runtime.Runtime) {
	var wg sync.WaitGroup
	defer wg.Wait()
	goRun := func(ctx context.Context, f func(context.Context)) {
		wg.Add(1)
		go func() { defer wg.Done(); f(ctx) }()
	}

	// 1. cm
	cgroups, err := a.newCgroupManager(ctx)
	if err != nil {
		a.log.Error("cannot lay out pod cgroups; running no pods", "err", cgroupDriverError(a.cfg, err))
		return
	}
	devices := a.startDevices(ctx)
	// 2. pleg
	p, err := a.newPLEG(rt, cgroups)
	if err != nil {
		a.log.Error("cannot start the PLEG", "err", err)
		return
	}
	a.pl.Store(p)
	goRun(ctx, p.Run)
	// 3. imagegc
	goRun(ctx, func(ctx context.Context) { a.runImageGC(ctx, rt) })
	// 4. pods
	pm, err := a.newPods(rt, p, cgroups, devices)
	if err != nil {
		a.log.Error("cannot start the pod workers", "err", err)
		return
	}
	a.apiPods.use(pm)
	a.pm.Store(pm)
	a.servePodResources(ctx, pm)
	goRun(ctx, func(ctx context.Context) { a.runCPUManager(ctx, rt, pm) })
	// 5. eviction (evStop runs before wg.Wait)
	evCtx, evStop := context.WithCancel(ctx)
	defer evStop()
	goRun(evCtx, func(ctx context.Context) { a.runEviction(ctx, rt, pm) })
	// 6. shutdown
	a.shutdown.usePods(pm)
	// 7.
	if err := pm.Run(ctx); err != nil {
		a.log.Error("pod workers stopped", "err", err)
	}
}

// newPLEG builds the PLEG over rt, watching the cgroup parents of cgroups.
func (a *agent) newPLEG(rt *runtime.Runtime, cgroups *cm.Manager) (*pleg.PLEG, error) {
	var sources []pleg.Source
	for _, s := range a.cfg.PLEG.EventSources {
		src, err := pleg.ParseSource(s)
		if err != nil { // config validation makes this unreachable
			a.log.Error("ignoring PLEG event source", "err", err)
			continue
		}
		sources = append(sources, src)
	}
	return pleg.New(rt, pleg.Options{
		CgroupParents:        cgroups.WatchParents(),
		RelistPeriod:         a.cfg.PLEG.RelistPeriod.Duration,
		FallbackRelistPeriod: a.cfg.PLEG.FallbackRelistPeriod.Duration,
		HealthThreshold:      a.cfg.PLEG.HealthThreshold.Duration,
		Sources:              sources,
		Logger:               a.base.With("component", "pleg"),
		Registerer:           a.reg,
	})
}

// newPods builds the pod workers for static pods and the API server's pods
// bound to this node, over rt, the PLEG p and the pod cgroups.
func (a *agent) newPods(rt *runtime.Runtime, p *pleg.PLEG, cgroups *cm.Manager, devices pods.Devices) (*pods.Manager, error) {
	var podNet pods.PodNetwork // a nil *network.Network must stay a nil interface
	if a.net != nil {
		podNet = a.net
	}
	var credProviders keyring.Provider // a nil *credprovider.Plugins must stay a nil interface
	if a.credProviders != nil {
		credProviders = a.credProviders
	}
	var vols volume.External // a nil *csi.Mounter must stay a nil interface
	var tokens *volume.Tokens
	if a.csi != nil {
		vols, tokens = a.csi.mounter, a.csi.tokens
	}
	// User namespaces (hostUsers: false) as kubelet: the kubelet user's
	// subordinate IDs or the default range, checked and read back from
	// the pods' directories at start; a bad range stops the agent, as it
	// stops kubelet ("create user namespace manager: ...").
	idRange, err := userns.ReadHostRange()
	if err != nil {
		return nil, fmt.Errorf("create user namespace manager: kubelet mappings: %w", err)
	}
	usernsMgr, err := userns.New(userns.DirStore{Dir: filepath.Join(a.cfg.RootDir, "pods")},
		userns.Options{Range: idRange, IDsPerPod: uint32(a.cfg.UserNamespaces.IDsPerPod), MaxPods: int(a.cfg.MaxPods)})
	if err != nil {
		return nil, fmt.Errorf("create user namespace manager: %w", err)
	}
	// KubeletEnsureSecretPulledImages (off by default, as in kubelet 1.34).
	var pulls *pullmanager.Manager
	if a.cfg.SecretPulledImages() {
		policy, err := pullmanager.NewPolicy(a.cfg.ImagePullCredentialsVerificationPolicy, a.cfg.PreloadedImagesVerificationAllowlist)
		if err != nil {
			return nil, err
		}
		if pulls, err = pullmanager.New(a.cfg.RootDir, policy, clock.RealClock{}); err != nil {
			return nil, fmt.Errorf("image pull records: %w", err)
		}
	}
	o := podsSettings(a.cfg)
	o.SecretPulledImages = pulls
	o.UserNamespaces = pods.NewUserNamespaces(usernsMgr, rt.SupportsUserNamespaces)
	o.Volumes, o.Tokens, o.CredentialProviders = vols, tokens, credProviders
	o.Cgroups, o.Devices, o.CPUs, o.Topology = cgroups, devices, a.cpus, a.topology
	o.Admission, o.Admit, o.ShuttingDown = a.admissionOptions(), a.admitUnderPressure, a.shutdown.ShuttingDown
	o.Network = podNet
	o.NodeName, o.Client = a.nodeName, podsClient(a.client, a.events)
	o.Node, o.NodeAnyway, o.NodeSynced = a.ns.Node, a.ns.NodeAnyway, a.ns.NodeSynced
	o.Runtime, o.PLEG, o.PodCache = rt, p, p.Cache()
	o.RuntimeErrors = a.plegHealthy // kubelet's runtime state includes its PLEG's health
	o.Registerer, o.ProbeRegisterer = a.reg, a.probeReg
	o.Logger = a.base.With("component", "pods")
	return pods.New(o)
}

// podsSettings are the pod workers' options that come from the
// configuration alone.
// podCapacity is the node's pods capacity, maxPods capped by podsPerCore
// × the host's online CPUs as kubelet caps it (maxPods if they cannot be
// read).
func podCapacity(cfg *config.NodeAgentConfiguration) int32 {
	if cfg.PodsPerCore <= 0 {
		return cfg.MaxPods
	}
	n, err := (&nodestatus.Host{}).NumCPU()
	if err != nil {
		return cfg.MaxPods
	}
	return cfg.PodCapacity(n)
}

func podsSettings(cfg *config.NodeAgentConfiguration) pods.Options {
	return pods.Options{
		Security:        pods.SecurityOptions{SeccompDefault: cfg.SeccompDefault},
		RuntimeHandlers: cfg.RuntimeHandlers,
		StaticPodPath:   cfg.StaticPodPath,
		// kubelet's syncFrequency and fileCheckFrequency.
		ResyncPeriod: cfg.SyncFrequency.Duration,
		StaticRescan: cfg.FileCheckFrequency.Duration,
		RootDir:      cfg.RootDir,
		PodLogsDir:   cfg.PodLogsDir,
		NetNSDir:     cfg.NetNSDir(),
		PodNSDir:     cfg.PodNSDir(),
		MaxPods:      int(podCapacity(cfg)),
		Names: pods.NameSettings{
			ClusterDNS: cfg.ClusterDNS, ClusterDomain: cfg.ClusterDomain, ResolvConf: cfg.ResolvConf,
		},
		ImagePulls: imagePullLimits(cfg),
		NoCPUQuota: !cfg.CPUCFSQuota,
	}
}

// imagePullLimits are kubelet's image pull settings of cfg.
func imagePullLimits(cfg *config.NodeAgentConfiguration) pods.ImagePullLimits {
	l := pods.ImagePullLimits{Serialize: cfg.ImagePullsSerialized(), QPS: float32(cfg.RegistryPullQPS), Burst: int(cfg.RegistryBurst)}
	if cfg.MaxParallelImagePulls != nil {
		l.MaxParallel = *cfg.MaxParallelImagePulls
	}
	return l
}

var errRuntimeNotConnected = errors.New("container runtime not connected")

// event is a one-shot signal that needs no constructor (fire may come
// before or after the first done, any number of times).
type event struct {
	once, fired sync.Once
	ch          chan struct{}
}

func (s *event) done() chan struct{} {
	s.once.Do(func() { s.ch = make(chan struct{}) })
	return s.ch
}

func (s *event) fire() {
	ch := s.done()
	s.fired.Do(func() { close(ch) })
}

func (a *agent) runtimeOrErr() (*runtime.Runtime, error) {
	if rt := a.rt.Load(); rt != nil {
		return rt, nil
	}
	if e := a.rtErr.Load(); e != nil {
		return nil, fmt.Errorf("%w: %v", errRuntimeNotConnected, *e)
	}
	return nil, errRuntimeNotConnected
}

// firstDialWait bounds how long a node status check waits for the first
// dial of containerd (below the status checks' 5s call timeout).
const firstDialWait = 3 * time.Second

// runtimeForStatus is runtimeOrErr for the node status checks: while the
// agent's first dial of containerd has no outcome yet, it waits for it
// (until ctx ends). A restarted agent of a Ready node otherwise wrote
// Ready=False "container runtime not connected" in its first status, a
// few milliseconds before the connection to a containerd that had been
// running all along was up: a false NotReady in the 2-hour soak. Once the
// first dial has failed, the error is reported at once.
func (a *agent) runtimeForStatus(ctx context.Context) (*runtime.Runtime, error) {
	if a.rt.Load() == nil && a.rtErr.Load() == nil {
		select {
		case <-a.firstDial.done():
		case <-ctx.Done():
		}
	}
	return a.runtimeOrErr()
}

func (a *agent) runtimeHealthy(ctx context.Context) error {
	_, err := a.runtimeForStatus(ctx)
	return err
}

func (a *agent) runtimeVersion(ctx context.Context) (string, string, error) {
	rt, err := a.runtimeForStatus(ctx)
	if err != nil {
		return "", "", err
	}
	v, err := rt.Version(ctx)
	if err != nil {
		return "", "", err
	}
	return v.RuntimeName, v.RuntimeVersion, nil
}

func (a *agent) listImages(ctx context.Context) ([]nodestatus.Image, error) {
	rt, err := a.runtimeForStatus(ctx)
	if err != nil {
		return nil, err
	}
	imgs, err := rt.ListImages(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]nodestatus.Image, 0, len(imgs))
	for _, im := range imgs {
		out = append(out, nodestatus.Image{ID: im.ID, Names: im.Names, SizeBytes: im.Size})
	}
	return out, nil
}

// runtimeTimeouts applies kubelet's runtimeRequestTimeout, the bound on
// one CRI request other than pulls, logs and streams, to nodeagent's
// containerd calls, which are finer than CRI's: creating and starting a
// sandbox or a container (CRI's RunPodSandbox, CreateContainer,
// StartContainer) get all of it; every other call the runtime's own 10s
// bound, or less when the timeout is shorter, so that a hung containerd
// still shows within seconds in the PLEG's health and the node status.
func runtimeTimeouts(requestTimeout time.Duration) (call, start time.Duration) {
	return min(runtime.DefaultCallTimeout, requestTimeout), requestTimeout
}

// pullProgressTimeout maps imagePullProgressTimeout (0: never, as
// containerd) to runtime.Options.PullProgressTimeout (negative: never).
func pullProgressTimeout(d time.Duration) time.Duration {
	if d == 0 {
		return -1
	}
	return d
}

// admissionOptions are the host's security settings for admission, with
// the feature gates that refuse pods (config featureGates).
func (a *agent) admissionOptions() admission.SecurityOptions {
	o := admission.HostSecurity(a.cfg.AllowedUnsafeSysctls)
	o.PodLevelResourcesDisabled = !a.cfg.FeatureEnabled(config.FeaturePodLevelResources)
	o.ImageVolume = a.cfg.FeatureEnabled(config.FeatureImageVolume)
	return o
}
