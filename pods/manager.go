package pods

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"

	"github.com/nodeagent/nodeagent/crilog"
	"github.com/nodeagent/nodeagent/internal/netns"
	"github.com/nodeagent/nodeagent/kubetypes"
	"github.com/nodeagent/nodeagent/pleg"
	"github.com/nodeagent/nodeagent/pods/admission"
	"github.com/nodeagent/nodeagent/pods/keyring"
	"github.com/nodeagent/nodeagent/pods/mirror"
	"github.com/nodeagent/nodeagent/pods/objcache"
	"github.com/nodeagent/nodeagent/pods/pullmanager"
	"github.com/nodeagent/nodeagent/pods/source"
	"github.com/nodeagent/nodeagent/pods/status"
	"github.com/nodeagent/nodeagent/pods/volume"
	"github.com/nodeagent/nodeagent/runtime"
)

// nodeAnywayTimeout bounds the admission's wait for the node's info.
const nodeAnywayTimeout = 10 * time.Second

// Options configure the Manager.
type Options struct {
	NodeName string
	// Client is the node's API client; nil runs static pods only, without
	// mirror pods or status.
	Client *Client
	// StaticPodPath is the static manifest directory; "" disables it.
	StaticPodPath string
	// RootDir holds pod directories (volumes); its logs/ directory the
	// container logs of agents older than PodLogsDir (podlogs.go).
	RootDir string
	// CredentialProviders are kubelet's credential provider plugins
	// (nil: none), asked after the node's docker config files.
	CredentialProviders keyring.Provider
	// PodLogsDir holds the pods' container logs (kubelet's podLogsDir,
	// default /var/log/pods).
	PodLogsDir string
	// NetNSDir holds the pods' network namespace mounts (default
	// /run/nodeagent/netns).
	NetNSDir string
	// PodNSDir holds the pods' IPC and UTS namespace mounts and /dev/shm
	// (default: NetNSDir + "-pods"). Like NetNSDir it is the agent's own:
	// its entries without a pod are orphans.
	PodNSDir string
	// MaxPods is the pod capacity (default 110).
	MaxPods int
	// Node returns the node as last seen (the node's UID for mirror pods
	// and its InternalIP); nil until registered.
	Node func() *v1.Node
	// NodeAnyway returns the node for admission (allocatable): the API
	// server's copy, else one computed from the host, as kubelet's
	// getNodeAnyWay. Required.
	NodeAnyway func(context.Context) (*v1.Node, error)
	// NodeSynced reports whether Node answers from a synced informer; the
	// API source takes no pod before (default: always true).
	NodeSynced func() bool
	// HostIP is the node's IP (status.hostIP); defaults to the Node's
	// InternalIP.
	HostIP func() string

	Runtime Runtime
	PLEG    PLEG
	// PodCache is the PLEG's view of the pods (its Cache()).
	PodCache PodCache
	NetNS    NetNS // default: internal/netns
	// PodNS holds pods' IPC and UTS namespaces (default: internal/netns).
	PodNS PodNamespaceHolder
	// Network is the pod network (CNI); nil: pods without hostNetwork have
	// loopback only.
	Network PodNetwork
	// Volumes sets up persistentVolumeClaim and csi volumes (a *csi.Mounter);
	// nil: pods with them wait with FailedMount.
	Volumes volume.External
	// Tokens caches the service account tokens of projected volumes,
	// shared with the CSI mounter's (CSIDriver tokenRequests) as kubelet
	// has one token manager; nil: a cache of the pods' own.
	Tokens *volume.Tokens
	// Names are the DNS settings of the pods' resolv.conf and the node's
	// hosts file (namefiles.go).
	Names NameSettings
	// Security shapes containers' security (seccompDefault, the seccomp
	// profile root: default RootDir/seccomp).
	Security SecurityOptions
	// RuntimeHandlers maps RuntimeClass handlers to containerd runtime
	// types (config runtimeHandlers); pods of other handlers do not start.
	RuntimeHandlers map[string]string
	// Cgroups lays out pod cgroups (kubepods/<qos>/pod<uid>, see package
	// cm) and scores containers for the OOM killer; nil: containers go
	// under the runtime's default parent.
	Cgroups PodCgroups
	// Devices are the device plugins' resources (package
	// cm/devicemanager); nil: no device plugins, extended resources are
	// left to the resource fit as kubelet leaves unknown ones.
	Devices Devices
	// CPUs is the CPU manager (package cm/cpumanager); nil: containers
	// get the runtime's default cpuset.
	CPUs CPUs
	// NoCPUQuota is kubelet's cpuCFSQuota: false: no container gets a CFS
	// quota, at creation or in an in-place resize (the pod cgroups are
	// package cm's: its Config.NoCPUQuota). The limits stay in the spec
	// and status.
	NoCPUQuota bool
	// Topology is the topology manager (package cm/topologymanager) the
	// devices and CPUs are allocated through; nil: allocated directly.
	Topology Topology
	// UserNamespaces gives hostUsers: false pods their user namespace
	// (NewUserNamespaces); nil refuses them as a runtime without user
	// namespaces would.
	UserNamespaces UserNamespaces
	// SecretPulledImages is KubeletEnsureSecretPulledImages (package
	// pullmanager); nil leaves it off: an image on the node is served to
	// every pod, as a kubelet 1.34 does by default.
	SecretPulledImages *pullmanager.Manager
	// ImagePulls are kubelet's serializeImagePulls, maxParallelImagePulls,
	// registryPullQPS and registryBurst, for every pod's pulls (image
	// volumes' included). The zero value pulls in parallel without limits.
	ImagePulls ImagePullLimits
	// Admission is the node's pod security admission settings
	// (allowedUnsafeSysctls, host AppArmor and SELinux).
	Admission admission.SecurityOptions
	// Admit, when set, is asked first whether a new pod may run (the
	// eviction manager's admit handler: no new pods under node pressure).
	Admit func(pod *v1.Pod) (ok bool, reason, message string)
	// ShuttingDown reports non-nil while the node shuts down (graceful
	// node shutdown): new pods are rejected (NodeShutdown). nil: never.
	ShuttingDown func() error
	// ResyncPeriod is how often a worker syncs without news (kubelet's
	// syncFrequency, default 1m), plus up to half of it at random after a
	// successful sync, as kubelet's pod workers.
	ResyncPeriod time.Duration
	// RuntimeErrors, when set, is asked on every pass of the sync loop
	// (dispatch): while it returns an error the pass is not recorded as
	// a loop entry, as kubelet's sync loop is not entered while its
	// runtime state has errors (a PLEG not healthy among them), so
	// SyncLoopHealthCheck fails once that lasts past its bound.
	RuntimeErrors func() error
	// StaticDebounce and StaticRescan tune the static source (defaults 100ms, 20s).
	StaticDebounce, StaticRescan time.Duration
	// Registerer receives the nodeagent_pods_* metrics (nil: none).
	Registerer prometheus.Registerer
	// ProbeRegisterer receives kubelet's prober_* metrics, which the node
	// API serves on /metrics/probes (nil: none).
	ProbeRegisterer prometheus.Registerer
	Clock           clock.WithTicker
	Logger          *slog.Logger
}

