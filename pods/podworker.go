package pods

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	utilptr "k8s.io/utils/ptr"

	"github.com/nodeagent/nodeagent/kubetypes"
	"github.com/nodeagent/nodeagent/pleg"
	"github.com/nodeagent/nodeagent/pods/status"
)

// podSyncer is what a podWorker drives, as kubelet's pod workers drive
// theirs (pod_workers.go): the sync of a running pod, of a terminating one
// and of a terminated one. The worker type implements it; the state
// machine's tests use a fake. Every call gets the pod as its source has it
// last and a runtime status at least as new as the previous call's start,
// and runs on the pod's goroutine: calls never overlap.
type podSyncer interface {
	// SyncPod makes a running pod's containers match its spec.
	SyncPod(ctx context.Context, pod *v1.Pod, rs pleg.PodStatus, now time.Time) (syncResult, error)
	// SyncTerminatingPod stops what still runs of the pod for t; it
	// reports whether nothing runs any more (the pod is terminated).
	SyncTerminatingPod(ctx context.Context, pod *v1.Pod, rs pleg.PodStatus, t *termination, now time.Time) (bool, error)
	// SyncTerminatedPod does what t asks once nothing of the pod runs
	// (the status, the API delete, the release of the sandbox, the
	// cleanup) and finishes t; it says when to sync next, or that the
	// worker is done (the pod is gone from the host).
	SyncTerminatedPod(ctx context.Context, pod *v1.Pod, rs pleg.PodStatus, t *termination, now time.Time) (time.Duration, bool, error)
	// Deadline is when a running pod passes its activeDeadlineSeconds
	// (zero: never).
	Deadline(pod *v1.Pod) time.Time
}

// syncResult is what a SyncPod did.
type syncResult struct {
	// acted: it changed something; the worker syncs again at once (after
	// the PLEG saw it).
	acted bool
	// wakeAt is when the pod needs a sync (a held-back restart, a volume
	// refresh, a mirror pod retry; zero: the resync period).
	wakeAt time.Time
}

// podState is where a pod is in its life on the node, as kubelet's
// PodWorkerState.
type podState int

const (
	podSyncing     podState = iota // running as its spec says
	podTerminating                 // a termination is requested; containers are being stopped
	podTerminated                  // nothing of it runs; what its termination asks afterwards is done
)

func (s podState) String() string {
	return [...]string{"syncing", "terminating", "terminated"}[s]
}

// termReason is why a pod terminates. A request of a later reason
// replaces one of an earlier reason (the order in which the worker
// always preferred them): the active deadline gives way to a node
// shutdown, which gives way to an eviction, which gives way to a
// rejection, a deletion and a removal.
type termReason int

const (
	termDeadline  termReason = iota + 1 // activeDeadlineSeconds passed
	termStop                            // StopPods (graceful node shutdown)
	termEviction                        // node-pressure eviction
	termRejection                       // admission refused the pod
	termDeletion                        // deleted in the API (deletionTimestamp): final status, then the API delete
	termRemoval                         // its source dropped it (or no source knows it): everything is removed
)

func (r termReason) String() string {
	return [...]string{"", "deadline", "shutdown", "eviction", "rejection", "deletion", "removal"}[r]
}

// termination is one request to end a pod, whatever asked for it: why,
// with what grace period, what the pod's status says once it stopped, and
// a completion signal for whoever waits (Evict, StopPods).
type termination struct {
	reason termReason
	// grace replaces the pod's grace period (eviction) or bounds it
	// (node shutdown); see gracePeriod.
	grace time.Duration
	// status is what the pod's status says (zero: what its containers
	// say).
	status termStatus

	once sync.Once
	done chan struct{} // closed once the termination is carried out
	// also are requests this one replaced: they complete with it.
	also []*termination
}

// termStatus is the status a termination writes: admission's refusal
// (status.Input.Rejected), or a failure with reason and message, with the
// DisruptionTarget condition (True, TerminationByKubelet, message) when
// disruption is set.
type termStatus struct {
	rejected        bool
	reason, message string
	disruption      bool
}

