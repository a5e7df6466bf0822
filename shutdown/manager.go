package shutdown

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
)

// Kubelet's words (pkg/kubelet/nodeshutdown, pkg/kubelet/events).
const (
	// ReasonShutdown is the reason of the Node events (kubelet's
	// events.NodeShutdown).
	ReasonShutdown           = "Shutdown"
	messageShutdownEvent     = "Shutdown manager detected shutdown event"
	messageShutdownCancelled = "Shutdown manager detected shutdown cancellation"
	// inhibitWhy is the reason shown by systemd-inhibit --list.
	inhibitWhy  = "Kubelet needs time to handle node shutdown"
	inhibitWho  = "nodeagent"
	inhibitWhat = "shutdown"
	inhibitMode = "delay"
)

// ErrShuttingDown is what ShuttingDown reports while the node shuts down;
// its text is kubelet's, in the Ready condition's message.
var ErrShuttingDown = errors.New("node is shutting down")

const (
	// reconnectPeriod is how long Run waits before it connects to the bus
	// again after losing it (kubelet's dbusReconnectPeriod).
	reconnectPeriod = time.Second
	// reloadWait and reloadPolls bound the wait for logind to take a new
	// InhibitDelayMaxSec after its reload.
	reloadWait  = 200 * time.Millisecond
	reloadPolls = 10
	// DefaultDropInDir is where the logind drop-in goes.
	DefaultDropInDir = "/etc/systemd/logind.conf.d"
)

// Logind is what the manager needs of systemd-logind, and of systemd to
// reload it. One value is one bus connection.
type Logind interface {
	// InhibitDelayMax is logind's InhibitDelayMaxUSec.
	InhibitDelayMax() (time.Duration, error)
	// Inhibit takes an inhibitor lock; closing it releases the lock.
	Inhibit(what, who, why, mode string) (io.Closer, error)
	// ReloadLogind makes logind read its configuration again.
	ReloadLogind() error
	// PrepareForShutdown delivers the PrepareForShutdown signals' value;
	// the channel is closed when the connection ends.
	PrepareForShutdown() (<-chan bool, error)
	Close() error
}

// Pods are the pods the manager stops.
type Pods interface {
	// ActivePods are the pods that may have running containers.
	ActivePods() []*v1.Pod
	// StopPods stops these pods, each with at most maxGrace, and returns
	// once they stopped (nil) or when ctx ends.
	StopPods(ctx context.Context, uids []types.UID, maxGrace time.Duration) error
}

// Options configure a Manager.
type Options struct {
	// GracePeriod and CriticalGracePeriod are shutdownGracePeriod and
	// shutdownGracePeriodCriticalPods, used when ByPodPriority is empty;
	// GracePeriod 0 then disables the manager.
	GracePeriod, CriticalGracePeriod time.Duration
	// ByPodPriority is shutdownGracePeriodByPodPriority; exclusive with
	// the two above.
	ByPodPriority []Band
	// Connect opens a connection to logind (required; SystemBus on Linux).
	Connect func() (Logind, error)
	Pods    Pods // required
	// SyncNodeStatus reports the node's status now (the Ready condition
	// reads ShuttingDown); nil: none.
	SyncNodeStatus func(ctx context.Context) error
	// Event records an event on the Node; nil: none.
	Event func(eventType, reason, message string)
	// DropInDir is logind's drop-in directory; default DefaultDropInDir.
	DropInDir string
	Clock     clock.Clock  // default: the real clock
	Logger    *slog.Logger // default: slog.Default()
}

// Manager holds the inhibitor lock and stops the pods on shutdown. See the
// package doc.
type Manager struct {
	o            Options
	bands        []Band        // sorted, lowest priority first
	total        time.Duration // the bands' sum: the inhibitor delay wanted
	log          *slog.Logger
	clock        clock.Clock
	shuttingDown atomic.Bool
	// lock is owned by Run's goroutine.
	lock io.Closer
}

