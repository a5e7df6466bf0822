package eviction

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	v1 "k8s.io/api/core/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/clock"

	sig "github.com/nodeagent/nodeagent/internal/evictionapi"
	"github.com/nodeagent/nodeagent/kubetypes"
)

// MonitoringInterval is how often the manager checks the thresholds
// (kubelet's evictionMonitoringPeriod, its housekeeping interval).
const MonitoringInterval = 10 * time.Second

// Recorder records events.
type Recorder interface {
	Eventf(object k8sruntime.Object, eventtype, reason, messageFmt string, args ...any)
	AnnotatedEventf(object k8sruntime.Object, annotations map[string]string, eventtype, reason, messageFmt string, args ...any)
}

// Options configure a Manager.
type Options struct {
	// Observe returns the eviction signals measured at most maxAge ago
	// (nodestatus.Manager.Signals): the status sync's when fresh enough.
	Observe func(maxAge time.Duration) sig.Observation
	// Updated, when set, wakes the manager when a new observation is
	// published (nodestatus.Manager.SignalsUpdated), between intervals.
	Updated <-chan struct{}
	// ActivePods are the pods that may run (not terminal, not deleted).
	ActivePods func() []*v1.Pod
	// Usage measures the pods' usage (Stats.Usage).
	Usage func(ctx context.Context, pods []*v1.Pod) map[string]PodUsage
	// Reclaim frees node-level disk space before pods are evicted for a
	// disk signal: removing dead containers, then unused images.
	Reclaim []func(ctx context.Context) error
	// Evict stops a pod with grace, its status Failed with reason Evicted,
	// message and condition; it returns once the pod's containers are
	// stopped and its volumes released, or ctx ends.
	Evict func(ctx context.Context, pod *v1.Pod, grace time.Duration, message string) error
	// LocalUsage, when set, measures the local storage of the active pods
	// that set a limit on it (Stats.LocalUsage): kubelet's
	// localStorageEviction (localStorageCapacityIsolation) runs every
	// pass, thresholds met or not.
	LocalUsage func(ctx context.Context, pods []*v1.Pod) map[string]LocalUsage
	// EvictLocalStorage evicts a pod for exceeding a local storage limit:
	// as Evict, but without the DisruptionTarget condition, as kubelet
	// (nil: Evict).
	EvictLocalStorage func(ctx context.Context, pod *v1.Pod, grace time.Duration, message string) error
	// Recorder and Node receive the events (nil Recorder: none).
	Recorder Recorder
	Node     k8sruntime.Object
	// Interval is the monitoring interval (default MonitoringInterval).
	Interval time.Duration
	// SoftGracePeriods are evictionSoftGracePeriod: how long each soft
	// threshold (published in the observation) must be met before it is
	// acted on. Config validation requires one per soft threshold.
	SoftGracePeriods map[string]time.Duration
	// MaxPodGracePeriodSeconds is evictionMaxPodGracePeriod: pods evicted
	// for a soft threshold get at most this grace period.
	MaxPodGracePeriodSeconds int64
	// CleanupTimeout bounds the wait for an evicted pod's cleanup after
	// its kill (kubelet's 30s).
	CleanupTimeout time.Duration
	Clock          clock.WithTicker
	Logger         *slog.Logger
}

// Manager runs node-pressure eviction; see the package doc.
type Manager struct {
	o Options
	// evictedAt is when the last eviction finished: observations older
	// than that are not used again. Owned by Run's goroutine, as st.
	evictedAt time.Time
	st        thresholdState
}

