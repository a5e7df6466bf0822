package nodestatus

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	goruntime "runtime"
	"sync"
	"sync/atomic"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"

	"github.com/nodeagent/nodeagent/internal/evictionapi"
)

const (
	// fastUpdateInterval is the compute period while the node has not yet
	// reported Ready, for at most fastUpdateWindow after Run starts.
	fastUpdateInterval = time.Second
	fastUpdateWindow   = 2 * time.Minute
	registerMaxBackoff = 7 * time.Second // kubelet's
)

// Manager registers the Node and keeps its status. See the package doc.
type Manager struct {
	cfg     *config
	log     *slog.Logger
	clock   clock.Clock
	setters []Setter
	rand    func() float64

	freqMu          sync.Mutex
	updateFrequency time.Duration
	reportFrequency time.Duration
	kick            chan struct{} // 1-buffered: coalesces SetFrequencies and SyncSoon wake-ups

	lastReport  atomic.Int64 // unix nanos of the last successful write; 0 = none
	readyPosted atomic.Bool  // the last write said Ready=True

	lister atomic.Pointer[corelisters.NodeLister] // set by Run once the informer synced

	observed atomic.Pointer[evictionapi.Observation] // the last sync's signals (Signals)
	crossMu  sync.Mutex
	crossed  map[v1.NodeConditionType]time.Time // crossings Signals saw between syncs
	updated  chan struct{}                      // 1-buffered: a sync published signals (SignalsUpdated)

	// Owned by whoever holds syncMu (Register, SyncOnce).
	syncMu       sync.Mutex
	node         *v1.Node      // the Node as last read or written by us
	jitter       time.Duration // current report jitter (ShouldReport)
	pressureSeen map[v1.NodeConditionType]time.Time
	in           inputs
	setterErrs   map[int]string

	version       *probe[[2]string]
	images        *probe[[]Image]
	runtimeHealth *probe[struct{}]
	plegHealth    *probe[struct{}]
}

// inputs are the facts gathered once per sync; the setters read them, so a
// retry within one report does not call the runtime again.
type inputs struct {
	now         time.Time
	capacity    v1.ResourceList
	capacityErr error
	// device plugins' resources (Options.DevicePlugins)
	devCapacity, devAllocatable v1.ResourceList
	devRemoved                  []string
	info                        v1.NodeSystemInfo
	infoErr                     error
	pressure                    map[v1.NodeConditionType]bool
	readyErrs                   []error
	imagesOK                    bool
	images                      []Image
	imagesErr                   error
	observations                map[string]observation
}

// New validates o and returns a Manager. It does not talk to the API server.
func New(o Options) (*Manager, error) {
	cfg, err := o.validate()
	if err != nil {
		return nil, err
	}
	m := &Manager{
		cfg:             cfg,
		log:             cfg.Logger.With("node", cfg.NodeName),
		clock:           cfg.Clock,
		rand:            cfg.Rand,
		updateFrequency: cfg.UpdateFrequency,
		reportFrequency: cfg.ReportFrequency,
		kick:            make(chan struct{}, 1),
		updated:         make(chan struct{}, 1),
		pressureSeen:    map[v1.NodeConditionType]time.Time{},
		setterErrs:      map[int]string{},
	}
	if m.rand == nil {
		m.rand = rand.Float64
	}
	to := cfg.RuntimeCallTimeout
	if f := cfg.RuntimeVersion; f != nil {
		m.version = newProbe("container runtime version", cfg.Clock, to, func(ctx context.Context) ([2]string, error) {
			n, v, err := f(ctx)
			return [2]string{n, v}, err
		})
	}
	if f := cfg.ListImages; f != nil {
		m.images = newProbe("list images", cfg.Clock, to, f)
	}
	if f := cfg.RuntimeHealthy; f != nil {
		m.runtimeHealth = newProbe("container runtime status", cfg.Clock, to, func(context.Context) (struct{}, error) { return struct{}{}, f() })
	}
	if f := cfg.PLEGHealthy; f != nil {
		m.plegHealth = newProbe("PLEG health", cfg.Clock, to, func(context.Context) (struct{}, error) { return struct{}{}, f() })
	}
	now := func() time.Time { return m.in.now }
	m.setters = []Setter{
		NodeAddress(m.internalIP, cfg.Hostname),
		Capacity(func() (v1.ResourceList, error) { return m.in.capacity, m.in.capacityErr }, cfg.reserved,
			func(c v1.ResourceList) v1.ResourceList { return hardEvictionReservation(cfg.thresholds, c) }),
		DevicePlugins(func() (v1.ResourceList, v1.ResourceList, []string) {
			return m.in.devCapacity, m.in.devAllocatable, m.in.devRemoved
		}),
		NodeInfo(func(context.Context) (v1.NodeSystemInfo, error) { return m.in.info, m.in.infoErr }),
		Images(cfg.MaxImages, func(context.Context) ([]Image, bool, error) { return m.in.images, m.in.imagesOK, m.in.imagesErr }),
		PressureCondition(v1.NodeMemoryPressure, now, func() bool { return m.in.pressure[v1.NodeMemoryPressure] }),
		PressureCondition(v1.NodeDiskPressure, now, func() bool { return m.in.pressure[v1.NodeDiskPressure] }),
		PressureCondition(v1.NodePIDPressure, now, func() bool { return m.in.pressure[v1.NodePIDPressure] }),
		ReadyCondition(now, func() []error { return m.in.readyErrs }),
		DaemonEndpoints(cfg.KubeletPort),
		NodeFeatures(),
	}
	if cfg.VolumesInUse != nil {
		m.setters = append(m.setters, VolumesInUse(cfg.VolumesInUseSynced, cfg.VolumesInUse))
	}
	if cfg.RuntimeHandlers != nil {
		m.setters = append(m.setters, RuntimeHandlers(cfg.RuntimeHandlers))
	}
	return m, nil
}