// New returns a Manager, or nil when graceful node shutdown is disabled:
// no ByPodPriority and GracePeriod 0.
func New(o Options) (*Manager, error) {
	bands := o.ByPodPriority
	if len(bands) > 0 {
		if o.GracePeriod > 0 || o.CriticalGracePeriod > 0 {
			return nil, errors.New("cannot specify both shutdownGracePeriodByPodPriority and shutdownGracePeriod at the same time")
		}
		for _, b := range bands {
			if b.Grace < 0 {
				return nil, fmt.Errorf("shutdownGracePeriodByPodPriority: priority %d has a negative grace period %v", b.Priority, b.Grace)
			}
		}
	} else {
		if o.GracePeriod <= 0 {
			return nil, nil
		}
		if o.CriticalGracePeriod < 0 || o.CriticalGracePeriod > o.GracePeriod {
			return nil, fmt.Errorf("shutdownGracePeriodCriticalPods %v must be between 0 and shutdownGracePeriod %v", o.CriticalGracePeriod, o.GracePeriod)
		}
		bands = MigrateBands(o.GracePeriod, o.CriticalGracePeriod)
	}
	if o.Connect == nil || o.Pods == nil {
		return nil, errors.New("shutdown: Connect and Pods are required")
	}
	if o.DropInDir == "" {
		o.DropInDir = DefaultDropInDir
	}
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	bands = sortedBands(bands)
	return &Manager{o: o, bands: bands, total: TotalGrace(bands), log: o.Logger, clock: o.Clock}, nil
}

// ShuttingDown is ErrShuttingDown from PrepareForShutdown(true) until the
// shutdown is cancelled, nil otherwise. Safe to call concurrently; a nil
// Manager is never shutting down.
func (m *Manager) ShuttingDown() error {
	if m != nil && m.shuttingDown.Load() {
		return ErrShuttingDown
	}
	return nil
}

// Run watches for the node's shutdown until ctx is done. If logind cannot
// be reached at first, it logs why and returns: the node works without
// graceful shutdown. A connection lost later is made again every second.
func (m *Manager) Run(ctx context.Context) {
	m.log.Info("graceful node shutdown", "inhibitDelay", m.total, "bands", m.bandsAttr())
	for first := true; ; first = false {
		watching, err := m.session(ctx)
		if ctx.Err() != nil {
			return
		}
		if first && !watching {
			m.log.Warn("graceful node shutdown is off: cannot use systemd-logind", "err", err)
			return
		}
		m.log.Warn("lost the watch for the node's shutdown; connecting again", "err", err, "in", reconnectPeriod)
		select {
		case <-ctx.Done():
			return
		case <-m.clock.After(reconnectPeriod):
		}
	}
}

// session connects to logind, makes sure its delay is long enough, takes
// the lock and handles PrepareForShutdown until the connection or ctx
// ends. It reports whether it got as far as watching.
func (m *Manager) session(ctx context.Context) (bool, error) {
	l, err := m.o.Connect()
	if err != nil {
		return false, fmt.Errorf("connect to the system bus: %w", err)
	}
	defer l.Close()
	if err := m.ensureDelay(ctx, l); err != nil {
		return false, err
	}
	events, err := l.PrepareForShutdown()
	if err != nil {
		return false, fmt.Errorf("watch PrepareForShutdown: %w", err)
	}
	if err := m.acquire(l); err != nil {
		return false, err
	}
	defer m.release()
	for {
		select {
		case <-ctx.Done():
			return true, nil
		case shutting, ok := <-events:
			if !ok {
				return true, errors.New("the system bus connection ended")
			}
			if shutting {
				m.handleShutdown(ctx)
				m.release()
				m.log.Info("released the shutdown inhibitor lock; the node shuts down")
				continue
			}
			m.log.Info("node shutdown cancelled")
			m.shuttingDown.Store(false)
			m.event(v1.EventTypeNormal, ReasonShutdown, messageShutdownCancelled)
			if m.o.SyncNodeStatus != nil {
				go m.o.SyncNodeStatus(ctx)
			}
			if err := m.acquire(l); err != nil {
				return true, err
			}
		}
	}
}

