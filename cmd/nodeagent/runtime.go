package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/nodeagent/nodeagent/cm"
	"github.com/nodeagent/nodeagent/config"
	"github.com/nodeagent/nodeagent/crilog"
	"github.com/nodeagent/nodeagent/nodestatus"
	"github.com/nodeagent/nodeagent/pleg"
	"github.com/nodeagent/nodeagent/pods"
	"github.com/nodeagent/nodeagent/pods/keyring"
	"github.com/nodeagent/nodeagent/runtime"
)

// connectRuntime connects to containerd, retrying with backoff and logging
// why, then runs the PLEG and the pod workers until ctx is done. It returns
// only after they have stopped, so the agent closes the runtime after its
// last user. A missing containerd never stops the agent: the node
// heartbeats and reports Ready=False naming the cause until containerd is
// there.
func (a *agent) connectRuntime(ctx context.Context) {
	log := a.log.With("component", "runtime", "endpoint", a.cfg.ContainerRuntimeEndpoint)
	rt, ok := a.dialRuntime(ctx, log, func(ctx context.Context) (*runtime.Runtime, runtime.Version, error) {
		rt, err := runtime.New(runtime.Options{
			Address:   a.cfg.ContainerRuntimeEndpoint,
			Namespace: a.cfg.ContainerRuntimeNamespace,
			// Containers become systemd scopes in their pod's slice.
			SystemdCgroup: a.cfg.CgroupDriver == config.CgroupDriverSystemd,
			Logger:        log,
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
	a.runPLEG(ctx, rt)
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

// runPLEG runs the PLEG and the pod workers over rt until ctx is done and
// both have stopped.
func (a *agent) runPLEG(ctx context.Context, rt *runtime.Runtime) {
	var sources []pleg.Source
	for _, s := range a.cfg.PLEG.EventSources {
		src, err := pleg.ParseSource(s)
		if err != nil { // config validation makes this unreachable
			a.log.Error("ignoring PLEG event source", "err", err)
			continue
		}
		sources = append(sources, src)
	}
	cgroups, err := a.newCgroupManager(ctx)
	if err != nil {
		a.log.Error("cannot lay out pod cgroups; running no pods", "err", cgroupDriverError(a.cfg, err))
		return
	}
	p, err := pleg.New(rt, pleg.Options{
		CgroupParents:        cgroups.WatchParents(),
		RelistPeriod:         a.cfg.PLEG.RelistPeriod.Duration,
		FallbackRelistPeriod: a.cfg.PLEG.FallbackRelistPeriod.Duration,
		HealthThreshold:      a.cfg.PLEG.HealthThreshold.Duration,
		Sources:              sources,
		Logger:               a.base.With("component", "pleg"),
		Registerer:           a.reg,
	})
	if err != nil {
		a.log.Error("cannot start the PLEG", "err", err)
		return
	}
	a.pl.Store(p)
	plegDone := make(chan struct{})
	go func() { defer close(plegDone); p.Run(ctx) }()
	gcDone := make(chan struct{})
	go func() { defer close(gcDone); a.runImageGC(ctx, rt) }()
	a.runPods(ctx, rt, p, cgroups)
	<-plegDone
	<-gcDone
}

// runPods runs the pod workers for static pods and the API server's pods
// bound to this node until ctx is done and every worker has stopped.
func (a *agent) runPods(ctx context.Context, rt *runtime.Runtime, p *pleg.PLEG, cgroups *cm.Manager) {
	var podNet pods.PodNetwork // a nil *network.Network must stay a nil interface
	if a.net != nil {
		podNet = a.net
	}
	podSec, admitSec := podSecurity(a.cfg)
	var credProviders keyring.Provider // a nil *credprovider.Plugins must stay a nil interface
	if a.credProviders != nil {
		credProviders = a.credProviders
	}
	pm, err := pods.New(pods.Options{
		CredentialProviders: credProviders,
		Security:            podSec,
		RuntimeHandlers:     a.cfg.RuntimeHandlers,
		Cgroups:             cgroups,
		Admission:           admitSec,
		Admit:               a.admitUnderPressure,
		ShuttingDown:        a.shutdown.ShuttingDown,
		Network:             podNet,
		NodeName:            a.nodeName,
		Client:              podsClient(a.client),
		StaticPodPath:       a.cfg.StaticPodPath,
		RootDir:             a.cfg.RootDir,
		PodLogsDir:          a.cfg.PodLogsDir,
		NetNSDir:            netnsDirFor(a.cfg.ContainerRuntimeNamespace),
		PodNSDir:            podNSDirFor(a.cfg.ContainerRuntimeNamespace),
		MaxPods:             int(a.cfg.MaxPods),
		Node:                a.ns.Node,
		NodeAnyway:          a.ns.NodeAnyway,
		NodeSynced:          a.ns.NodeSynced,
		Runtime:             rt,
		PLEG:                p,
		PodCache:            p.Cache(),
		Registerer:          a.reg,
		Logger:              a.base.With("component", "pods"),
		Names: pods.NameSettings{
			ClusterDNS: a.cfg.ClusterDNS, ClusterDomain: a.cfg.ClusterDomain, ResolvConf: a.cfg.ResolvConf,
		},
	})
	if err != nil {
		a.log.Error("cannot start the pod workers", "err", err)
		return
	}
	a.apiPods.use(pm)
	evCtx, evStop := context.WithCancel(ctx)
	evDone := make(chan struct{})
	go func() { defer close(evDone); a.runEviction(evCtx, rt, pm) }()
	a.shutdown.usePods(pm)
	if err := pm.Run(ctx); err != nil {
		a.log.Error("pod workers stopped", "err", err)
	}
	evStop()
	<-evDone
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

// netnsDirFor is where the pods' network namespaces of the agent that
// uses containerd namespace ns are mounted (<dir>/<pod UID>). Each agent
// treats the entries of its directory without containers as its own
// orphans, so two agents on one host (tests, or a second instance in
// another containerd namespace) must not share it: the default namespace
// keeps the documented /run/nodeagent/netns, any other gets its own.
func netnsDirFor(ns string) string {
	if ns == "" || ns == config.DefaultContainerRuntimeNamespace {
		return "/run/nodeagent/netns"
	}
	return "/run/nodeagent/netns-" + ns
}

// podNSDirFor is where the pods' IPC and UTS namespaces and /dev/shm of
// the agent that uses containerd namespace ns are mounted
// (<dir>/<pod UID>/{ipc,uts,shm}), one directory per agent as netnsDirFor.
func podNSDirFor(ns string) string {
	if ns == "" || ns == config.DefaultContainerRuntimeNamespace {
		return "/run/nodeagent/pods"
	}
	return "/run/nodeagent/pods-" + ns
}

// pullProgressTimeout maps imagePullProgressTimeout (0: never, as
// containerd) to runtime.Options.PullProgressTimeout (negative: never).
func pullProgressTimeout(d time.Duration) time.Duration {
	if d == 0 {
		return -1
	}
	return d
}
