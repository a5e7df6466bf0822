package main

import (
	"context"
	"fmt"
	"math"
	"net"
	"path/filepath"
	goruntime "runtime"
	"sync/atomic"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodeagent/nodeagent/config"
	"github.com/nodeagent/nodeagent/nodeapi"
	"github.com/nodeagent/nodeagent/runtime"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// newNodeAPI builds the node API server from the configuration and opens
// its listeners: ln for the authenticated server (nil when port is 0 or
// enableServer false), roLn for the read-only server (nil when
// readOnlyPort is 0). Certificate or CA files that cannot be read, and
// ports in use, fail the start.
func (a *agent) newNodeAPI() (s *nodeapi.Server, ln, roLn net.Listener, err error) {
	c := a.cfg
	secure := c.Port != 0 && c.EnableServer
	switch {
	case !c.EnableServer:
		a.log.Info("node API disabled (enableServer: false)")
	case c.Port == 0:
		a.log.Info("node API disabled (port: 0)")
	}
	if !secure && c.ReadOnlyPort == 0 {
		return nil, nil, nil, nil
	}
	hosts := []string{a.nodeName}
	if c.NodeIP != "" {
		hosts = append(hosts, c.NodeIP)
	}
	suites, minTLS := c.NodeAPITLS()
	opts := nodeapi.Options{
		NodeName:               a.nodeName,
		Address:                c.Address,
		Port:                   int(c.Port),
		TLSCertFile:            c.TLSCertFile,
		TLSPrivateKeyFile:      c.TLSPrivateKeyFile,
		ServerTLSBootstrap:     c.ServerTLSBootstrap,
		TLSCipherSuites:        suites,
		TLSMinVersion:          minTLS,
		Node:                   a.ns.Node,
		CertDir:                c.CertDirectory(),
		Hosts:                  hosts,
		ClientCAFile:           c.Authentication.X509.ClientCAFile,
		Client:                 nodeAPIClient(a.client),
		WebhookAuthentication:  c.Authentication.Webhook.Enabled,
		AuthenticationCacheTTL: c.Authentication.Webhook.CacheTTL.Duration,
		Anonymous:              c.Authentication.Anonymous.Enabled,
		AuthorizationMode:      c.Authorization.Mode,
		AuthorizedCacheTTL:     c.Authorization.Webhook.CacheAuthorizedTTL.Duration,
		UnauthorizedCacheTTL:   c.Authorization.Webhook.CacheUnauthorizedTTL.Duration,
		Pods:                   &a.apiPods,
		Containers:             runtimeContainers{a},
		Exec:                   runtimeContainers{a},
		StreamIdleTimeout:      streamIdleTimeout(c.StreamingConnectionIdleTimeout.Duration),
		Attach:                 runtimeContainers{a},
		LogRoot:                c.PodLogsDir,
		LegacyLogRoots:         []string{filepath.Join(c.RootDir, "logs")},
		NetNSDir:               c.NetNSDir(),
		StatsFsDir:             c.RootDir,
		PSI:                    a.cfg.FeatureEnabled(config.FeatureKubeletPSI),
		PodsDir:                filepath.Join(c.RootDir, "pods"),
		PodVolumeStats:         a.csi.podVolumeStats(),
		VolumeStatsAggPeriod:   c.VolumeStatsAggPeriod.Duration,
		ImageFs:                runtimeContainers{a}.imageFs,
		Healthy:                a.syncLoopHealthy,
		FlushLogs:              a.flushLogs,
		Debug: &nodeapi.DebugOptions{
			Handlers:     c.EnableDebuggingHandlers,
			Profiling:    c.EnableProfilingHandler,
			Flags:        c.EnableDebugFlagsHandler,
			SetVerbosity: a.setVerbosity,
			SystemLog:    c.EnableSystemLogHandler,
			LogQuery:     c.EnableSystemLogQuery && c.FeatureEnabled(config.FeatureNodeLogQuery),
			Checkpoint:   c.FeatureEnabled(config.FeatureContainerCheckpoint),
		},
		Metrics:      promhttp.HandlerFor(a.reg, promhttp.HandlerOpts{Registry: a.reg}),
		ProbeMetrics: promhttp.HandlerFor(a.probeReg, promhttp.HandlerOpts{Registry: a.probeReg}),
		Configz:      func() ([]byte, error) { return config.KubeletConfigz(a.cfg) },
		Logger:       a.base.With("component", "nodeapi", "node", a.nodeName),
	}
	if !secure {
		s, err = nodeapi.NewReadOnly(opts)
	} else {
		opts.ServingCertMetrics = servingCertMetrics(a.reg, c.ServerTLSBootstrap)
		s, err = nodeapi.New(opts)
	}
	if err != nil {
		return nil, nil, nil, err
	}
	if secure {
		if ln, err = s.Listen(); err != nil {
			return nil, nil, nil, err
		}
		if c.EnableDebuggingHandlers && c.EnableProfilingHandler && c.EnableContentionProfiling {
			// As kubelet: every blocking event, for /debug/pprof/block.
			goruntime.SetBlockProfileRate(1)
		}
	}
	if c.ReadOnlyPort != 0 {
		if roLn, err = s.ListenReadOnly(int(c.ReadOnlyPort)); err != nil {
			if ln != nil {
				_ = ln.Close()
			}
			return nil, nil, nil, err
		}
	}
	return s, ln, roLn, nil
}

// setVerbosity is the node API's PUT /debug/flags/v: the log verbosity
// until the next restart or configuration change (logging.verbosity).
func (a *agent) setVerbosity(v uint32) error {
	if v > math.MaxInt32 {
		return fmt.Errorf("verbosity %d is too large", v)
	}
	a.level.Set(verbosityLevel(int32(v)))
	a.log.Info("log verbosity set through the node API", "verbosity", v)
	return nil
}

// probeRegistry is the registry of the node API's /metrics/probes: the
// prober's metrics and, as kubelet's, process_start_time_seconds (here the
// agent's start).
func probeRegistry(started time.Time) *prometheus.Registry {
	r := prometheus.NewRegistry()
	r.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "process_start_time_seconds", Help: "[ALPHA] Start time of the process since unix epoch in seconds.",
	}, func() float64 { return float64(started.UnixNano()) / 1e9 }))
	return r
}

