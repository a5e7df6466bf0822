package pods

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	utilptr "k8s.io/utils/ptr"

	"github.com/nodeagent/nodeagent/network"
	"github.com/nodeagent/nodeagent/pleg"
	"github.com/nodeagent/nodeagent/pods/containerspec"
	"github.com/nodeagent/nodeagent/pods/kubetypes"
	"github.com/nodeagent/nodeagent/pods/status"
	"github.com/nodeagent/nodeagent/runtime"
)

const (
	// expectTTL bounds how long a worker waits for the PLEG to see its own
	// actions before it syncs anyway.
	expectTTL = 10 * time.Second
	// cacheWait bounds the wait for a pod status newer than the last sync.
	cacheWait = 10 * time.Second
	// maxImmediate is how many syncs in a row may act and sync again at
	// once before the worker slows down to its retry back-off.
	maxImmediate = 20
	// mirrorRetry is how soon a static pod's worker tries again to create
	// its mirror pod after it could not.
	mirrorRetry = 2 * time.Second
	// orphanGrace is the grace period of the containers of a pod no source
	// knows any more.
	orphanGrace = 2
	// imageTimeout bounds an image lookup for a status.
	imageTimeout = 10 * time.Second
)

// worker owns one pod: it syncs it sequentially, woken by its source, by the
// PLEG, by its own timers.
type worker struct {
	d    *workerDeps
	uid  types.UID
	log  *slog.Logger
	wake chan struct{} // 1-buffered

	mu      sync.Mutex
	pod     *v1.Pod // the desired pod, latest from its source
	removed bool    // the source no longer has it

	// Owned by the worker goroutine.
	source    string
	rejection *status.Waiting // admission refused the pod (reason, message)
	startTime time.Time
	backoff   map[string]crashLoop
	errs      map[string]status.Waiting // per container: why its last start failed
	imageIDs  map[string]string
	pulls     pullState // image pull back-off (pullsecrets.go)
	reaped    map[string]bool
	lastSync  time.Time
	retry     wait.Backoff // the failed-sync back-off; reset by a good sync
	busy      wait.Backoff // slows a worker that keeps acting; reset when it settles
	immediate int
	status    *v1.PodStatus // last computed
	terminal  atomic.Bool   // the last computed status is terminal (read by admission)
	rejected  atomic.Bool   // rejection is set (read by admission)
	podIPs    []string      // from the pod network (not hostNetwork pods)
	refreshAt time.Time     // projected volumes need refreshing then (zero: never)
	deleted   bool          // the zero-grace API delete was sent
	// seen is when the agent first saw the pod; reportedRunning says the
	// start duration was observed.
	seen            time.Time
	reportedRunning bool
	backoffEvent    map[string]string // container → back-off message last reported
	names           podNames          // the pod's name-service files (namefiles.go)
	// runtimeType is the containerd runtime of the pod's RuntimeClass
	// handler, once resolved ("": the default).
	runtimeType     string
	runtimeResolved bool

	messages    map[string]string // termination messages by container ID
	deadlineHit *status.Waiting   // the pod passed its activeDeadlineSeconds
	pausePID    uint32            // the pod's pause process (podns.go; 0: none)
	evictReq    *evictRequest     // node-pressure eviction asked (under mu; evict.go)
	evicted     *evictRequest     // the eviction being carried out (worker-owned)
	stopReq     *stopRequest      // StopPods asked to stop the pod (under mu; stoppods.go)
	stopHit     *stopRequest      // the request being enforced (worker-owned)
	released    bool              // a finished pod's sandbox was released (finished.go)
	startedIDs  map[string]bool   // containers this worker started (stalestart.go)
	interrupted map[string]bool   // starts cut off by containerd's death (interruptedstart.go)
}

func allRunning(cs []v1.ContainerStatus) bool {
	for _, c := range cs {
		if c.State.Running == nil {
			return false
		}
	}
	return len(cs) > 0
}

