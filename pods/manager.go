package pods

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/nodeagent/nodeagent/internal/netns"
	"github.com/nodeagent/nodeagent/pleg"
	"github.com/nodeagent/nodeagent/runtime"
)

// Runtime is what the pods package needs from the container runtime;
// *runtime.Runtime implements it.
type Runtime interface {
	CreateContainer(ctx context.Context, spec runtime.ContainerSpec) (string, error)
	StartContainer(ctx context.Context, id string) error
	StopContainer(ctx context.Context, id string, grace time.Duration) error
	RemoveContainer(ctx context.Context, id string) error
	ListPods(ctx context.Context) ([]runtime.Pod, error)
	GetImage(ctx context.Context, ref string) (runtime.Image, error)
	PullImage(ctx context.Context, ref string) (runtime.Image, error)
	// RemovePodCgroup removes the pod's (empty) cgroup.
	RemovePodCgroup(uid types.UID) error
}

var _ Runtime = (*runtime.Runtime)(nil)

// PLEG is what the workers need from the PLEG; *pleg.PLEG implements it.
type PLEG interface {
	Watch() <-chan pleg.Event
	ExpectWithin(uid types.UID, containerID string, t pleg.EventType, ttl time.Duration)
	WaitExpected(ctx context.Context, uid types.UID) error
	Cache() *pleg.Cache
}

var _ PLEG = (*pleg.PLEG)(nil)

// NetNS creates and removes pods' network namespaces.
type NetNS interface {
	Create(path string) error
	Remove(path string) error
}

type hostNetNS struct{}

func (hostNetNS) Create(p string) error { return netns.Create(p) }
func (hostNetNS) Remove(p string) error { return netns.Remove(p) }

// nodeAnywayTimeout bounds the admission's wait for the node's info.
const nodeAnywayTimeout = 10 * time.Second

// Options configure the Manager.
type Options struct {
	NodeName string
	// Client is the node's API client; nil runs static pods only, without
	// mirror pods or status.
	Client kubernetes.Interface
	// StaticPodPath is the static manifest directory; "" disables it.
	StaticPodPath string
	// RootDir holds pod directories (volumes) and container logs.
	RootDir string
	// NetNSDir holds the pods' network namespace mounts (default
	// /run/nodeagent/netns).
	NetNSDir string
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
	NetNS   NetNS // default: internal/netns
	// ResyncPeriod is how often a worker syncs without news (default 1m).
	ResyncPeriod time.Duration
	// StaticDebounce and StaticRescan tune the static source (defaults 100ms, 20s).
	StaticDebounce, StaticRescan time.Duration
	// Registerer receives the nodeagent_pods_* metrics (nil: none).
	Registerer prometheus.Registerer
	Clock      clock.WithTicker
	Logger     *slog.Logger
}