// SetFrequencies changes the compute and report periods; zero keeps a value.
// Safe to call concurrently; Run picks the new values up at once.
func (m *Manager) SetFrequencies(update, report time.Duration) {
	m.freqMu.Lock()
	if update > 0 {
		m.updateFrequency = update
	}
	if report > 0 {
		m.reportFrequency = report
	}
	m.freqMu.Unlock()
	m.SyncSoon()
}

func (m *Manager) frequencies() (update, report time.Duration) {
	m.freqMu.Lock()
	defer m.freqMu.Unlock()
	return m.updateFrequency, m.reportFrequency
}

// Node returns the Node as the informer last saw it (nil before Run's
// informer synced or when it is not registered). Safe to call concurrently;
// the caller must not modify it.
func (m *Manager) Node() *v1.Node {
	l := m.lister.Load()
	if l == nil {
		return nil
	}
	n, err := (*l).Get(m.cfg.NodeName)
	if err != nil {
		return nil
	}
	return n
}

// NodeSynced reports whether the Node informer has synced (kubelet's
// nodeHasSynced): from then on Node answers from the API server's view.
func (m *Manager) NodeSynced() bool { return m.lister.Load() != nil }

// NodeAnyway returns the Node for decisions that cannot wait for the API
// server, as kubelet's getNodeAnyWay: the informer's copy when it has one,
// else a Node computed from the host alone (name, labels, addresses,
// capacity and allocatable; no UID). Pods admitted right after an agent
// restart — static pods at once, before the node is even registered — so see
// the node's real allocatable, not an empty one. Safe to call concurrently.
func (m *Manager) NodeAnyway(ctx context.Context) (*v1.Node, error) {
	if n := m.Node(); n != nil {
		return n, nil
	}
	capacity, _, capErr := m.readCapacity(map[string]observation{})
	node := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: m.cfg.NodeName, Labels: m.desiredLabels()}}
	setters := []Setter{
		NodeAddress(m.internalIP, m.cfg.Hostname),
		Capacity(func() (v1.ResourceList, error) { return capacity, capErr }, m.cfg.reserved,
			func(c v1.ResourceList) v1.ResourceList { return hardEvictionReservation(m.cfg.thresholds, c) }),
	}
	// No device plugin resources here: the device manager's Capacity
	// reports a dropped resource once, to the status loop; admission
	// gates devices by allocating them.
	var errs []error
	for _, s := range setters {
		if err := s(ctx, node); err != nil {
			errs = append(errs, err)
		}
	}
	if capErr != nil {
		return nil, fmt.Errorf("node %s: %w", m.cfg.NodeName, errors.Join(errs...))
	}
	return node, nil
}