// Manager runs one worker per pod for the pods of its sources. It admits
// new pods (admission), hands PLEG events to their workers, and after every
// source has listed its pods cleans up what pods no source knows any more
// left behind.
type Manager struct {
	opts   Options
	deps   *workerDeps
	log    *slog.Logger
	status *status.Manager
	api    *source.APISource
	mirror *mirror.Client
	bc     record.EventBroadcaster
	// Secrets and ConfigMaps referenced by pods (nil without a client).
	secrets    *objcache.Cache[*v1.Secret]
	configMaps *objcache.Cache[*v1.ConfigMap]
	// services feeds the service-link variables; started on first use.
	services *serviceInformer

	// newWorker makes a new pod's worker (newPodWorkerPair; tests: a
	// podWorker around a fake syncer).
	newWorker func(pod *v1.Pod, src string) *podWorker

	mu        sync.Mutex
	ctx       context.Context
	workers   map[types.UID]*podWorker
	staticSet map[types.UID]bool
	wg        sync.WaitGroup

	// loopEntry is when the sync loop (dispatch) last began or ended a
	// pass, in clock nanoseconds; 0 until it runs (kubelet's
	// syncLoopMonitor).
	loopEntry atomic.Int64
	// sourcesReady: every pod source delivered its pods once.
	sourcesReady atomic.Bool
}