func newTermination(reason termReason, grace time.Duration, st termStatus) *termination {
	return &termination{reason: reason, grace: grace, status: st, done: make(chan struct{})}
}

// gracePeriod is the grace period the pod's containers get: an eviction's
// own, at most a node shutdown's, else the pod's (its deletion's, or its
// terminationGracePeriodSeconds).
func (t *termination) gracePeriod(pod *v1.Pod) time.Duration {
	switch t.reason {
	case termEviction:
		return t.grace
	case termStop:
		return stopGrace(pod, t.grace)
	}
	return gracePeriod(pod)
}

// finish signals completion to whoever waits for t and for the requests
// it replaced. It is idempotent.
func (t *termination) finish() {
	t.once.Do(func() { close(t.done) })
	for _, o := range t.also {
		o.finish()
	}
}

// finished reports whether t was carried out.
func (t *termination) finished() bool {
	select {
	case <-t.done:
		return true
	default:
		return false
	}
}

// podWorker is one pod's state machine, as kubelet's pod worker: the pod
// syncs until a termination is requested (syncing), then what runs of it
// is stopped (terminating) and, once nothing runs, what the termination
// asks afterwards is done (terminated) until the pod is gone and the
// worker ends. It owns the pod's goroutine, its wake-ups and its
// back-offs; all it does to the pod goes through its podSyncer. Before
// every sync it waits until the PLEG has seen the events of its previous
// actions and for a runtime status at least as new as its previous sync.
type podWorker struct {
	uid    types.UID
	source string
	log    *slog.Logger
	wake   chan struct{} // 1-buffered: the pod, its termination or its probes changed
	events chan struct{} // 1-buffered: the PLEG saw its containers change
	sync   podSyncer
	d      *workerDeps // pleg, cache, clock, host, metrics, resync, events

	mu      sync.Mutex
	pod     *v1.Pod      // the desired pod, latest from its source
	removed bool         // the source no longer has it
	term    *termination // the termination in force (nil: none)
	state   podState

	// terminal: the pod's last computed status is terminal (set by the
	// syncer; read by admission and eviction).
	terminal atomic.Bool

	// Owned by the worker goroutine.
	lastSync time.Time
	// failing: the last sync failed and its retry back-off is in force;
	// the pod's own container events (the failed attempt's create, exit
	// and removal) do not cut it short, as they would otherwise retry a
	// container create that keeps failing at once, again and again.
	failing   bool
	retry     wait.Backoff // the failed-sync back-off; reset by a good sync
	busy      wait.Backoff // slows a worker that keeps acting; reset when it settles
	immediate int
	// woke is what ended the last wait (the latency trace): "update",
	// "event", "timer" or "" (no wait), at wokeAt.
	woke   string
	wokeAt time.Time
}

// newPodWorker makes a pod's state machine around its syncer (not
// started). A pod already deleted is terminating from the start.
func newPodWorker(d *workerDeps, pod *v1.Pod, src string, s podSyncer, log *slog.Logger) *podWorker {
	w := &podWorker{
		d: d, uid: pod.UID, pod: pod, source: src, sync: s, log: log,
		wake: make(chan struct{}, 1), events: make(chan struct{}, 1),
		retry: syncRetry, busy: syncRetry,
	}
	w.noteDeletion(pod)
	return w
}