// LastReport returns when the status was last written (zero = never). Safe
// to call concurrently; meant for health checks.
func (m *Manager) LastReport() time.Time {
	n := m.lastReport.Load()
	if n == 0 {
		return time.Time{}
	}
	return time.Unix(0, n)
}

func (m *Manager) setLastReport(t time.Time, node *v1.Node) {
	m.lastReport.Store(t.UnixNano())
	m.readyPosted.Store(isReady(node))
}

func isReady(node *v1.Node) bool {
	for _, c := range node.Status.Conditions {
		if c.Type == v1.NodeReady {
			return c.Status == v1.ConditionTrue
		}
	}
	return false
}

// Register creates the Node, or reconciles the labels of an existing one,
// retrying with backoff until it succeeds or ctx is done.
func (m *Manager) Register(ctx context.Context) (*v1.Node, error) {
	// kubelet's registration back-off: 100ms doubling to 7s, no jitter.
	backoff := wait.Backoff{Duration: 100 * time.Millisecond, Factor: 2, Jitter: 0, Steps: math.MaxInt32, Cap: registerMaxBackoff}
	for {
		node, err := m.tryRegister(ctx)
		if err == nil {
			return node, nil
		}
		delay := backoff.Step()
		m.log.Warn("registering node failed; retrying", "err", err, "retryIn", delay)
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("registering node %s: %w (last error: %v)", m.cfg.NodeName, ctx.Err(), err)
		case <-m.clock.After(delay):
		}
	}
}

// ControllerManagedAttachAnnotation is kubelet's Node annotation that
// hands the node's volume attachments to the attach/detach controller
// (kubelet's enableControllerAttachDetach, true by default; the agent
// never attaches volumes itself, so it is always "true"). Without it the
// controller creates no VolumeAttachment for the node's pods.
const ControllerManagedAttachAnnotation = "volumes.kubernetes.io/controller-managed-attach-detach"

// desiredLabels are the labels the agent owns on its Node.
func (m *Manager) desiredLabels() map[string]string {
	l := map[string]string{
		v1.LabelHostname:   m.cfg.Hostname,
		v1.LabelOSStable:   goruntime.GOOS,
		v1.LabelArchStable: goruntime.GOARCH,
	}
	for k, v := range m.cfg.Labels {
		l[k] = v
	}
	return l
}

func (m *Manager) tryRegister(ctx context.Context) (*v1.Node, error) {
	m.syncMu.Lock()
	defer m.syncMu.Unlock()
	m.gather(m.clock.Now())
	return m.registerLocked(ctx)
}

// registerLocked creates or reconciles the Node from the gathered inputs.
// The caller holds syncMu.
func (m *Manager) registerLocked(ctx context.Context) (*v1.Node, error) {
	// One timeout for the whole attempt (at most three requests).
	ctx, cancel := context.WithTimeout(ctx, 3*m.cfg.RequestTimeout)
	defer cancel()
	if m.cfg.NoRegister {
		existing, err := m.cfg.Nodes.Get(ctx, m.cfg.NodeName, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("node %q not found, and registerNode is false: waiting for it to be created", m.cfg.NodeName)
		}
		if err != nil {
			return nil, fmt.Errorf("reading node: %w", err)
		}
		m.log.Info("node exists (registerNode false: not registering)")
		m.node = existing
		return existing, nil
	}
	now := m.in.now
	node := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: m.cfg.NodeName, Labels: m.desiredLabels(),
		Annotations: map[string]string{ControllerManagedAttachAnnotation: "true"}}}
	if len(m.cfg.Taints) > 0 {
		node.Spec.Taints = append([]v1.Taint(nil), m.cfg.Taints...)
	}
	node.Spec.ProviderID = m.cfg.ProviderID
	m.applySetters(ctx, node)

	nodes := m.cfg.Nodes
	created, err := nodes.Create(ctx, node, metav1.CreateOptions{})
	if err == nil {
		m.log.Info("registered node", "ready", isReady(created))
		m.node = created
		m.setLastReport(now, created)
		m.jitter = ReportJitter(m.currentReportFrequency(), m.rand())
		return created, nil
	}
	if !apierrors.IsAlreadyExists(err) && !apierrors.IsForbidden(err) {
		return nil, fmt.Errorf("creating node: %w", err)
	}
	existing, gerr := nodes.Get(ctx, m.cfg.NodeName, metav1.GetOptions{})
	if gerr != nil {
		if apierrors.IsForbidden(err) {
			return nil, fmt.Errorf("creating node: %w; reading it: %w", err, gerr)
		}
		return nil, fmt.Errorf("reading existing node: %w", gerr)
	}
	changed := map[string]string{}
	for k, v := range m.desiredLabels() {
		if cur, ok := existing.Labels[k]; !ok || cur != v {
			changed[k] = v
		}
	}
	meta := map[string]any{}
	if len(changed) > 0 {
		meta["labels"] = changed
	}
	if existing.Annotations[ControllerManagedAttachAnnotation] != "true" {
		meta["annotations"] = map[string]string{ControllerManagedAttachAnnotation: "true"}
	}
	if len(meta) > 0 {
		patch, err := json.Marshal(map[string]any{"metadata": meta})
		if err != nil {
			return nil, fmt.Errorf("label patch: %w", err)
		}
		existing, err = nodes.Patch(ctx, m.cfg.NodeName, types.StrategicMergePatchType, patch, metav1.PatchOptions{})
		if err != nil {
			return nil, fmt.Errorf("reconciling labels of existing node: %w", err)
		}
		m.log.Info("reconciled labels and annotations of existing node", "labels", changed)
	}
	m.log.Info("node already registered")
	m.node = existing
	return existing, nil
}