// New validates o and returns a Manager; nothing runs until Run.
func New(o Options) (*Manager, error) {
	var errs []error
	if o.NodeName == "" {
		errs = append(errs, errors.New("NodeName is required"))
	}
	if o.RootDir == "" {
		errs = append(errs, errors.New("RootDir is required"))
	}
	if o.Runtime == nil || o.PLEG == nil || o.PodCache == nil {
		errs = append(errs, errors.New("Runtime, PLEG and PodCache are required"))
	}
	if o.NodeAnyway == nil {
		errs = append(errs, errors.New("NodeAnyway is required (admission needs the node's allocatable)"))
	}
	if o.Client == nil && o.StaticPodPath == "" {
		errs = append(errs, errors.New("no pod source: neither an API client nor a staticPodPath"))
	}
	if err := o.Client.validate(); err != nil {
		errs = append(errs, err)
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("pods: %w", errors.Join(errs...))
	}
	if o.NetNSDir == "" {
		o.NetNSDir = "/run/nodeagent/netns"
	}
	if o.PodLogsDir == "" {
		o.PodLogsDir = crilog.DefaultPodLogsDir
	}
	if o.PodNSDir == "" {
		o.PodNSDir = o.NetNSDir + "-pods"
	}
	if o.PodNS == nil {
		o.PodNS = hostPodNS{}
	}
	if o.MaxPods <= 0 {
		o.MaxPods = 110
	}
	if o.Security.SeccompProfileRoot == "" {
		o.Security.SeccompProfileRoot = filepath.Join(o.RootDir, "seccomp")
	}
	if o.ResyncPeriod <= 0 {
		o.ResyncPeriod = time.Minute
	}
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.NetNS == nil {
		o.NetNS = hostNetNS{}
	}
	if o.Node == nil {
		o.Node = func() *v1.Node { return nil }
	}
	if o.Names.HostsPath == "" {
		o.Names.HostsPath = "/etc/hosts"
	}
	st := status.NewManager(o.Client.statusPods(), o.Logger)
	st.SetClock(o.Clock)
	m := newManager(o, &workerDeps{
		rt: o.Runtime, cache: o.PodCache, pleg: o.PLEG, status: st, netns: o.NetNS, net: o.Network,
		clock: o.Clock, met: newMetrics(o.Registerer), nodeName: o.NodeName, rootDir: o.RootDir, podLogsDir: o.PodLogsDir,
		netnsDir: o.NetNSDir, resync: o.ResyncPeriod, jitter: resyncJitter, security: o.Security,
	}, st)
	if o.Client != nil {
		m.api = source.NewAPISource(o.Client.Pods(""), o.NodeName, m, o.NodeSynced, o.Clock, o.Logger.With("source", "api"))
		m.status.SetLister(m.api.Lister())
		m.mirror = mirror.New(o.Client.mirrorPods(), m.api.Lister(), o.Node, o.Logger)
		m.bc = record.NewBroadcaster()
		m.deps.rec = m.bc.NewRecorder(o.Client.Scheme, v1.EventSource{Component: kubetypes.EventComponent, Host: o.NodeName})
	}
	m.deps.volumes = volume.NewManager(m.newProjector(), o.Volumes)
	if m.mirror != nil {
		m.deps.mirror = m.mirror
	}
	m.deps.nodeAnyway, m.deps.names = o.NodeAnyway, o.Names
	m.deps.cgroups, m.deps.devices, m.deps.cpus = o.Cgroups, o.Devices, o.CPUs
	m.deps.noCPUQuota = o.NoCPUQuota
	m.deps.userns = o.UserNamespaces
	m.deps.pulls = o.SecretPulledImages
	m.deps.puller = newImagePuller(o.ImagePulls, o.Clock)
	m.deps.resize = newPodResizer(o, m)
	m.deps.podNS, m.deps.podNSDir = o.PodNS, o.PodNSDir
	if p, ok := o.Runtime.(PauseRuntime); ok {
		m.deps.pauses = p
	}
	if iv, ok := o.Runtime.(ImageVolumeRuntime); ok && o.Admission.ImageVolume {
		m.deps.imageVols = iv
	}
	m.deps.runtimeHandlers = o.RuntimeHandlers
	m.deps.nodeKeyring = NewNodeKeyring(o)
	if o.Client != nil {
		// The caches of volumes (objects.go) serve the env too.
		m.deps.configMaps, m.deps.secrets = m.configMaps, m.secrets
		m.services = newServiceInformer(o.Client.Services)
		m.deps.services = m.services
		m.deps.runtimeClass = apiRuntimeClassHandler(o.Client.RuntimeClasses)
	}
	m.setupProbes(m.deps.rec)
	return m, nil
}