func (w *podWorker) poke() {
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// containersChanged wakes the worker for a PLEG event of its pod, unless
// it is backing off a failed sync (failing).
func (w *podWorker) containersChanged() {
	select {
	case w.events <- struct{}{}:
	default:
	}
}

// update takes a new version of the pod from its source. An update that
// changes only the status does not wake the worker (needsSync); a
// deletion requests the pod's termination.
func (w *podWorker) update(pod *v1.Pod) {
	w.mu.Lock()
	news := needsSync(w.pod, pod)
	w.pod = pod
	w.mu.Unlock()
	if w.noteDeletion(pod) || news {
		w.poke()
	}
}

// noteDeletion requests the termination of a pod deleted in the API; a
// deleted pod of another source is removed at once. It reports whether
// that is a new request.
func (w *podWorker) noteDeletion(pod *v1.Pod) bool {
	if pod.DeletionTimestamp == nil {
		return false
	}
	reason := termDeletion
	if w.source != kubetypes.SourceAPI {
		reason = termRemoval
	}
	t := newTermination(reason, 0, termStatus{})
	return w.requestTermination(t) == t
}

// remove tells the worker its source dropped the pod.
func (w *podWorker) remove() {
	w.mu.Lock()
	w.removed = true
	w.mu.Unlock()
	w.requestTermination(newTermination(termRemoval, 0, termStatus{}))
	w.poke()
}

// requestTermination asks the worker to end the pod for t, unless a
// termination of the same or a later reason is in force already (see
// termReason). It returns the termination in force: t, or the one the
// caller waits for instead.
func (w *podWorker) requestTermination(t *termination) *termination {
	w.mu.Lock()
	cur := w.term
	if cur != nil && cur.reason >= t.reason {
		w.mu.Unlock()
		return cur
	}
	if cur != nil {
		t.also = append(t.also, cur)
	}
	w.term = t
	if w.state == podSyncing {
		w.state = podTerminating
	}
	w.mu.Unlock()
	w.poke()
	return t
}

// reject records admission's refusal (before the worker runs): nothing of
// the pod runs, and its status says why.
func (w *podWorker) reject(r status.Waiting) {
	w.requestTermination(newTermination(termRejection, 0, termStatus{rejected: true, reason: r.Reason, message: r.Message}))
	w.d.met.rejected.WithLabelValues(r.Reason).Inc()
	w.log.Warn("pod rejected", "reason", r.Reason, "message", r.Message)
	pod, _ := w.snapshot()
	w.d.event(pod, v1.EventTypeWarning, r.Reason, r.Message)
}

func (w *podWorker) snapshot() (*v1.Pod, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.pod, w.removed
}

// rejected reports whether admission refused the pod.
func (w *podWorker) rejected() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.term != nil && w.term.reason == termRejection
}

// active returns the pod when its containers may run (kubelet's
// GetActivePods): its source has it, it is not deleted, rejected,
// terminal, nor being evicted or stopped. A pod past its deadline stays
// active until it is terminal.
func (w *podWorker) active() (*v1.Pod, bool) {
	if w.source == sourceOrphan || w.terminal.Load() {
		return nil, false
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.removed || w.pod.DeletionTimestamp != nil || (w.term != nil && w.term.reason != termDeadline) {
		return nil, false
	}
	return w.pod, true
}

// current returns what the next sync works on.
func (w *podWorker) current() (*v1.Pod, *termination) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.pod, w.term
}

func (w *podWorker) setState(s podState) {
	w.mu.Lock()
	w.state = s
	w.mu.Unlock()
}

func (w *podWorker) run(ctx context.Context) {
	defer w.d.host.workerDone(w)
	for {
		next, done := w.syncOnce(ctx)
		if done || ctx.Err() != nil {
			return
		}
		if next == 0 {
			w.immediate++
			if w.immediate <= maxImmediate {
				w.wokeAt = w.d.clock.Now()
				continue
			}
			next = w.busy.Step()
		} else {
			w.immediate, w.busy = 0, syncRetry
		}
		t := w.d.clock.NewTimer(next)
	wait:
		for {
			select {
			case <-w.wake:
				w.immediate, w.busy = 0, syncRetry
				w.woke = "update"
			case <-w.events:
				if w.failing {
					continue // the retry back-off holds
				}
				w.immediate, w.busy = 0, syncRetry
				w.woke = "event"
			case <-t.C():
				w.woke = "timer"
			case <-ctx.Done():
			}
			break wait
		}
		w.wokeAt = w.d.clock.Now()
		t.Stop()
	}
}