// New returns a manager; nothing runs until Run.
func New(o Options) (*Manager, error) {
	var errs []error
	if o.Observe == nil {
		errs = append(errs, errors.New("eviction: Observe is required"))
	}
	if o.ActivePods == nil || o.Usage == nil || o.Evict == nil {
		errs = append(errs, errors.New("eviction: ActivePods, Usage and Evict are required"))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	if o.Interval <= 0 {
		o.Interval = MonitoringInterval
	}
	if o.CleanupTimeout <= 0 {
		o.CleanupTimeout = 30 * time.Second
	}
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return &Manager{o: o}, nil
}

// Run checks the thresholds every interval, and whenever Updated says the
// signals were measured, until ctx is done; after an eviction it checks
// again at once with a fresh measurement, as kubelet.
//
// With Updated set the status sync measures the host for both: the
// interval's timer then waits a quarter interval longer, so that it fires
// only when no sync came (a stalled or slower status loop) and does not
// race the sync it would otherwise measure the host again beside.
func (m *Manager) Run(ctx context.Context) {
	wait := m.o.Interval
	if m.o.Updated != nil {
		wait += m.o.Interval / 4
	}
	for {
		evicted, err := m.Synchronize(ctx)
		if err != nil {
			m.o.Logger.Warn("eviction manager: synchronize failed", "err", err)
		}
		if evicted != nil {
			continue
		}
		select {
		case <-ctx.Done():
			return
		case <-m.o.Clock.After(wait):
		case <-m.o.Updated: // nil: only the interval
		}
		if ctx.Err() != nil {
			return
		}
	}
}

// Synchronize is one pass of the manager: it decides which thresholds are
// met and past their grace periods (decideThresholds); for the first one
// it reclaims node-level resources for disk signals and otherwise evicts
// the first pod in kubelet's ranking that may be evicted. It returns that
// pod.
func (m *Manager) Synchronize(ctx context.Context) (*v1.Pod, error) {
	now := m.o.Clock.Now()
	maxAge := m.o.Interval
	if since := now.Sub(m.evictedAt); since < maxAge {
		maxAge = max(since, 0)
	}
	obs := m.o.Observe(maxAge)
	act, st := decideThresholds(now, obs, m.o.SoftGracePeriods, m.st)
	for t, at := range st.firstMet {
		if d := gracePeriod(t, m.o.SoftGracePeriods); d > 0 && now.Sub(at) < d {
			m.o.Logger.Info("eviction manager: eviction criteria not yet met", "signal", t.Signal, "soft", true,
				"threshold", obs.Signals[t.Signal].SoftText, "available", obs.Signals[t.Signal].Available,
				"duration", now.Sub(at), "gracePeriod", d)
		}
	}
	m.st = st
	// As kubelet: pods over their local storage limits go first, and
	// then nothing else this pass.
	if p := m.localStorageEviction(ctx, now); p != nil {
		return p, nil
	}
	if len(act) == 0 {
		return nil, nil
	}
	t := act[0]
	signal := t.Signal
	res := signalResource[signal]
	observed := observedFor(t, obs)
	log := m.o.Logger.With("signal", signal, "resource", res, "soft", t.Soft)
	log.Info("eviction manager: attempting to reclaim", "available", observed.Available, "threshold", observed.ThresholdText, "minimumReclaim", observed.MinReclaim)
	m.nodeEvent(v1.EventTypeWarning, ReasonThresholdMet, "Attempting to reclaim %s", res)

	if isDiskSignal(signal) && len(m.o.Reclaim) > 0 {
		before := observed.Available
		for _, f := range m.o.Reclaim {
			if err := f(ctx); err != nil {
				log.Info("eviction manager: unexpected error when attempting to reduce resource pressure", "err", err)
			}
		}
		obs = m.o.Observe(0)
		observed = observedFor(t, obs)
		log.Info("eviction manager: node-level reclaim done", "reclaimedBytes", observed.Available-before)
		if !anyUnresolved(obs) {
			log.Info("eviction manager: able to reduce resource pressure without evicting pods")
			return nil, nil
		}
	}

	pods := m.o.ActivePods()
	if len(pods) == 0 {
		log.Error("eviction manager: eviction thresholds have been met, but no pods are active to evict")
		return nil, nil
	}
	usage := m.o.Usage(ctx, pods)
	usageOf := func(p *v1.Pod) (PodUsage, bool) {
		u, ok := usage[string(p.UID)]
		return u, ok
	}
	Rank(signal, pods, usageOf)
	for _, pod := range pods {
		if IsCritical(pod) {
			log.Error("eviction manager: cannot evict a critical pod", "pod", kubetypes.FullName(pod))
			continue
		}
		u, measured := usageOf(pod)
		msg, ann := Message(signal, observed, pod, u, measured)
		grace := podGracePeriod(t, m.o.SoftGracePeriods, m.o.MaxPodGracePeriodSeconds, pod)
		if err := m.evict(ctx, log, pod, grace, msg, ann, now); err != nil {
			log.Error("eviction manager: pod failed to evict", "pod", kubetypes.FullName(pod), "podUID", pod.UID, "err", err)
		}
		return pod, nil
	}
	log.Info("eviction manager: unable to evict any pods from the node")
	return nil, nil
}

// localStorageEviction evicts, with kubelet's immediate grace period,
// every active pod over a local storage limit (localStorageViolation);
// it returns the first.
func (m *Manager) localStorageEviction(ctx context.Context, now time.Time) *v1.Pod {
	if m.o.LocalUsage == nil {
		return nil
	}
	var limited []*v1.Pod
	for _, p := range m.o.ActivePods() {
		if hasLocalStorageLimit(p) {
			limited = append(limited, p)
		}
	}
	if len(limited) == 0 {
		return nil
	}
	usage := m.o.LocalUsage(ctx, limited)
	evict := m.o.EvictLocalStorage
	if evict == nil {
		evict = m.o.Evict
	}
	var first *v1.Pod
	for _, pod := range limited {
		u, ok := usage[string(pod.UID)]
		if !ok {
			continue
		}
		msg := localStorageViolation(pod, u)
		if msg == "" {
			continue
		}
		if IsCritical(pod) {
			m.o.Logger.Error("eviction manager: cannot evict a critical pod", "pod", kubetypes.FullName(pod))
			continue
		}
		log := m.o.Logger.With("signal", "localStorage")
		grace := time.Duration(hardEvictionGracePeriodSecs) * time.Second
		if err := m.evictWith(ctx, evict, log, pod, grace, msg, nil, now); err != nil {
			log.Error("eviction manager: pod failed to evict", "pod", kubetypes.FullName(pod), "podUID", pod.UID, "err", err)
		}
		if first == nil {
			first = pod
		}
	}
	return first
}

// evict records the Evicted event and stops pod with grace, waiting for
// the kill (kubelet waits 1.5 × the grace period, at least 10 s) and the
// cleanup (CleanupTimeout) at most.
func (m *Manager) evict(ctx context.Context, log *slog.Logger, pod *v1.Pod, grace time.Duration, msg string, ann map[string]string, start time.Time) error {
	return m.evictWith(ctx, m.o.Evict, log, pod, grace, msg, ann, start)
}

func (m *Manager) evictWith(ctx context.Context, evict func(context.Context, *v1.Pod, time.Duration, string) error,
	log *slog.Logger, pod *v1.Pod, grace time.Duration, msg string, ann map[string]string, start time.Time) error {
	if m.o.Recorder != nil {
		m.o.Recorder.AnnotatedEventf(pod, ann, v1.EventTypeWarning, Reason, "%s", msg)
	}
	plog := log.With("pod", kubetypes.FullName(pod), "podUID", pod.UID)
	plog.Info("eviction manager: evicting pod", "message", msg, "gracePeriod", grace)
	ectx, cancel := context.WithTimeout(ctx, max(grace*3/2, 10*time.Second)+m.o.CleanupTimeout)
	err := evict(ectx, pod, grace, msg)
	cancel()
	m.evictedAt = m.o.Clock.Now()
	if err == nil {
		plog.Info("eviction manager: pod is evicted successfully", "took", m.evictedAt.Sub(start))
	}
	return err
}

func (m *Manager) nodeEvent(typ, reason, format string, args ...any) {
	if m.o.Recorder != nil && m.o.Node != nil {
		m.o.Recorder.Eventf(m.o.Node, typ, reason, format, args...)
	}
}

// String is for logs.
func (u PodUsage) String() string {
	return fmt.Sprintf("memory=%d disk=%d inodes=%d processes=%d", u.Memory, u.Disk, u.Inodes, u.Processes)
}