// newManager makes a Manager around its dependencies: o, validated and
// defaulted (its sources and admission settings), the workers'
// collaborators d (the Manager is their host) and the status manager st.
// New fills them with the real ones, the Manager's tests with fakes.
func newManager(o Options, d *workerDeps, st *status.Manager) *Manager {
	m := &Manager{
		opts:      o,
		log:       o.Logger,
		deps:      d,
		workers:   map[types.UID]*podWorker{},
		staticSet: map[types.UID]bool{},
		status:    st,
	}
	d.host = m
	if d.hostIP == nil {
		d.hostIP = m.hostIP
	}
	if d.hostIPs == nil {
		d.hostIPs = m.hostIPs
	}
	m.newWorker = func(pod *v1.Pod, src string) *podWorker {
		return newPodWorkerPair(m.deps, pod, src, m.log)
	}
	return m
}

// begin makes the Manager take pods (until ctx ends).
func (m *Manager) begin(ctx context.Context) {
	m.mu.Lock()
	m.ctx = ctx
	m.mu.Unlock()
}

// Run starts the sources and the workers and blocks until ctx is done and
// every goroutine it started has ended. Workers stop with it; their pods
// keep running in the runtime and are adopted by the next Run.
func (m *Manager) Run(ctx context.Context) error {
	var static *source.StaticSource
	if m.opts.StaticPodPath != "" {
		var err error
		static, err = source.NewStaticSource(source.StaticOptions{
			Dir: m.opts.StaticPodPath, NodeName: m.opts.NodeName, Decode: source.DecodeManifest,
			Debounce: m.opts.StaticDebounce, Rescan: m.opts.StaticRescan,
			Clock: m.opts.Clock, Logger: m.log.With("source", "static"),
			OnError: m.manifestError,
		})
		if err != nil {
			return err
		}
	}
	m.begin(ctx)
	if m.services != nil {
		m.services.run(ctx)
	}
	var wg sync.WaitGroup
	goRun := func(f func()) {
		wg.Add(1)
		go func() { defer wg.Done(); f() }()
	}
	if m.bc != nil {
		m.bc.StartRecordingToSink(m.opts.Client.Events)
		defer m.bc.Shutdown()
	}
	var synced []chan struct{}
	if m.api != nil {
		ch := make(chan struct{})
		synced = append(synced, ch)
		goRun(func() { m.api.Run(ctx, ch) })
		goRun(func() { m.status.Run(ctx) })
	}
	if static != nil {
		ch := make(chan struct{})
		synced = append(synced, ch)
		goRun(func() { static.Run(ctx) })
		goRun(func() { m.followStatic(ctx, static.Updates(), ch) })
	}
	goRun(func() { m.dispatch(ctx) })
	// Once every source listed its pods, containers of pods no source has
	// are orphans.
	goRun(func() {
		for _, ch := range synced {
			select {
			case <-ch:
			case <-ctx.Done():
				return
			}
		}
		m.log.Info("pod sources synced")
		m.sourcesReady.Store(true)
		m.cleanupOrphans(ctx)
		if m.mirror != nil {
			m.mirror.DeleteOrphans(ctx, m.staticHashes())
		}
	})
	<-ctx.Done()
	wg.Wait()
	m.wg.Wait()
	return nil
}

// syncLoopTick is how often the sync loop passes without events:
// kubelet's syncTicker.
const syncLoopTick = time.Second

// dispatch is the agent's sync loop: it hands PLEG events to the pods'
// workers (which sync on their own timers) and, as kubelet's syncLoop,
// records when each pass begins and ends, passing at least every
// syncLoopTick, so that SyncLoopHealthCheck sees a loop that is stuck.
func (m *Manager) dispatch(ctx context.Context) {
	tick := m.opts.Clock.NewTicker(syncLoopTick)
	defer tick.Stop()
	mark := func() {
		if m.opts.RuntimeErrors != nil && m.opts.RuntimeErrors() != nil {
			return // kubelet skips the pass ("Skipping pod synchronization")
		}
		m.loopEntry.Store(m.opts.Clock.Now().UnixNano())
	}
	for {
		mark()
		select {
		case <-ctx.Done():
			return
		case <-tick.C():
		case ev := <-m.opts.PLEG.Watch():
			m.mu.Lock()
			w := m.workers[ev.PodUID]
			m.mu.Unlock()
			if w != nil {
				w.containersChanged()
			}
		}
		mark()
	}
}

// LatestLoopEntryTime is when the sync loop last began or ended a pass;
// zero before it runs (kubelet's).
func (m *Manager) LatestLoopEntryTime() time.Time {
	n := m.loopEntry.Load()
	if n == 0 {
		return time.Time{}
	}
	return time.Unix(0, n)
}