// newWorker makes a pod's worker (not started).
func newWorker(d *workerDeps, pod *v1.Pod, src string, log *slog.Logger) *worker {
	now := d.clock.Now()
	return &worker{
		d: d, uid: pod.UID, pod: pod, source: src,
		log:          log.With("pod", kubetypes.FullName(pod), "podUID", pod.UID),
		wake:         make(chan struct{}, 1),
		backoff:      map[string]crashLoop{},
		errs:         map[string]status.Waiting{},
		imageIDs:     map[string]string{},
		reaped:       map[string]bool{},
		backoffEvent: map[string]string{},
		startTime:    now,
		seen:         now,
		retry:        syncRetry,
		busy:         syncRetry,
	}
}

// sourceOrphan is the source of a pod no source knows any more.
const sourceOrphan = "orphan"

// newOrphanWorker makes the worker that removes what a pod no source knows
// left on the host (its containers, directory, network namespace, logs).
func newOrphanWorker(d *workerDeps, ref runtime.PodRef, log *slog.Logger) *worker {
	orphan := &v1.Pod{}
	orphan.UID, orphan.Name, orphan.Namespace = ref.UID, ref.Name, ref.Namespace
	orphan.Spec.TerminationGracePeriodSeconds = utilptr.To[int64](orphanGrace)
	w := newWorker(d, orphan, sourceOrphan, log)
	w.removed = true
	return w
}

// reject records admission's refusal (before the worker runs): nothing of
// the pod runs, and its status says why.
func (w *worker) reject(r status.Waiting) {
	w.rejection = &r
	w.rejected.Store(true)
	w.d.met.rejected.WithLabelValues(r.Reason).Inc()
	w.log.Warn("pod rejected", "reason", r.Reason, "message", r.Message)
	w.d.event(w.pod, v1.EventTypeWarning, r.Reason, r.Message)
}