// Manager runs one worker per pod for the pods of its sources.
type Manager struct {
	opts   Options
	rt     Runtime
	pleg   PLEG
	netns  NetNS
	clock  clock.WithTicker
	log    *slog.Logger
	status *statusManager
	met    *metrics
	api    *apiSource
	rec    record.EventRecorder
	// projector writes projected volumes (service account tokens); nil
	// without an API client.
	projector *Projector
	bc        record.EventBroadcaster

	mu        sync.Mutex
	ctx       context.Context
	workers   map[types.UID]*worker
	staticSet map[types.UID]bool
	wg        sync.WaitGroup
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
	if o.Runtime == nil || o.PLEG == nil {
		errs = append(errs, errors.New("Runtime and PLEG are required"))
	}
	if o.NodeAnyway == nil {
		errs = append(errs, errors.New("NodeAnyway is required (admission needs the node's allocatable)"))
	}
	if o.Client == nil && o.StaticPodPath == "" {
		errs = append(errs, errors.New("no pod source: neither an API client nor a staticPodPath"))
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("pods: %w", errors.Join(errs...))
	}
	if o.NetNSDir == "" {
		o.NetNSDir = "/run/nodeagent/netns"
	}
	if o.MaxPods <= 0 {
		o.MaxPods = 110
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
	if o.NodeSynced == nil {
		o.NodeSynced = func() bool { return true }
	}
	m := &Manager{
		opts:      o,
		rt:        o.Runtime,
		pleg:      o.PLEG,
		netns:     o.NetNS,
		clock:     o.Clock,
		log:       o.Logger,
		workers:   map[types.UID]*worker{},
		staticSet: map[types.UID]bool{},
		met:       newMetrics(o.Registerer),
	}
	m.status = newStatusManager(o.Client, o.Logger)
	if o.Client != nil {
		m.api = newAPISource(o.Client, o.NodeName, m)
		m.projector = NewProjector(o.Client, o.Clock, o.Logger)
		m.bc = record.NewBroadcaster()
		m.rec = m.bc.NewRecorder(eventScheme(), v1.EventSource{Component: "nodeagent", Host: o.NodeName})
	}
	return m, nil
}

// Run starts the sources and the workers and blocks until ctx is done.
// Workers stop with it; their pods keep running in the runtime and are
// adopted by the next Run.
func (m *Manager) Run(ctx context.Context) error {
	m.mu.Lock()
	m.ctx = ctx
	m.mu.Unlock()
	var wg sync.WaitGroup
	if m.bc != nil {
		startEventSink(m.bc, m.opts.Client)
		defer m.bc.Shutdown()
	}
	synced := make(chan struct{}, 2)
	sources := 0
	if m.api != nil {
		sources++
		m.status.lister = m.api.lister
		wg.Add(2)
		go func() { defer wg.Done(); m.api.run(ctx, synced) }()
		go func() { defer wg.Done(); m.status.run(ctx) }()
	}
	if m.opts.StaticPodPath != "" {
		src, err := NewStaticSource(StaticOptions{
			Dir: m.opts.StaticPodPath, NodeName: m.opts.NodeName, Decode: DecodeManifest,
			Debounce: m.opts.StaticDebounce, Rescan: m.opts.StaticRescan,
			Clock: m.clock, Logger: m.log.With("source", "static"),
			OnError: m.manifestError,
		})
		if err != nil {
			return err
		}
		sources++
		wg.Add(2)
		go func() { defer wg.Done(); src.Run(ctx) }()
		go func() { defer wg.Done(); m.followStatic(ctx, src.Updates(), synced) }()
	}
	wg.Add(1)
	go func() { defer wg.Done(); m.dispatch(ctx) }()
	// Once every source listed its pods, containers of pods no source has
	// are orphans.
	go func() {
		for i := 0; i < sources; i++ {
			select {
			case <-synced:
			case <-ctx.Done():
				return
			}
		}
		m.log.Info("pod sources synced")
		m.cleanupOrphans(ctx)
		m.cleanupMirrors(ctx)
	}()
	<-ctx.Done()
	wg.Wait()
	m.wg.Wait()
	return nil
}

// dispatch hands PLEG events to the pods' workers.
func (m *Manager) dispatch(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case ev := <-m.pleg.Watch():
			m.mu.Lock()
			w := m.workers[ev.PodUID]
			m.mu.Unlock()
			if w != nil {
				w.poke()
			}
		}
	}
}

// followStatic applies the static source's snapshots.
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
				m.forget(uid)
			}
			for _, p := range pods {
				m.upsert(SourceFile, p)
			}
			if first {
				first = false
				synced <- struct{}{}
			}
		}
	}
}

// upsert adds or updates a pod from a source: a new pod is admitted and
// gets a worker; a known one gets the new spec.
func (m *Manager) upsert(source string, pod *v1.Pod) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.ctx == nil || m.ctx.Err() != nil {
		return
	}
	if w := m.workers[pod.UID]; w != nil {
		w.update(pod)
		return
	}
	w := m.newWorker(pod, source)
	if pod.Status.StartTime != nil {
		w.startTime = pod.Status.StartTime.Time
	}
	if pod.DeletionTimestamp == nil && !PodIsTerminal(pod.Status) {
		if r := m.admitLocked(pod); r != nil {
			w.rejection = r
			m.met.rejected.WithLabelValues(r.Reason).Inc()
			w.log.Warn("pod rejected", "reason", r.Reason, "message", r.Message)
			m.event(pod, v1.EventTypeWarning, r.Reason, r.Message)
		}
	}
	m.startLocked(w)
}

// newWorker makes a pod's worker (not started).
func (m *Manager) newWorker(pod *v1.Pod, source string) *worker {
	now := m.clock.Now()
	return &worker{
		m: m, uid: pod.UID, pod: pod, source: source,
		log:          m.log.With("pod", fullName(pod), "podUID", pod.UID),
		wake:         make(chan struct{}, 1),
		backoff:      map[string]crashLoop{},
		errs:         map[string]Waiting{},
		imageIDs:     map[string]string{},
		reaped:       map[string]bool{},
		backoffEvent: map[string]string{},
		startTime:    now,
		seen:         now,
	}
}

// startLocked registers and starts a worker; m.mu is held.
func (m *Manager) startLocked(w *worker) {
	m.workers[w.uid] = w
	m.met.workers.Inc()
	m.wg.Add(1)
	go w.run(m.ctx)
}