// errSyncLoopSlow is kubelet's syncloop health check's failure.
var errSyncLoopSlow = errors.New("sync Loop took longer than expected")

// SyncLoopHealthCheck is kubelet's syncloop health check (the node
// API's /healthz/syncloop): it fails once the sync loop has not passed
// for longer than twice syncFrequency (ResyncPeriod), and never less
// than 5 minutes. A loop that has not run yet is healthy.
func (m *Manager) SyncLoopHealthCheck() error {
	bound := max(2*m.opts.ResyncPeriod, 5*time.Minute)
	last := m.LatestLoopEntryTime()
	if !last.IsZero() && m.opts.Clock.Now().After(last.Add(bound)) {
		return errSyncLoopSlow
	}
	return nil
}

// followStatic applies the static source's snapshots; synced is closed
// after the first.
func (m *Manager) followStatic(ctx context.Context, updates <-chan []*v1.Pod, synced chan<- struct{}) {
	first := true
	for {
		select {
		case <-ctx.Done():
			return
		case pods := <-updates:
			seen := map[types.UID]bool{}
			for _, p := range pods {
				seen[p.UID] = true
			}
			m.mu.Lock()
			var gone []types.UID
			for uid := range m.staticSet {
				if !seen[uid] {
					gone = append(gone, uid)
				}
			}
			m.staticSet = seen
			m.mu.Unlock()
			// Removals first: an edited manifest's new pod then waits for
			// the old one to stop (terminatingSibling).
			for _, uid := range gone {
				m.PodRemove(uid)
			}
			for _, p := range pods {
				m.upsert(kubetypes.SourceFile, p)
			}
			if first {
				first = false
				close(synced)
			}
		}
	}
}

// PodUpdate takes an API pod (source.Handler).
func (m *Manager) PodUpdate(pod *v1.Pod) { m.upsert(kubetypes.SourceAPI, pod) }

// PodRemove tells a pod's worker that its source dropped the pod
// (source.Handler).
func (m *Manager) PodRemove(uid types.UID) {
	m.mu.Lock()
	w := m.workers[uid]
	m.mu.Unlock()
	if w != nil {
		w.remove()
	}
}

// MirrorUpdate requeues the static pod's status; a mirror pod someone
// deleted is replaced by its static pod's worker, as kubelet does
// (source.Handler).
func (m *Manager) MirrorUpdate(mp *v1.Pod) {
	m.status.MirrorChanged(mp)
	if mp.DeletionTimestamp != nil {
		m.pokeByName(kubetypes.FullName(mp))
	}
}

// MirrorRemove wakes the static pod's worker to make a new mirror pod
// (source.Handler).
func (m *Manager) MirrorRemove(mp *v1.Pod) { m.pokeByName(kubetypes.FullName(mp)) }

var _ source.Handler = (*Manager)(nil)

// upsert adds or updates a pod from a source: a new pod is admitted and
// gets a worker; a known one gets the new spec.
func (m *Manager) upsert(src string, pod *v1.Pod) {
	if m.known(pod) {
		return
	}
	// Admission's node, read without m.mu: before the Node informer has
	// synced it is computed from the host (/proc, statfs).
	node, nodeErr := m.nodeForAdmission()
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.ctx == nil || m.ctx.Err() != nil {
		return
	}
	if w := m.workers[pod.UID]; w != nil { // another source won the race
		w.update(pod)
		return
	}
	w := m.newWorker(pod, src)
	if pod.DeletionTimestamp == nil && !status.PodIsTerminal(pod.Status) {
		if r := m.admitLocked(pod, node, nodeErr); r != nil {
			w.reject(*r)
		} else {
			m.deps.resize.admitted(pod)
		}
	}
	m.startLocked(w)
}

// known hands pod to its worker and reports true when it has one (or the
// manager is not running).
func (m *Manager) known(pod *v1.Pod) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.ctx == nil || m.ctx.Err() != nil {
		return true
	}
	if w := m.workers[pod.UID]; w != nil {
		w.update(pod)
		return true
	}
	return false
}

// nodeForAdmission is the node whose allocatable admission checks against.
func (m *Manager) nodeForAdmission() (*v1.Node, error) {
	m.mu.Lock()
	ctx := m.ctx
	m.mu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, nodeAnywayTimeout)
	defer cancel()
	return m.opts.NodeAnyway(ctx)
}