func (m *Manager) currentReportFrequency() time.Duration {
	_, r := m.frequencies()
	return r
}

// Run computes the status every UpdateFrequency and reports it as
// ShouldReport decides, until ctx is done. Until the node has reported Ready
// (for at most two minutes) it computes every second, so a fresh node becomes
// Ready within seconds of its runtime. SyncSoon (and SetFrequencies) make it
// compute at once, and the period starts again from there. Run also watches
// its own Node so that changes made by others are noticed.
func (m *Manager) Run(ctx context.Context) {
	m.startInformer(ctx)
	start := m.clock.Now()
	for {
		if err := m.SyncOnce(ctx); err != nil && ctx.Err() == nil {
			m.log.Error("node status sync failed", "err", err)
		}
		wait, _ := m.frequencies()
		if !m.readyPosted.Load() && m.clock.Since(start) < fastUpdateWindow && wait > fastUpdateInterval {
			wait = fastUpdateInterval
		}
		select {
		case <-ctx.Done():
			return
		case <-m.kick:
		case <-m.clock.After(wait):
		}
	}
}

func (m *Manager) startInformer(ctx context.Context) {
	inf := newNodeInformer(m.cfg.Nodes, m.cfg.NodeName)
	lister := corelisters.NewNodeLister(inf.GetIndexer())
	synced := inf.HasSynced
	go inf.Run(ctx.Done())
	go func() {
		if cache.WaitForCacheSync(ctx.Done(), synced) {
			m.lister.Store(&lister)
		}
	}()
}

// SyncOnce computes the status and writes it if ShouldReport says so, with
// up to StatusUpdateRetries tries. It is Run's loop body.
func (m *Manager) SyncOnce(ctx context.Context) error {
	m.syncMu.Lock()
	defer m.syncMu.Unlock()
	now := m.clock.Now()
	m.gather(now)
	var errs []error
	for try := 0; try < StatusUpdateRetries; try++ {
		if err := ctx.Err(); err != nil {
			return err
		}
		err := m.tryReport(ctx, try, now)
		if err == nil {
			return nil
		}
		m.log.Warn("node status report failed", "try", try+1, "err", err)
		errs = append(errs, err)
	}
	return fmt.Errorf("node status not reported after %d tries: %w", StatusUpdateRetries, errors.Join(errs...))
}

// baseNode returns the Node to compute on: on the first try the cached one
// (the informer's, else the last one we read or wrote), later a fresh GET.
func (m *Manager) baseNode(ctx context.Context, try int) (*v1.Node, error) {
	if try == 0 {
		if l := m.lister.Load(); l != nil {
			if n, err := (*l).Get(m.cfg.NodeName); err == nil {
				if m.node == nil || !newerThan(m.node, n) {
					return n, nil
				}
			}
		}
		if m.node != nil {
			return m.node, nil
		}
	}
	rctx, cancel := context.WithTimeout(ctx, m.cfg.RequestTimeout)
	defer cancel()
	n, err := m.cfg.Nodes.Get(rctx, m.cfg.NodeName, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("getting node: %w", err)
	}
	return n, nil
}