// admitLocked decides whether a new pod may run: its spec must be in the
// supported subset and fit the node.
func (m *Manager) admitLocked(pod *v1.Pod) *Waiting {
	if bad := Unsupported(pod); len(bad) > 0 {
		return &Waiting{Reason: ReasonUnsupportedPodSpec, Message: UnsupportedMessage(bad)}
	}
	var admitted []*v1.Pod
	for _, w := range m.workers {
		p, removed := w.snapshot()
		if removed || w.rejection != nil || p.DeletionTimestamp != nil || w.terminal.Load() {
			continue
		}
		admitted = append(admitted, p)
	}
	sort.Slice(admitted, func(i, j int) bool { return admitted[i].UID < admitted[j].UID })
	ctx, cancel := context.WithTimeout(m.ctx, nodeAnywayTimeout)
	node, err := m.opts.NodeAnyway(ctx)
	cancel()
	if err != nil {
		m.log.Error("cannot get node info to admit a pod", "pod", fullName(pod), "err", err)
		return &Waiting{Reason: ReasonInvalidNodeInfo, Message: "Kubelet cannot get node info."}
	}
	if ok, reason, msg := FitsNode(pod, admitted, node.Status.Allocatable, m.opts.MaxPods); !ok {
		return &Waiting{Reason: reason, Message: msg}
	}
	return nil
}

// forget tells a pod's worker that its source dropped the pod.
func (m *Manager) forget(uid types.UID) {
	m.mu.Lock()
	w := m.workers[uid]
	m.mu.Unlock()
	if w != nil {
		w.remove()
	}
}

// pokeByName wakes the workers of the static pods with this full name.
func (m *Manager) pokeByName(name string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, w := range m.workers {
		if w.source != SourceFile {
			continue
		}
		if p, _ := w.snapshot(); fullName(p) == name {
			w.poke()
		}
	}
}

func (m *Manager) workerDone(w *worker) {
	m.mu.Lock()
	if m.workers[w.uid] == w {
		delete(m.workers, w.uid)
		m.met.workers.Dec()
	}
	p, _ := w.snapshot()
	for _, o := range m.workers {
		if op, _ := o.snapshot(); fullName(op) == fullName(p) {
			o.poke() // it may have waited for this one to end
		}
	}
	m.mu.Unlock()
	m.wg.Done()
}

// terminatingSibling reports whether another pod with w's namespace/name
// is still being stopped.
func (m *Manager) terminatingSibling(w *worker, pod *v1.Pod) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	for uid, o := range m.workers {
		if uid == w.uid {
			continue
		}
		op, removed := o.snapshot()
		if fullName(op) == fullName(pod) && (removed || op.DeletionTimestamp != nil) {
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
// down).
func (m *Manager) cleanupOrphans(ctx context.Context) {
	lctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	pods, err := m.rt.ListPods(lctx)
	if err != nil {
		m.log.Warn("cannot list containers to clean up orphans", "err", err)
		return
	}
	refs := map[types.UID]runtime.PodRef{}
	for _, p := range pods {
		refs[p.UID] = p.PodRef
	}
	// Pod directories and network namespaces without containers (the agent
	// stopped in the middle of a cleanup) are orphans too.
	for _, dir := range []string{filepath.Join(m.opts.RootDir, "pods"), m.opts.NetNSDir} {
		es, _ := os.ReadDir(dir)
		for _, e := range es {
			if uid := types.UID(e.Name()); refs[uid].UID == "" {
				refs[uid] = runtime.PodRef{UID: uid}
			}
		}
	}
	for uid, ref := range refs {
		m.mu.Lock()
		if _, known := m.workers[uid]; !known && m.ctx.Err() == nil {
			m.log.Info("cleaning up after a pod no source has", "pod", ref.Namespace+"/"+ref.Name, "podUID", uid)
			orphan := &v1.Pod{}
			orphan.UID, orphan.Name, orphan.Namespace = uid, ref.Name, ref.Namespace
			grace := int64(2)
			orphan.Spec.TerminationGracePeriodSeconds = &grace
			w := m.newWorker(orphan, "orphan")
			w.removed = true
			m.startLocked(w)
		}
		m.mu.Unlock()
	}
}

// manifestError reports a static pod file that cannot be used as an Event
// on the Node (the static source logs it).
func (m *Manager) manifestError(e ManifestError) {
	if m.rec == nil {
		return
	}
	node := &v1.ObjectReference{Kind: "Node", Name: m.opts.NodeName, UID: types.UID(m.opts.NodeName)}
	if n := m.opts.Node(); n != nil {
		node.UID = n.UID
	}
	m.rec.Eventf(node, v1.EventTypeWarning, "FailedStaticPodManifest", "static pod manifest %s skipped: %v", e.Path, e.Err)
}

// event records an event on a pod (API pods, and static pods through their
// mirror pod's name).
func (m *Manager) event(pod *v1.Pod, typ, reason, msg string) {
	if m.rec == nil {
		return
	}
	m.rec.Event(pod, typ, reason, msg)
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