// startLocked registers and starts a worker; m.mu is held.
func (m *Manager) startLocked(w *podWorker) {
	m.workers[w.uid] = w
	m.deps.met.workers.Inc()
	m.wg.Add(1)
	go w.run(m.ctx)
}

// admitLocked decides whether a new pod may run: its spec must be in the
// supported subset, fit the node's resources and pass kubelet's other
// predicates (node affinity, node name, host ports, NoExecute taints).
func (m *Manager) admitLocked(pod *v1.Pod, node *v1.Node, nodeErr error) *status.Waiting {
	if f := m.opts.Admit; f != nil {
		if ok, reason, msg := f(pod); !ok {
			return &status.Waiting{Reason: reason, Message: msg}
		}
	}
	if r := m.shutdownRejection(); r != nil {
		return r
	}
	if ok, reason, msg := admission.AdmitSecurity(pod, m.opts.Admission); !ok {
		return &status.Waiting{Reason: reason, Message: msg}
	}
	if ok, reason, msg := admission.AdmitFeatures(pod, m.opts.Admission); !ok {
		return &status.Waiting{Reason: reason, Message: msg}
	}
	if bad := admission.Unsupported(pod); len(bad) > 0 {
		return &status.Waiting{Reason: admission.ReasonUnsupportedPodSpec, Message: admission.UnsupportedMessage(bad)}
	}
	// As kubelet, with the allocations of resized pods (an agent restart
	// admits a pod again with what it was allocated).
	pod = m.deps.resize.withAllocation(pod)
	admitted := m.admittedLocked(pod.UID)
	holding := m.activeLocked()
	if nodeErr != nil {
		m.log.Error("cannot get node info to admit a pod", "pod", kubetypes.FullName(pod), "err", nodeErr)
		return &status.Waiting{Reason: admission.ReasonInvalidNodeInfo, Message: "Kubelet cannot get node info."}
	}
	allocatable := node.Status.Allocatable
	// kubelet's resource allocator admit handler (its topology manager)
	// runs before its predicates: devices (the plugin's Allocate) and
	// CPUs are allocated at admission, and the fit sees at least what is
	// allocated.
	allocate := func() error {
		if d := m.opts.Devices; d != nil {
			if err := d.Allocate(pod, holding); err != nil {
				return err
			}
			allocatable = d.SanitizeAllocatable(allocatable)
		}
		if c := m.opts.CPUs; c != nil {
			// kubelet's active pods include the pod being admitted.
			if err := c.Allocate(pod, append(holding, pod)); err != nil {
				return err
			}
		}
		return nil
	}
	var err error
	if t := m.opts.Topology; t != nil {
		err = t.Admit(pod, append(holding[:len(holding):len(holding)], pod), allocate)
	} else {
		err = allocate()
	}
	if err != nil {
		// kubelet's GetPodAdmitResult: an error with its own reason
		// (TopologyAffinityError) keeps it and its message.
		var typed interface {
			error
			Type() string
		}
		if errors.As(err, &typed) {
			return &status.Waiting{Reason: typed.Type(), Message: typed.Error()}
		}
		return &status.Waiting{Reason: admission.ReasonUnexpectedAdmissionError,
			Message: fmt.Sprintf("Allocate failed due to %v, which is unexpected", err)}
	}
	if ok, reason, msg := admission.FitsNode(pod, admitted, allocatable, m.opts.MaxPods); !ok {
		return &status.Waiting{Reason: reason, Message: msg}
	}
	if ok, reason, msg := admission.AdmitPredicates(pod, admitted, node, kubetypes.IsStaticPod(pod)); !ok {
		return &status.Waiting{Reason: reason, Message: msg}
	}
	return nil
}

// activeLocked are the pods whose devices and CPUs stay allocated:
// kubelet's active pods, where a pod being deleted or removed stays until
// its containers stopped; m.mu is held.
func (m *Manager) activeLocked() []*v1.Pod {
	var holding []*v1.Pod
	for _, w := range m.workers {
		p, _ := w.snapshot()
		if w.rejected() || w.terminal.Load() {
			continue
		}
		holding = append(holding, p)
	}
	return holding
}

// HoldingPods are the pods whose containers may run, those being
// stopped included (kubelet's active pods as its CPU manager sees them;
// the reconcile loop releases the CPUs of the others).
func (m *Manager) HoldingPods() []*v1.Pod {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.activeLocked()
}

// SourcesReady reports whether every pod source delivered its pods once
// (kubelet's sourcesReady): before, a pod missing from HoldingPods may
// just not be known yet.
func (m *Manager) SourcesReady() bool { return m.sourcesReady.Load() }