// apiPods is the node API's view of the pods the agent runs. startPods
// sets it to the pod manager when the manager implements nodeapi.Pods
// (GetPodByName, GetPods from its memory); until then, and with a manager
// that does not, pods are derived from the runtime's containers (name,
// namespace, UID and the containers that were created: enough for
// containerLogs, not the full spec /pods should show).
type apiPods struct {
	a   *agent
	mgr atomic.Pointer[nodeapi.Pods]
}

var _ nodeapi.Pods = (*apiPods)(nil)

// use makes the node API read pods from m, if m can tell them.
func (p *apiPods) use(m any) {
	if pods, ok := m.(nodeapi.Pods); ok {
		p.mgr.Store(&pods)
	}
}

func (p *apiPods) GetPods() []*v1.Pod {
	if m := p.mgr.Load(); m != nil {
		return (*m).GetPods()
	}
	return p.fromRuntime()
}

func (p *apiPods) GetPodByName(namespace, name string) (*v1.Pod, bool) {
	if m := p.mgr.Load(); m != nil {
		return (*m).GetPodByName(namespace, name)
	}
	var found *v1.Pod
	for _, pod := range p.fromRuntime() {
		// The newest pod of that name (a pod deleted and created again
		// leaves the old one's containers until they are removed).
		if pod.Namespace == namespace && pod.Name == name && (found == nil || pod.CreationTimestamp.After(found.CreationTimestamp.Time)) {
			found = pod
		}
	}
	return found, found != nil
}

func (p *apiPods) fromRuntime() []*v1.Pod {
	rt, err := p.a.runtimeOrErr()
	if err != nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	rpods, err := rt.ListPods(ctx)
	if err != nil {
		return nil
	}
	out := make([]*v1.Pod, 0, len(rpods))
	for _, rp := range rpods {
		pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: rp.Namespace, Name: rp.Name, UID: rp.UID}}
		pod.Kind, pod.APIVersion = "Pod", "v1"
		seen := map[string]bool{}
		for _, c := range rp.Containers {
			if c.CreatedAt.After(pod.CreationTimestamp.Time) {
				pod.CreationTimestamp = metav1.NewTime(c.CreatedAt)
			}
			if !seen[c.Name] {
				seen[c.Name] = true
				pod.Spec.Containers = append(pod.Spec.Containers, v1.Container{Name: c.Name, Image: c.Image})
			}
		}
		out = append(out, pod)
	}
	return out
}

// runtimeContainers lists containers through the agent's runtime
// connection, once there is one.
type runtimeContainers struct{ a *agent }

func (r runtimeContainers) ListContainers(ctx context.Context) ([]runtime.Container, error) {
	rt, err := r.a.runtimeOrErr()
	if err != nil {
		return nil, err
	}
	return rt.ListContainers(ctx)
}

// PodContainers are the pod's containers in the PLEG's cache once the PLEG
// runs (kept current by events, no runtime call), else as listed now.
func (r runtimeContainers) PodContainers(ctx context.Context, uid types.UID) ([]runtime.Container, error) {
	if p := r.a.pl.Load(); p != nil {
		if s, ok := p.Cache().Get(uid); ok {
			return s.Containers, nil
		}
	}
	cs, err := r.ListContainers(ctx)
	if err != nil {
		return nil, err
	}
	out := cs[:0]
	for _, c := range cs {
		if c.Pod.UID == uid {
			out = append(out, c)
		}
	}
	return out, nil
}

// imageFs is containerd's image filesystem (the snapshotter's root) and
// the bytes of its images, for /stats/summary.
func (r runtimeContainers) imageFs(ctx context.Context) (string, uint64, error) {
	rt, err := r.a.runtimeOrErr()
	if err != nil {
		return "", 0, err
	}
	dir, err := rt.ImageFSRoot(ctx)
	if err != nil {
		return "", 0, err
	}
	imgs, err := rt.ListImages(ctx)
	if err != nil {
		return "", 0, err
	}
	var used uint64
	for _, img := range imgs {
		used += uint64(max(img.Size, 0))
	}
	return dir, used, nil
}

func (r runtimeContainers) InspectContainer(ctx context.Context, id string) (runtime.Container, error) {
	rt, err := r.a.runtimeOrErr()
	if err != nil {
		return runtime.Container{}, err
	}
	return rt.InspectContainer(ctx, id)
}

func (r runtimeContainers) Exec(ctx context.Context, id string, o runtime.ExecOptions) (int, error) {
	rt, err := r.a.runtimeOrErr()
	if err != nil {
		return 0, err
	}
	return rt.Exec(ctx, id, o)
}

func (r runtimeContainers) AttachStdin(ctx context.Context, id string, o runtime.AttachOptions) error {
	rt, err := r.a.runtimeOrErr()
	if err != nil {
		return err
	}
	return rt.AttachStdin(ctx, id, o)
}

// streamIdleTimeout maps streamingConnectionIdleTimeout (0: no idle
// timeout) to nodeapi's StreamIdleTimeout (0: the default, negative:
// none).
func streamIdleTimeout(d time.Duration) time.Duration {
	if d == 0 {
		return -1
	}
	return d
}