func (w *worker) poke() {
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

func (w *worker) update(pod *v1.Pod) {
	w.mu.Lock()
	news := needsSync(w.pod, pod)
	w.pod = pod
	w.mu.Unlock()
	if news {
		w.poke()
	}
}

func (w *worker) remove() {
	w.mu.Lock()
	w.removed = true
	w.mu.Unlock()
	w.poke()
}

func (w *worker) snapshot() (*v1.Pod, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.pod, w.removed
}

func (w *worker) run(ctx context.Context) {
	defer w.d.host.workerDone(w)
	for {
		next, done := w.syncOnce(ctx)
		if done || ctx.Err() != nil {
			return
		}
		if next == 0 {
			w.immediate++
			if w.immediate <= maxImmediate {
				continue
			}
			next = w.busy.Step()
		} else {
			w.immediate, w.busy = 0, syncRetry
		}
		t := w.d.clock.NewTimer(next)
		select {
		case <-w.wake:
			w.immediate, w.busy = 0, syncRetry
		case <-t.C():
		case <-ctx.Done():
		}
		t.Stop()
	}
}

// syncOnce runs one sync and says when to run the next (0: at once) or that
// the worker is done.
func (w *worker) syncOnce(ctx context.Context) (time.Duration, bool) {
	pod, removed := w.snapshot()
	// Wait for the events of the previous sync's actions, then for a
	// status at least as new as that sync's start.
	wctx, cancel := context.WithTimeout(ctx, expectTTL+time.Second)
	_ = w.d.pleg.WaitExpected(wctx, w.uid)
	cancel()
	gctx, cancel := context.WithTimeout(ctx, cacheWait)
	rs, err := w.d.cache.GetNewerThan(gctx, w.uid, w.lastSync)
	cancel()
	if ctx.Err() != nil {
		return 0, true
	}
	if err != nil {
		w.log.Warn("pod status from the PLEG is stale; syncing with it", "err", err)
		rs, _ = w.d.cache.Get(w.uid)
	}
	now := w.d.clock.Now()
	w.lastSync = now

	if removed || pod.DeletionTimestamp != nil {
		return w.terminate(ctx, pod, removed, rs)
	}
	if w.rejection != nil {
		// Nothing of a rejected pod runs (it may have run before an agent
		// restart re-admitted it).
		if running := w.toStop(rs); len(running) > 0 {
			if err := w.stopRunning(ctx, pod, running, gracePeriod(pod)); err != nil {
				w.log.Warn("cannot stop the containers of a rejected pod", "err", err)
			}
			return 0, false // the next sync sees their ends
		}
		w.setStatus(ctx, pod, rs, nil, false, now)
		w.settleRequests()
		return w.d.resync, false
	}
	if next, evicted, err := w.enforceEviction(ctx, pod, rs, now); evicted {
		if err != nil {
			w.log.Warn("evicting a pod failed; retrying", "err", err)
			return w.retry.Step(), false
		}
		return next, false
	}
	if next, stopped, err := w.enforceStop(ctx, pod, rs, now); stopped {
		if err != nil {
			w.log.Warn("stopping a pod for the agent failed; retrying", "err", err)
			return w.retry.Step(), false
		}
		return next, false
	}
	if next, past, err := w.enforceDeadline(ctx, pod, rs, now); past {
		if err != nil {
			w.log.Warn("stopping a pod past its deadline failed; retrying", "err", err)
			return w.retry.Step(), false
		}
		return next, false
	}
	acted, wakeAt, err := w.sync(ctx, pod, rs, now)
	if err != nil {
		w.d.met.syncs.WithLabelValues("error").Inc()
		d := w.retry.Step()
		w.log.Warn("pod sync failed; retrying", "err", err, "retryIn", d)
		return d, false
	}
	w.d.met.syncs.WithLabelValues("ok").Inc()
	w.retry = syncRetry
	if acted {
		return 0, false
	}
	next := w.d.resync
	for _, at := range []time.Time{wakeAt, w.refreshAt, w.deadline(pod)} {
		if !at.IsZero() && at.Sub(now) < next {
			next = max(at.Sub(now), time.Millisecond)
		}
	}
	return next, false
}

// sync makes a running pod's containers match its spec. It reports whether
// it acted (the caller syncs again once the PLEG saw it), when a held-back
// container may restart, and the first error.
func (w *worker) sync(ctx context.Context, pod *v1.Pod, rs pleg.PodStatus, now time.Time) (bool, time.Time, error) {
	if w.d.host.terminatingSibling(w, pod) {
		// Another pod of the same name (the previous version of a static
		// pod, or a deleted API pod) is still stopping: as kubelet, start
		// only once it is gone (its end wakes this worker).
		w.setStatus(ctx, pod, rs, nil, false, now)
		return false, now.Add(w.d.resync), nil
	}
	var retryAt time.Time
	if w.source == kubetypes.SourceFile && !w.d.ensureMirror(ctx, pod) {
		retryAt = now.Add(mirrorRetry)
	}
	if w.finished(pod) {
		return w.syncFinished(ctx, pod, rs, now, retryAt)
	}
	vols, sandboxErr := w.setupSandbox(ctx, pod)
	if sandboxErr != nil {
		w.sandboxEvents(pod, sandboxErr)
		w.setStatus(ctx, pod, rs, nil, false, now)
		return false, time.Time{}, sandboxErr
	}
	if acted, err := w.killUnhealthy(ctx, pod, rs); acted || err != nil {
		return true, time.Time{}, err
	}
	if w.waitForStarts(rs) {
		return true, time.Time{}, nil
	}
	rs = w.unstarted(rs)
	p := computePlanProbed(w.withStatus(pod), rs, w.backoff, w.sidecarStarted, now)
	if !retryAt.IsZero() && (p.wakeAt.IsZero() || retryAt.Before(p.wakeAt)) {
		p.wakeAt = retryAt
	}
	if p.empty() {
		w.reap(ctx, rs)
		w.setStatus(ctx, pod, rs, p.waiting, true, now)
		if w.finished(pod) {
			return true, p.wakeAt, nil // the next sync releases its sandbox
		}
		return false, p.wakeAt, nil
	}
	if w.status == nil {
		// A new pod says Pending/ContainerCreating (with its start time)
		// before the first start, which may pull an image.
		w.setStatus(ctx, pod, rs, p.waiting, true, now)
	}
	var errs []error
	for _, k := range p.kill {
		w.log.Info("stopping container", "container", k.c.Name, "containerID", k.c.ID, "reason", k.reason)
		if err := w.stop(ctx, pod, k.c, gracePeriod(pod)); err != nil {
			errs = append(errs, err)
			continue
		}
		w.reaped[k.c.ID] = true
	}
	for _, c := range p.remove {
		w.d.pleg.ExpectWithin(w.uid, c.ID, pleg.ContainerRemoved, expectTTL)
		if err := w.d.rt.RemoveContainer(ctx, c.ID); err != nil {
			errs = append(errs, err)
		}
	}
	if err := w.ensurePause(ctx, pod, len(p.start) > 0); err != nil {
		errs, p.start = append(errs, err), nil
	}
	for _, s := range p.start {
		if err := w.start(ctx, pod, s, vols); err != nil {
			errs = append(errs, err)
			continue
		}
		if b, ok := p.backoff[s.container.Name]; ok {
			w.backoff[s.container.Name] = b
		}
	}
	if len(errs) > 0 {
		w.setStatus(ctx, pod, rs, p.waiting, true, now)
		return true, time.Time{}, errors.Join(errs...)
	}
	return true, p.wakeAt, nil
}

// withStatus returns pod with its last computed status (kept across
// syncs for static pods, whose source has none).
func (w *worker) withStatus(pod *v1.Pod) *v1.Pod {
	if w.status == nil {
		return pod
	}
	p := *pod
	p.Status = *w.status
	if w.source == kubetypes.SourceAPI {
		// Conditions of others (readiness gates) as the API has them.
		p.Status = status.WithForeignConditions(pod.Status, p.Status)
	}
	return &p
}

func gracePeriod(pod *v1.Pod) time.Duration {
	if g := pod.DeletionGracePeriodSeconds; g != nil {
		return time.Duration(*g) * time.Second
	}
	if g := pod.Spec.TerminationGracePeriodSeconds; g != nil {
		return time.Duration(*g) * time.Second
	}
	return 30 * time.Second
}

func (w *worker) podDir() string {
	return filepath.Join(w.d.rootDir, "pods", string(w.uid))
}

func (w *worker) netnsPath() string { return filepath.Join(w.d.netnsDir, string(w.uid)) }

// setupSandbox prepares what every container of the pod shares: the pod
// directory, volumes and (without hostNetwork) the network namespace.
func (w *worker) setupSandbox(ctx context.Context, pod *v1.Pod) (map[string]string, error) {
	if err := os.MkdirAll(w.podDir(), 0o750); err != nil {
		return nil, fmt.Errorf("pod directory: %w", err)
	}
	vols, refreshAt, err := w.d.volumes.Setup(ctx, pod, w.podDir())
	if err != nil {
		return nil, err
	}
	if err := applyFSGroup(pod, vols); err != nil {
		return nil, err
	}
	if err := w.resolveRuntime(ctx, pod); err != nil {
		return nil, err
	}
	w.refreshAt = refreshAt
	if !pod.Spec.HostNetwork {
		if err := w.d.netns.Create(w.netnsPath()); err != nil {
			return nil, fmt.Errorf("network namespace: %w", err)
		}
		if err := w.attachNetwork(ctx, pod); err != nil {
			return nil, err
		}
	}
	if err := w.setupNameFiles(pod); err != nil {
		return nil, err
	}
	if err := w.setupPodNamespaces(ctx, pod); err != nil {
		return nil, err
	}
	return vols, nil
}

// attachNetwork attaches the pod's network namespace to the pod network
// (CNI ADD, or the recorded attachment after a restart) and keeps its IPs.
func (w *worker) attachNetwork(ctx context.Context, pod *v1.Pod) error {
	if w.d.net == nil {
		return nil
	}
	if err := w.d.net.Status(); err != nil {
		w.d.event(pod, v1.EventTypeWarning, network.NetworkNotReadyReason, "network is not ready: "+err.Error())
		return fmt.Errorf("%w: %w", errNetworkNotReady, err)
	}
	opts, err := network.OptionsForPod(pod)
	if err != nil {
		return fmt.Errorf("pod network options: %w", err)
	}
	res, err := w.d.net.SetUp(ctx, w.netRef(pod), w.netnsPath(), opts)
	if err != nil {
		// containerd's words (the sandbox ID is the pod UID here).
		return fmt.Errorf("failed to setup network for sandbox %q: %w", pod.UID, err)
	}
	w.podIPs = network.PodIPs(res.IPs, net.ParseIP(w.d.hostIP()))
	return nil
}

// logDir holds a pod's container logs (kubelet's /var/log/pods layout).
func (w *worker) logDir(pod *v1.Pod) string {
	return filepath.Join(w.d.rootDir, "logs", pod.Namespace+"_"+pod.Name+"_"+string(pod.UID))
}

func (w *worker) logPath(pod *v1.Pod, name string, attempt uint32) string {
	return filepath.Join(w.logDir(pod), name, strconv.FormatUint(uint64(attempt), 10)+".log")
}

// start creates and starts one attempt of a container. Its failure reason
// is kept for the container's waiting state.
func (w *worker) start(ctx context.Context, pod *v1.Pod, s startAction, vols map[string]string) error {
	c := s.container
	img, reason, err := w.ensureImage(ctx, pod, c)
	if err != nil {
		w.errs[c.Name] = status.Waiting{Reason: reason, Message: err.Error()}
		return fmt.Errorf("container %s: %w", c.Name, err)
	}
	in, err := w.specInputs(ctx, pod, s, vols)
	var spec runtime.ContainerSpec
	if err == nil {
		spec, err = containerspec.Build(ctx, pod, c, in)
	}
	if err != nil {
		w.errs[c.Name] = status.Waiting{Reason: reasonCreateContainerConfig, Message: err.Error()}
		w.d.event(pod, v1.EventTypeWarning, "Failed", fmt.Sprintf("Error: %v", err))
		return fmt.Errorf("container %s: %w", c.Name, err)
	}
	spec.Image = img
	id, err := w.d.rt.CreateContainer(ctx, spec)
	if err != nil {
		w.errs[c.Name] = status.Waiting{Reason: status.ReasonCreateContainer, Message: err.Error()}
		w.d.event(pod, v1.EventTypeWarning, "Failed", fmt.Sprintf("Error: %v", err))
		return fmt.Errorf("container %s: %w", c.Name, err)
	}
	w.d.event(pod, v1.EventTypeNormal, "Created", "Created container "+c.Name)
	w.d.pleg.ExpectWithin(w.uid, id, pleg.ContainerStarted, expectTTL)
	if err := w.d.rt.StartContainer(ctx, id); err != nil {
		w.errs[c.Name] = status.Waiting{Reason: status.ReasonRunContainer, Message: err.Error()}
		w.d.event(pod, v1.EventTypeWarning, "Failed", fmt.Sprintf("Error: %v", err))
		w.noteInterruptedStart(id, err)
		_ = w.d.rt.RemoveContainer(ctx, id)
		return fmt.Errorf("container %s: %w", c.Name, err)
	}
	w.noteStarted(id)
	delete(w.errs, c.Name)
	kind := "new"
	if s.attempt > 0 {
		kind = "restart"
	}
	w.d.met.starts.WithLabelValues(kind).Inc()
	w.d.event(pod, v1.EventTypeNormal, "Started", "Started container "+c.Name)
	w.log.Info("started container", "container", c.Name, "attempt", s.attempt, "containerID", id)
	if err := w.postStart(ctx, pod, c, id); err != nil {
		return fmt.Errorf("container %s: %w", c.Name, err)
	}
	return nil
}

// ensureImage applies the image pull policy and returns the reference to
// create the container from.
func (w *worker) ensureImage(ctx context.Context, pod *v1.Pod, c *v1.Container) (string, string, error) {
	policy := c.ImagePullPolicy
	if policy != v1.PullAlways {
		img, err := w.d.rt.GetImage(ctx, c.Image)
		if err == nil {
			w.imageIDs[c.Image] = img.ID
			w.d.event(pod, v1.EventTypeNormal, reasonPulled, fmt.Sprintf(msgPresentFmt, c.Image))
			return c.Image, "", nil
		}
		if !errors.Is(err, runtime.ErrNotFound) {
			return "", status.ReasonErrImagePull, err
		}
		if policy == v1.PullNever {
			msg := fmt.Sprintf("Container image %q is not present with pull policy of Never", c.Image)
			w.d.event(pod, v1.EventTypeWarning, status.ReasonErrImageNeverPull, msg)
			return "", status.ReasonErrImageNeverPull, errors.New(msg)
		}
	}
	return w.pull(ctx, pod, c)
}

// podIPsOf is status.podIPs: the host's IP for hostNetwork pods, else what
// the pod network gave the pod (none without one).
func (w *worker) podIPsOf(pod *v1.Pod) []string {
	if pod.Spec.HostNetwork {
		if ip := w.d.hostIP(); ip != "" {
			return []string{ip}
		}
		return nil
	}
	return w.podIPs
}

func (w *worker) netRef(pod *v1.Pod) network.PodRef {
	return network.PodRef{Namespace: pod.Namespace, Name: pod.Name, UID: w.uid}
}

// stop stops one container with a grace period, expecting its death. It
// may run concurrently for one pod's containers, so it touches no worker
// state: the caller marks the container reaped.
func (w *worker) stop(ctx context.Context, pod *v1.Pod, c runtime.Container, grace time.Duration) error {
	return w.kill(ctx, pod, c, grace, "Stopping container "+c.Name)
}

// reap deletes the tasks of exited containers so their shims exit; the
// containers stay for their status and logs.
func (w *worker) reap(ctx context.Context, rs pleg.PodStatus) {
	for _, c := range rs.Containers {
		if c.State != runtime.StateExited || w.reaped[c.ID] {
			continue
		}
		if err := w.d.rt.StopContainer(ctx, c.ID, 0); err != nil {
			w.log.Debug("could not release an exited container's task", "containerID", c.ID, "err", err)
			continue
		}
		w.reaped[c.ID] = true
	}
}

// terminate stops a deleted or removed pod: every container with the grace
// period, then (API pods) the final status and the zero-grace delete, then,
// once the source forgot the pod, its containers, volumes and namespace.
func (w *worker) terminate(ctx context.Context, pod *v1.Pod, removed bool, rs pleg.PodStatus) (time.Duration, bool) {
	now := w.d.clock.Now()
	if running := w.toStop(rs); len(running) > 0 {
		w.probed(pod, rs) // liveness and startup probes end with the deletion
		grace := gracePeriod(pod)
		w.log.Info("stopping pod", "gracePeriod", grace, "containers", len(running))
		if err := w.stopRunning(ctx, pod, running, grace); err != nil {
			w.log.Warn("stopping pod failed; retrying", "err", err)
			return w.retry.Step(), false
		}
		return 0, false
	}
	w.settleRequests() // nothing of the pod runs any more
	if w.source == kubetypes.SourceAPI && !removed {
		if w.deleted {
			return w.d.resync, false // waiting for the API to drop it
		}
		st := w.setStatus(ctx, pod, rs, nil, true, now)
		if err := w.d.status.Flush(ctx, w.uid); err != nil {
			w.log.Warn("final pod status not written; retrying", "err", err, "phase", st.Phase)
			return w.retry.Step(), false
		}
		if err := w.d.status.DeletePod(ctx, pod); err != nil && !apierrors.IsNotFound(err) {
			w.log.Warn("pod not deleted from the API; retrying", "err", err)
			return w.retry.Step(), false
		}
		w.deleted = true
		w.log.Info("pod stopped and deleted from the API")
		return w.d.resync, false
	}
	if err := w.cleanup(ctx, pod, rs); err != nil {
		w.log.Warn("pod cleanup failed; retrying", "err", err)
		return w.retry.Step(), false
	}
	w.log.Info("pod removed")
	return 0, true
}

// cleanup removes what the pod left: containers, volumes, network
// namespace, its directory, its mirror pod and its status.
func (w *worker) cleanup(ctx context.Context, pod *v1.Pod, rs pleg.PodStatus) error {
	var errs []error
	for _, c := range rs.Containers {
		w.d.pleg.ExpectWithin(w.uid, c.ID, pleg.ContainerRemoved, expectTTL)
		if err := w.d.rt.RemoveContainer(ctx, c.ID); err != nil {
			errs = append(errs, err)
		}
	}
	if err := w.releaseSandbox(ctx, pod); err != nil {
		errs = append(errs, err)
	}
	if len(errs) == 0 {
		if err := os.RemoveAll(w.podDir()); err != nil {
			errs = append(errs, err)
		}
		// By UID: an orphan found after a restart has no name.
		logs, _ := filepath.Glob(filepath.Join(w.d.rootDir, "logs", "*_"+string(w.uid)))
		for _, d := range logs {
			if err := os.RemoveAll(d); err != nil {
				errs = append(errs, err)
			}
		}
	}
	if w.source == kubetypes.SourceFile {
		if err := w.d.deleteMirror(ctx, pod); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) == 0 {
		w.d.status.Forget(w.uid)
	}
	return errors.Join(errs...)
}

// setStatus computes the pod's status and hands it to the status manager.
func (w *worker) setStatus(ctx context.Context, pod *v1.Pod, rs pleg.PodStatus, waiting map[string]status.Waiting, sandboxReady bool, now time.Time) v1.PodStatus {
	in := status.Input{
		SandboxReady: sandboxReady,
		Waiting:      map[string]status.Waiting{},
		ImageIDs:     w.imageIDs,
		Terminating:  pod.DeletionTimestamp != nil,
		HostIP:       w.d.hostIP(),
		PodIPs:       w.podIPsOf(pod),
		StartTime:    w.startTime,
	}
	if r := w.rejection; r != nil {
		in.Rejected, in.RejectReason, in.RejectMessage = true, r.Reason, r.Message
	}
	for k, v := range w.errs {
		in.Waiting[k] = v
	}
	for k, v := range waiting {
		in.Waiting[k] = v
	}
	w.statusExtras(ctx, pod, rs, &in)
	for _, c := range rs.Containers {
		if _, ok := w.imageIDs[c.Image]; !ok && c.Image != "" {
			if img, err := w.d.rt.GetImage(ctx, c.Image); err == nil {
				w.imageIDs[c.Image] = img.ID
			}
		}
	}
	st := status.Compute(w.withStatus(pod), rs, in, now)
	if !w.reportedRunning && st.Phase == v1.PodRunning && allRunning(st.ContainerStatuses) {
		w.reportedRunning = true
		w.d.met.startDuration.Observe(now.Sub(w.seen).Seconds())
	}
	for name, wt := range in.Waiting {
		if wt.Reason == status.ReasonCrashLoopBackOff && w.backoffEvent[name] != wt.Message {
			w.backoffEvent[name] = wt.Message
			w.d.event(pod, v1.EventTypeWarning, "BackOff", "Back-off restarting failed container "+name+" in pod "+pod.Name+"_"+pod.Namespace+"("+string(pod.UID)+")")
		}
	}
	w.status = &st
	w.terminal.Store(status.PodIsTerminal(st))
	w.d.status.Set(pod, st)
	return st
}