// admittedLocked are the pods admitted and not ending but uid, with their
// allocations, by UID; m.mu is held.
func (m *Manager) admittedLocked(uid types.UID) []*v1.Pod {
	var admitted []*v1.Pod
	for _, w := range m.workers {
		p, removed := w.snapshot()
		if p.UID == uid || removed || w.rejected() || p.DeletionTimestamp != nil || w.terminal.Load() {
			continue
		}
		admitted = append(admitted, m.deps.resize.withAllocation(p))
	}
	sort.Slice(admitted, func(i, j int) bool { return admitted[i].UID < admitted[j].UID })
	return admitted
}

// admittedOthers is admittedLocked for a pod's resize.
func (m *Manager) admittedOthers(uid types.UID) []*v1.Pod {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.admittedLocked(uid)
}

// pokeByName wakes the workers of the static pods with this full name.
func (m *Manager) pokeByName(name string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, w := range m.workers {
		if w.source != kubetypes.SourceFile {
			continue
		}
		if p, _ := w.snapshot(); kubetypes.FullName(p) == name {
			w.poke()
		}
	}
}

// staticHashes maps the full names of the static pods that run to their
// config hashes.
func (m *Manager) staticHashes() map[string]string {
	m.mu.Lock()
	defer m.mu.Unlock()
	static := map[string]string{}
	for _, w := range m.workers {
		if w.source == kubetypes.SourceFile {
			if p, removed := w.snapshot(); !removed {
				static[kubetypes.FullName(p)] = p.Annotations[kubetypes.AnnotationConfigHash]
			}
		}
	}
	return static
}

// workerDone is called by a worker's goroutine as it ends.
func (m *Manager) workerDone(w *podWorker) {
	if m.deps.probes != nil {
		m.deps.probes.RemovePod(w.uid)
	}
	m.mu.Lock()
	if m.workers[w.uid] == w {
		delete(m.workers, w.uid)
		m.deps.met.workers.Dec()
	}
	// A worker that ends while the manager runs has removed its pod.
	gone := m.workers[w.uid] == nil && m.ctx != nil && m.ctx.Err() == nil
	p, _ := w.snapshot()
	for ouid, o := range m.workers {
		if op, _ := o.snapshot(); kubetypes.FullName(op) == kubetypes.FullName(p) {
			o.poke() // it may have waited for this one to end
		} else if gone && m.deps.resize.deferred(ouid) {
			o.poke() // as kubelet, a deferred resize is retried when a pod goes
		}
	}
	m.mu.Unlock()
	if gone {
		m.removePodLogs(w.uid)
		m.deps.resize.remove(w.uid)
	}
	m.wg.Done()
}

// terminatingSibling reports whether another pod than uid with pod's
// namespace/name is still being stopped.
func (m *Manager) terminatingSibling(uid types.UID, pod *v1.Pod) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	for ouid, o := range m.workers {
		if ouid == uid {
			continue
		}
		op, removed := o.snapshot()
		if kubetypes.FullName(op) == kubetypes.FullName(pod) && (removed || op.DeletionTimestamp != nil) {
			return true
		}
	}
	return false
}

// Pods returns the UIDs of the pods that have a worker (for tests and
// debugging).
func (m *Manager) Pods() []types.UID {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]types.UID, 0, len(m.workers))
	for uid := range m.workers {
		out = append(out, uid)
	}
	return out
}