// newerThan reports whether a (our own last write) is newer than b (the
// informer's copy): resource versions are opaque, so compare the heartbeats
// we wrote. Others (the node lifecycle controller) keep the heartbeats when
// they change a condition, so their changes are never hidden by this.
func newerThan(a, b *v1.Node) bool {
	if a.ResourceVersion == b.ResourceVersion {
		return false
	}
	return latestHeartbeat(a).After(latestHeartbeat(b))
}

func latestHeartbeat(n *v1.Node) time.Time {
	var t time.Time
	for _, c := range n.Status.Conditions {
		if c.LastHeartbeatTime.After(t) {
			t = c.LastHeartbeatTime.Time
		}
	}
	return t
}

func (m *Manager) tryReport(ctx context.Context, try int, now time.Time) error {
	base, err := m.baseNode(ctx, try)
	if apierrors.IsNotFound(err) {
		// The Node was deleted under us: register it again (or, with
		// NoRegister, fail until it exists again).
		m.log.Warn("node object not found; registering again", "registerNode", !m.cfg.NoRegister)
		m.node = nil
		_, err = m.registerLocked(ctx)
		return err
	}
	if err != nil {
		return err
	}
	node := base.DeepCopy()
	m.applySetters(ctx, node)
	changed := StatusChanged(&base.Status, &node.Status)
	_, report := m.frequencies()
	if !ShouldReport(now, m.LastReport(), changed, report, m.jitter) {
		m.node = base
		// Nothing to write: the Node lists what was computed (kubelet
		// marks from it too, so that volumes an agent before a restart
		// reported count as reported).
		m.markVolumesReported(node)
		return nil
	}
	first := m.LastReport().IsZero()
	pctx, cancel := context.WithTimeout(ctx, m.cfg.RequestTimeout)
	updated, patch, err := patchStatus(pctx, m.cfg.Nodes, m.cfg.NodeName, base, node)
	cancel()
	if err != nil {
		return err
	}
	m.node = updated
	m.setLastReport(now, updated)
	m.markVolumesReported(updated)
	if changed || first {
		m.jitter = ReportJitter(report, m.rand())
	} else {
		m.jitter = 0
	}
	m.log.Debug("reported node status", "changed", changed, "patchBytes", len(patch), "ready", isReady(updated))
	return nil
}

// markVolumesReported tells Options.VolumesReportedInUse what node's
// status.volumesInUse holds (kubelet's markVolumesFromNode).
func (m *Manager) markVolumesReported(node *v1.Node) {
	if f := m.cfg.VolumesReportedInUse; f != nil {
		f(node.Status.VolumesInUse)
	}
}

// SyncSoon asks Run for a status computation now rather than at its next
// period (the volumes in use changed: the mount of an attachable volume
// waits until a write lists it). It does not block; requests made while a
// computation runs are coalesced into one more. Whether the computation
// writes is ShouldReport's decision as for any other (a change is
// written, no change is not). Safe to call concurrently.
func (m *Manager) SyncSoon() {
	select {
	case m.kick <- struct{}{}:
	default:
	}
}

// applySetters runs the setters on node. A setter's error is logged when it
// differs from that setter's previous one, so a permanent condition (no DMI
// on a VM) is logged once, not every period.
func (m *Manager) applySetters(ctx context.Context, node *v1.Node) {
	for i, s := range m.setters {
		err := s(ctx, node)
		msg := ""
		if err != nil {
			msg = err.Error()
		}
		if msg != m.setterErrs[i] {
			if err != nil {
				m.log.Warn("setting node status", "err", err)
			} else {
				m.log.Info("setting node status works again", "was", m.setterErrs[i])
			}
			m.setterErrs[i] = msg
		}
	}
}

// internalIP is the NodeAddress input.
func (m *Manager) internalIP() (string, error) {
	if m.cfg.NodeIP != "" {
		return m.cfg.NodeIP, nil
	}
	ip, err := m.cfg.Host.InternalIP()
	if err != nil {
		return "", err
	}
	return ip.String(), nil
}