// ensureDelay raises logind's InhibitDelayMaxSec to the bands' total when
// it is smaller, and logs when it still is.
func (m *Manager) ensureDelay(ctx context.Context, l Logind) error {
	cur, err := l.InhibitDelayMax()
	if err != nil {
		return fmt.Errorf("read logind's InhibitDelayMaxUSec: %w", err)
	}
	want := m.total
	if decideDelay(cur, want) == delayEnough {
		m.log.Info("logind's inhibitor delay covers the shutdown grace period", "inhibitDelayMax", cur, "want", want)
		return nil
	}
	path := filepath.Join(m.o.DropInDir, dropInName)
	m.log.Info("raising logind's InhibitDelayMaxSec to the shutdown grace period", "inhibitDelayMax", cur, "want", want, "dropIn", path)
	if err := os.MkdirAll(m.o.DropInDir, 0o755); err != nil {
		return fmt.Errorf("logind drop-in: %w", err)
	}
	if err := os.WriteFile(path, []byte(dropIn(want)), 0o644); err != nil {
		return fmt.Errorf("logind drop-in: %w", err)
	}
	if err := l.ReloadLogind(); err != nil {
		return fmt.Errorf("reload logind: %w", err)
	}
	// logind reloads asynchronously: poll a bounded number of times.
	for i := 0; ; i++ {
		if cur, err = l.InhibitDelayMax(); err != nil {
			return fmt.Errorf("read logind's InhibitDelayMaxUSec: %w", err)
		}
		if cur >= want || i == reloadPolls {
			break
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-m.clock.After(reloadWait):
		}
	}
	if cur < want {
		m.log.Error("logind's InhibitDelayMaxSec is still below the shutdown grace period: the shutdown goes on after it even if pods have not stopped",
			"inhibitDelayMax", cur, "want", want, "dropIn", path)
	} else {
		m.log.Info("logind's inhibitor delay raised", "inhibitDelayMax", cur)
	}
	return nil
}

func (m *Manager) acquire(l Logind) error {
	lock, err := l.Inhibit(inhibitWhat, inhibitWho, inhibitWhy, inhibitMode)
	if err != nil {
		return fmt.Errorf("take the shutdown inhibitor lock: %w", err)
	}
	m.release()
	m.lock = lock
	m.log.Info("holding a delay inhibitor lock on shutdown")
	return nil
}

func (m *Manager) release() {
	if m.lock == nil {
		return
	}
	if err := m.lock.Close(); err != nil {
		m.log.Warn("cannot release the shutdown inhibitor lock", "err", err)
	}
	m.lock = nil
}

// handleShutdown turns the node NotReady and stops its pods band by band,
// lowest priority first, within the grace periods.
func (m *Manager) handleShutdown(ctx context.Context) {
	start := m.clock.Now()
	m.log.Info("node is shutting down: stopping pods", "gracePeriod", m.total, "bands", m.bandsAttr())
	m.shuttingDown.Store(true)
	m.event(v1.EventTypeNormal, ReasonShutdown, messageShutdownEvent)
	// The whole procedure fits in the bands' total: logind does not wait
	// longer.
	budget, cancel := m.withTimeout(ctx, m.total)
	defer cancel()
	statusDone := make(chan struct{})
	go func() {
		defer close(statusDone)
		if m.o.SyncNodeStatus == nil {
			return
		}
		if err := m.o.SyncNodeStatus(budget); err != nil {
			m.log.Warn("cannot report the node's shutdown", "err", err)
		}
	}()
	for _, g := range Groups(m.o.Pods.ActivePods(), m.bands) {
		uids := make([]types.UID, 0, len(g.Pods))
		names := make([]string, 0, len(g.Pods))
		for _, p := range g.Pods {
			uids = append(uids, p.UID)
			names = append(names, p.Namespace+"/"+p.Name)
		}
		t := m.clock.Now()
		m.log.Info("stopping pods", "priority", g.Priority, "gracePeriod", g.Grace, "pods", names)
		gctx, gcancel := m.withTimeout(budget, g.Grace)
		err := m.o.Pods.StopPods(gctx, uids, g.Grace)
		gcancel()
		if err != nil {
			m.log.Warn("pods not stopped within their group's grace period; going on", "priority", g.Priority, "gracePeriod", g.Grace, "err", err)
		} else {
			m.log.Info("pods stopped", "priority", g.Priority, "took", m.clock.Since(t))
		}
	}
	select {
	case <-statusDone:
	case <-budget.Done():
	}
	m.log.Info("node shutdown handled", "took", m.clock.Since(start))
}

// bandsAttr shows the bands for the logs, "priority:grace" lowest first.
func (m *Manager) bandsAttr() []string {
	out := make([]string, 0, len(m.bands))
	for _, b := range m.bands {
		out = append(out, fmt.Sprintf("%d:%v", b.Priority, b.Grace))
	}
	return out
}

// withTimeout is context.WithTimeout on the manager's clock.
func (m *Manager) withTimeout(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(ctx)
	t := m.clock.NewTimer(d)
	go func() {
		select {
		case <-t.C():
			cancel()
		case <-ctx.Done():
		}
		t.Stop()
	}()
	return ctx, cancel
}

func (m *Manager) event(typ, reason, msg string) {
	if m.o.Event != nil {
		m.o.Event(typ, reason, msg)
	}
}