// cleanupOrphans stops and removes the containers of pods no source has
// (a static file deleted or an API pod force-deleted while the agent was
// down), and the directories and network namespaces pods left without
// containers.
func (m *Manager) cleanupOrphans(ctx context.Context) {
	lctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	pods, err := m.opts.Runtime.ListPods(lctx)
	if err != nil {
		m.log.Warn("cannot list containers to clean up orphans", "err", err)
		return
	}
	refs := map[types.UID]runtime.PodRef{}
	for _, p := range pods {
		refs[p.UID] = p.PodRef
	}
	m.pauseOrphans(lctx, refs)
	// Pod directories and network namespaces without containers (the agent
	// stopped in the middle of a cleanup) are orphans too.
	for _, dir := range []string{filepath.Join(m.opts.RootDir, "pods"), m.opts.NetNSDir, m.opts.PodNSDir} {
		es, _ := os.ReadDir(dir)
		for _, e := range es {
			if uid := types.UID(e.Name()); refs[uid].UID == "" {
				refs[uid] = runtime.PodRef{UID: uid}
			}
		}
	}
	for _, uid := range m.podLogUIDs() {
		if refs[uid].UID == "" {
			refs[uid] = runtime.PodRef{UID: uid}
		}
	}
	m.deps.resize.removeOrphans(func(uid types.UID) bool {
		m.mu.Lock()
		defer m.mu.Unlock()
		return m.workers[uid] != nil || refs[uid].UID != ""
	})
	if m.deps.userns != nil {
		// Pods on disk are cleaned up by their orphan workers below, which
		// release their IDs; this frees those of pods gone from disk.
		err := m.deps.userns.ReleaseOrphans(func(uid types.UID) bool {
			m.mu.Lock()
			defer m.mu.Unlock()
			return m.workers[uid] != nil || refs[uid].UID != ""
		})
		if err != nil {
			m.log.Warn("cannot release the user namespaces of pods gone", "err", err)
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for uid, ref := range refs {
		if _, known := m.workers[uid]; known || m.ctx.Err() != nil {
			continue
		}
		m.log.Info("cleaning up after a pod no source has", "pod", ref.Namespace+"/"+ref.Name, "podUID", uid)
		m.startLocked(newOrphanWorker(m.deps, ref, m.log))
	}
}

// manifestError reports a static pod file that cannot be used as an Event
// on the Node (the static source logs it).
func (m *Manager) manifestError(e source.ManifestError) {
	if m.deps.rec == nil {
		return
	}
	node := &v1.ObjectReference{Kind: "Node", Name: m.opts.NodeName, UID: types.UID(m.opts.NodeName)}
	if n := m.opts.Node(); n != nil {
		node.UID = n.UID
	}
	m.deps.rec.Eventf(node, v1.EventTypeWarning, "FailedStaticPodManifest", "static pod manifest %s skipped: %v", e.Path, e.Err)
}

func (m *Manager) hostIP() string {
	if m.opts.HostIP != nil {
		return m.opts.HostIP()
	}
	if n := m.opts.Node(); n != nil {
		for _, a := range n.Status.Addresses {
			if a.Type == v1.NodeInternalIP {
				return a.Address
			}
		}
	}
	return ""
}

// hostIPs is status.hostIPs: the node's IP, then its first address of the
// other family (kubelet's getHostIPsAnyWay).
func (m *Manager) hostIPs() []string {
	first := m.hostIP()
	if first == "" {
		return nil
	}
	out := []string{first}
	n := m.opts.Node()
	if n == nil {
		return out
	}
	is6 := func(s string) bool { ip := net.ParseIP(s); return ip != nil && ip.To4() == nil }
	for _, a := range n.Status.Addresses {
		if a.Type == v1.NodeInternalIP && net.ParseIP(a.Address) != nil && is6(a.Address) != is6(first) {
			return append(out, a.Address)
		}
	}
	return out
}

type hostNetNS struct{}

func (hostNetNS) Create(p string) error { return netns.Create(p) }
func (hostNetNS) Remove(p string) error { return netns.Remove(p) }

var (
	_ Runtime  = (*runtime.Runtime)(nil)
	_ PLEG     = (*pleg.PLEG)(nil)
	_ PodCache = (*pleg.Cache)(nil)
)

// GetPods returns the pods the agent runs, with their last computed status
// (the node API's /pods). The pods are copies.
func (m *Manager) GetPods() []*v1.Pod {
	m.mu.Lock()
	var pods []*v1.Pod
	for _, w := range m.workers {
		if p, removed := w.snapshot(); !removed && w.source != sourceOrphan {
			pods = append(pods, p)
		}
	}
	m.mu.Unlock()
	out := make([]*v1.Pod, 0, len(pods))
	for _, p := range pods {
		c := p.DeepCopy()
		if st, ok := m.status.Get(p.UID); ok {
			c.Status = st
		}
		out = append(out, c)
	}
	sort.Slice(out, func(i, j int) bool { return kubetypes.FullName(out[i]) < kubetypes.FullName(out[j]) })
	return out
}

// GetPodByName returns the pod the agent runs under that name (a static
// pod by its own name, as kubelet's pod manager): the one not being
// stopped, if another one with that name is.
func (m *Manager) GetPodByName(namespace, name string) (*v1.Pod, bool) {
	var found *v1.Pod
	for _, p := range m.GetPods() {
		if p.Namespace != namespace || p.Name != name {
			continue
		}
		if found == nil || (found.DeletionTimestamp != nil && p.DeletionTimestamp == nil) {
			found = p
		}
	}
	return found, found != nil
}