// syncOnce runs one sync and says when to run the next (0: at once) or that
// the worker is done.
func (w *podWorker) syncOnce(ctx context.Context) (time.Duration, bool) {
	// Wait for the events of the previous sync's actions, then for a
	// status at least as new as that sync's start.
	begin := w.d.clock.Now()
	wctx, cancel := context.WithTimeout(ctx, expectTTL+time.Second)
	_ = w.d.pleg.WaitExpected(wctx, w.uid)
	cancel()
	expected := w.d.clock.Now()
	gctx, cancel := context.WithTimeout(ctx, cacheWait)
	rs, err := w.d.cache.GetNewerThan(gctx, w.uid, w.lastSync)
	cancel()
	if w.log.Enabled(ctx, slog.LevelDebug) {
		// The latency trace (-v=4): what woke the worker and how long the
		// sync waited for the PLEG before it began.
		now := w.d.clock.Now()
		w.log.Debug("pod sync begins", "woke", w.woke, "sinceWake", begin.Sub(w.wokeAt),
			"waitExpected", expected.Sub(begin), "waitCache", now.Sub(expected))
	}
	w.woke = ""
	if ctx.Err() != nil {
		return 0, true
	}
	if err != nil {
		w.log.Warn("pod status from the PLEG is stale; syncing with it", "err", err)
		rs, _ = w.d.cache.Get(w.uid)
	}
	now := w.d.clock.Now()
	w.lastSync = now
	pod, t := w.current()
	if t == nil {
		t = w.pastDeadline(pod, now)
	}
	if t != nil {
		w.failing = false // a termination follows its containers' events
		return w.syncTermination(ctx, pod, rs, t, now)
	}

	res, err := w.sync.SyncPod(ctx, pod, rs, now)
	w.failing = err != nil
	if err != nil {
		w.d.met.syncs.WithLabelValues("error").Inc()
		d := w.retry.Step()
		w.log.Warn("pod sync failed; retrying", "err", err, "retryIn", d)
		return d, false
	}
	w.d.met.syncs.WithLabelValues("ok").Inc()
	w.retry = syncRetry
	if res.acted {
		return 0, false
	}
	next := w.d.resync
	if w.d.jitter != nil {
		next = w.d.jitter(next)
	}
	for _, at := range []time.Time{res.wakeAt, w.sync.Deadline(pod)} {
		if !at.IsZero() && at.Sub(now) < next {
			next = max(at.Sub(now), time.Millisecond)
		}
	}
	return next, false
}

// pastDeadline requests the termination of a pod past its
// activeDeadlineSeconds, as kubelet fails it (Failed, DeadlineExceeded,
// an event); nil while it is not.
func (w *podWorker) pastDeadline(pod *v1.Pod, now time.Time) *termination {
	at := w.sync.Deadline(pod)
	if at.IsZero() || now.Before(at) {
		return nil
	}
	w.log.Info("pod is past its active deadline; stopping it", "activeDeadlineSeconds", utilptr.Deref(pod.Spec.ActiveDeadlineSeconds, 0))
	w.d.event(pod, v1.EventTypeNormal, ReasonDeadlineExceeded, messageDeadlineExceeded)
	return w.requestTermination(newTermination(termDeadline, 0, termStatus{reason: ReasonDeadlineExceeded, message: messageDeadlineExceeded}))
}

// syncTermination is the one path every termination takes: stop what
// runs (terminating), then, once nothing does, what the request asks
// afterwards (terminated). Failures retry with the sync back-off.
func (w *podWorker) syncTermination(ctx context.Context, pod *v1.Pod, rs pleg.PodStatus, t *termination, now time.Time) (time.Duration, bool) {
	stopped, err := w.sync.SyncTerminatingPod(ctx, pod, rs, t, now)
	if err != nil {
		w.log.Warn("stopping the pod failed; retrying", "reason", t.reason, "err", err)
		return w.retry.Step(), false
	}
	if !stopped {
		w.setState(podTerminating)
		return 0, false // the next sync sees the containers' ends
	}
	w.setState(podTerminated)
	next, done, err := w.sync.SyncTerminatedPod(ctx, pod, rs, t, now)
	if err != nil {
		w.log.Warn("finishing the pod's termination failed; retrying", "reason", t.reason, "err", err)
		return w.retry.Step(), false
	}
	return next, done
}
