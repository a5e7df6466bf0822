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
	"sync/atomic"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	utilptr "k8s.io/utils/ptr"

	"github.com/nodeagent/nodeagent/kubetypes"
	"github.com/nodeagent/nodeagent/network"
	"github.com/nodeagent/nodeagent/pleg"
	"github.com/nodeagent/nodeagent/pods/containerspec"
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

// worker is a pod's syncer (podSyncer): it makes the pod's containers
// match its spec, stops them when the pod terminates, and keeps what it
// needs of the pod between syncs (back-offs, start failures, image IDs,
// the last status). Its podWorker calls it from the pod's goroutine only.
type worker struct {
	d      *workerDeps
	uid    types.UID
	source string
	log    *slog.Logger
	// wake is the podWorker's: a wake-up while the pod stops reports its
	// status again (whileStopping).
	wake <-chan struct{}
	// terminal is the podWorker's: set with each computed status.
	terminal *atomic.Bool

	backoff   map[string]crashLoop
	errs      map[string]status.Waiting // per container: why its last start failed
	images    podImages                 // pulls and image IDs (images.go)
	tasks     podTasks                  // stopped, released and drained containers (exits.go)
	status    *v1.PodStatus             // last computed (setStatus)
	report    statusReport
	podIPs    []string  // from the pod network (not hostNetwork pods)
	refreshAt time.Time // projected volumes need refreshing then (zero: never)
	ended     termState // what the pod's end did (terminate.go, finished.go)
	names     podNames  // the pod's name-service files (namefiles.go)
	// runtimeType is the containerd runtime of the pod's RuntimeClass
	// handler ("": the default); nil until resolved.
	runtimeType *string
	ns          podNamespaces   // IPC, UTS and PID namespaces (podns.go)
	starts      startTracker    // stale and interrupted starts (stalestart.go)
	killer      containerKiller // stops containers, runs hooks (killer.go)
	probes      podProbes       // the prober's view of the pod (probes.go)
}

var _ podSyncer = (*worker)(nil)

func allRunning(cs []v1.ContainerStatus) bool {
	for _, c := range cs {
		if c.State.Running == nil {
			return false
		}
	}
	return len(cs) > 0
}

// newWorker makes a pod's syncer. Its podWorker sets wake and terminal
// (newPodWorkerPair).
func newWorker(d *workerDeps, pod *v1.Pod, src string, log *slog.Logger) *worker {
	now := d.clock.Now()
	w := &worker{
		d: d, uid: pod.UID, source: src, log: log,
		terminal: &atomic.Bool{},
		backoff:  map[string]crashLoop{},
		errs:     map[string]status.Waiting{},
		images:   newPodImages(d, pod.UID, src, log),
		tasks:    podTasks{reaped: map[string]bool{}, drained: map[string]bool{}, stopping: map[string]bool{}},
		report:   statusReport{startTime: now, seen: now, backoffEvent: map[string]string{}},
		ns:       newPodNamespaces(d, pod.UID, log),
		starts:   startTracker{uid: pod.UID, pleg: d.pleg, log: log},
		killer:   newContainerKiller(d, pod.UID, log),
		probes:   podProbes{uid: pod.UID, prober: d.probes},
	}
	if pod.Status.StartTime != nil {
		w.report.startTime = pod.Status.StartTime.Time
	}
	return w
}

// newPodWorkerPair makes a pod's state machine and its syncer.
func newPodWorkerPair(d *workerDeps, pod *v1.Pod, src string, log *slog.Logger) *podWorker {
	log = log.With("pod", kubetypes.FullName(pod), "podUID", pod.UID)
	s := newWorker(d, pod, src, log)
	pw := newPodWorker(d, pod, src, s, log)
	s.wake, s.terminal = pw.wake, &pw.terminal
	return pw
}

// sourceOrphan is the source of a pod no source knows any more.
const sourceOrphan = "orphan"

// newOrphanWorker makes the worker that removes what a pod no source knows
// left on the host (its containers, directory, network namespace, logs).
func newOrphanWorker(d *workerDeps, ref runtime.PodRef, log *slog.Logger) *podWorker {
	orphan := &v1.Pod{}
	orphan.UID, orphan.Name, orphan.Namespace = ref.UID, ref.Name, ref.Namespace
	orphan.Spec.TerminationGracePeriodSeconds = utilptr.To[int64](orphanGrace)
	w := newPodWorkerPair(d, orphan, sourceOrphan, log)
	w.remove()
	return w
}

// SyncPod makes a running pod's containers match its spec. It reports
// whether it acted (the caller syncs again once the PLEG saw it) and when
// the pod needs a sync (a held-back restart, a volume refresh).
func (w *worker) SyncPod(ctx context.Context, pod *v1.Pod, rs pleg.PodStatus, now time.Time) (syncResult, error) {
	if w.log.Enabled(ctx, slog.LevelDebug) {
		t := newStepTrace(w.d.clock)
		ctx = withStepTrace(ctx, t)
		defer func() { w.log.Debug("pod sync steps", t.attrs...) }()
	}
	acted, wakeAt, err := w.sync(ctx, pod, rs, now)
	if err != nil || acted {
		return syncResult{acted: acted}, err
	}
	if r := w.refreshAt; !r.IsZero() && (wakeAt.IsZero() || r.Before(wakeAt)) {
		wakeAt = r
	}
	return syncResult{wakeAt: wakeAt}, nil
}

// sync makes a running pod's containers match its spec. It reports whether
// it acted (the caller syncs again once the PLEG saw it), when a held-back
// container may restart, and the first error.
func (w *worker) sync(ctx context.Context, pod *v1.Pod, rs pleg.PodStatus, now time.Time) (_ bool, _ time.Time, err error) {
	if w.d.host.terminatingSibling(w.uid, pod) {
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
	if w.startsUserNamespacedPod(pod) {
		w.d.met.usernsStarted.Inc()
		defer func() {
			if err != nil {
				w.d.met.usernsErrors.Inc()
			}
		}()
	}
	// What runs is the pod's allocation (an in-place resize: resize.go).
	pod = w.d.resize.allocate(ctx, pod, now)
	stepTraceFrom(ctx).step("allocate")
	vols, sandboxErr := w.setupSandbox(ctx, pod)
	stepTraceFrom(ctx).step("sandbox")
	if sandboxErr != nil {
		sandboxEvents(w.d.event, pod, sandboxErr)
		w.setStatus(ctx, pod, rs, nil, false, now)
		return false, time.Time{}, sandboxErr
	}
	stopped, acted, err := w.probes.killUnhealthy(ctx, pod, rs, w.tasks.reaped, &w.killer, w.podIP(pod))
	stepTraceFrom(ctx).step("probes")
	for _, id := range stopped {
		w.tasks.reaped[id] = true
	}
	if acted || err != nil {
		return true, time.Time{}, err
	}
	if w.starts.waitForStarts(rs) {
		return true, time.Time{}, nil
	}
	rs = w.starts.unstarted(rs)
	// A failed resize is in the status (PodResizeInProgress, Error) and
	// returned at the end, so that the sync is retried.
	resized, resizeErr := w.resizeRunning(ctx, pod, rs, now)
	if resized {
		return true, time.Time{}, resizeErr
	}
	p := computePlanProbed(w.withStatus(pod), rs, w.backoff, w.probes.started, now)
	stepTraceFrom(ctx).step("plan")
	if !retryAt.IsZero() && (p.wakeAt.IsZero() || retryAt.Before(p.wakeAt)) {
		p.wakeAt = retryAt
	}
	if p.empty() {
		// The status first: it reports the exits the PLEG saw, once
		// their logs are complete (settleExits), which releasing their
		// tasks (a runtime call that waits for the shim) does not
		// change; a pod's Succeeded or Failed is not held back behind it.
		w.setStatus(ctx, pod, rs, p.waiting, true, now)
		stepTraceFrom(ctx).step("status")
		w.reap(ctx, rs)
		stepTraceFrom(ctx).step("reap")
		if w.finished(pod) {
			return true, p.wakeAt, resizeErr // the next sync releases its sandbox
		}
		return false, p.wakeAt, resizeErr
	}
	if w.status == nil {
		// A new pod says Pending/ContainerCreating (with its start time)
		// before the first start, which may pull an image.
		w.setStatus(ctx, pod, rs, p.waiting, true, now)
		stepTraceFrom(ctx).step("status")
	}
	errs := []error{resizeErr}
	for _, k := range p.kill {
		w.log.Info("stopping container", "container", k.c.Name, "containerID", k.c.ID, "reason", k.reason)
		if err := w.killer.kill(ctx, pod, k.c, gracePeriod(pod), "Stopping container "+k.c.Name, w.podIP(pod)); err != nil {
			errs = append(errs, err)
			continue
		}
		w.tasks.reaped[k.c.ID] = true
	}
	for _, c := range p.remove {
		w.d.pleg.ExpectWithin(w.uid, c.ID, pleg.ContainerRemoved, expectTTL)
		if err := w.d.rt.RemoveContainer(ctx, c.ID); err != nil {
			errs = append(errs, err)
		}
	}
	if err := w.ns.ensurePause(ctx, pod, w.names.utsHostname, w.netnsPath(), len(p.start) > 0); err != nil {
		sandboxEvents(w.d.event, pod, err)
		errs, p.start = append(errs, err), nil
	}
	stepTraceFrom(ctx).step("stopRemovePause")
	for _, s := range p.start {
		if err := w.start(ctx, pod, s, vols); err != nil {
			errs = append(errs, err)
			continue
		}
		if b, ok := p.backoff[s.container.Name]; ok {
			w.backoff[s.container.Name] = b
		}
	}
	if err := errors.Join(errs...); err != nil {
		w.setStatus(ctx, pod, rs, p.waiting, true, now)
		return true, time.Time{}, err
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
	stepTraceFrom(ctx).step("volumes")
	if err != nil {
		return nil, err
	}
	if err := w.resolveRuntime(ctx, pod); err != nil {
		return nil, err
	}
	if err := w.resolveUserNamespace(ctx, pod); err != nil {
		return nil, err
	}
	if err := w.setupUserNamespace(pod); err != nil {
		return nil, err
	}
	w.refreshAt = refreshAt
	if !pod.Spec.HostNetwork {
		err := w.d.netns.Create(w.netnsPath())
		stepTraceFrom(ctx).step("netns")
		if err != nil {
			return nil, fmt.Errorf("network namespace: %w", err)
		}
		err = w.attachNetwork(ctx, pod)
		stepTraceFrom(ctx).step("network")
		if err != nil {
			return nil, err
		}
	}
	if err := w.setupNameFiles(pod); err != nil {
		return nil, err
	}
	err = w.ns.setup(ctx, pod, w.names.utsHostname, w.terminal.Load())
	stepTraceFrom(ctx).step("namespaces")
	if err != nil {
		return nil, err
	}
	return vols, nil
}

// attachNetwork attaches the pod's network namespace to the pod network
// (CNI ADD, or the recorded attachment after a restart) and keeps its IPs.
func (w *worker) attachNetwork(ctx context.Context, pod *v1.Pod) error {
	if w.d.net == nil || w.ns.attached {
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
	res, err := w.d.net.SetUp(ctx, netRef(pod), w.netnsPath(), opts)
	if err != nil {
		// containerd's words (the sandbox ID is the pod UID here).
		return fmt.Errorf("failed to setup network for sandbox %q: %w", pod.UID, err)
	}
	w.podIPs = network.PodIPs(res.IPs, net.ParseIP(w.d.hostIP()))
	w.ns.attached = true
	return nil
}

// containerLogPath is the log of attempt of the container name of pod:
// kubelet's podLogsDir layout (as crilog.ContainerLogPath), under the pod's
// log directory <ns>_<name>_<uid> (removed with the pod by the manager,
// podlogs.go).
func containerLogPath(podLogsDir string, pod *v1.Pod, name string, attempt uint32) string {
	dir := filepath.Join(podLogsDir, pod.Namespace+"_"+pod.Name+"_"+string(pod.UID))
	return filepath.Join(dir, name, strconv.FormatUint(uint64(attempt), 10)+".log")
}

// start creates and starts one attempt of a container. Its failure reason
// is kept for the container's waiting state.
func (w *worker) start(ctx context.Context, pod *v1.Pod, s startAction, vols map[string]string) error {
	c := s.container
	img, reason, err := w.images.ensure(ctx, pod, c)
	stepTraceFrom(ctx).step("image")
	if err != nil {
		w.errs[c.Name] = status.Waiting{Reason: reason, Message: err.Error()}
		return fmt.Errorf("container %s: %w", c.Name, err)
	}
	vols, waiting, err := w.mountImageVolumes(ctx, pod, c, vols)
	if err != nil {
		w.errs[c.Name] = *waiting
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
	spec.UserNamespace = w.ns.user
	stepTraceFrom(ctx).step("spec")
	id, err := w.d.rt.CreateContainer(ctx, spec)
	stepTraceFrom(ctx).step("create")
	if err != nil {
		w.errs[c.Name] = status.Waiting{Reason: status.ReasonCreateContainer, Message: err.Error()}
		w.d.event(pod, v1.EventTypeWarning, "Failed", fmt.Sprintf("Error: %v", err))
		return fmt.Errorf("container %s: %w", c.Name, err)
	}
	w.d.event(pod, v1.EventTypeNormal, "Created", "Created container "+c.Name)
	w.d.pleg.ExpectWithin(w.uid, id, pleg.ContainerStarted, expectTTL)
	err = w.d.rt.StartContainer(ctx, id)
	stepTraceFrom(ctx).step("start")
	if err != nil {
		w.errs[c.Name] = status.Waiting{Reason: status.ReasonRunContainer, Message: err.Error()}
		w.d.event(pod, v1.EventTypeWarning, "Failed", fmt.Sprintf("Error: %v", err))
		w.starts.noteInterruptedStart(id, err)
		_ = w.d.rt.RemoveContainer(ctx, id)
		return fmt.Errorf("container %s: %w", c.Name, err)
	}
	w.starts.noteStarted(id)
	w.d.resize.started(pod, c)
	stepTraceFrom(ctx).step("actuated")
	delete(w.errs, c.Name)
	kind := "new"
	if s.attempt > 0 {
		kind = "restart"
	}
	w.d.met.starts.WithLabelValues(kind).Inc()
	w.d.event(pod, v1.EventTypeNormal, "Started", "Started container "+c.Name)
	w.log.Info("started container", "container", c.Name, "attempt", s.attempt, "containerID", id)
	killed, err := w.killer.postStart(ctx, pod, c, id, w.podIP(pod))
	stepTraceFrom(ctx).step("postStart")
	if killed {
		w.tasks.reaped[id] = true
	}
	if err != nil {
		return fmt.Errorf("container %s: %w", c.Name, err)
	}
	return nil
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

// podIP is the pod's first IP (status.podIP), "" without one.
func (w *worker) podIP(pod *v1.Pod) string {
	if ips := w.podIPsOf(pod); len(ips) > 0 {
		return ips[0]
	}
	return ""
}

// netRef names the pod to the pod network.
func netRef(pod *v1.Pod) network.PodRef {
	return network.PodRef{Namespace: pod.Namespace, Name: pod.Name, UID: pod.UID}
}

// reap deletes the tasks of exited containers so their shims exit; the
// containers stay for their status and logs.
func (w *worker) reap(ctx context.Context, rs pleg.PodStatus) {
	for _, c := range rs.Containers {
		if c.State != runtime.StateExited || w.tasks.reaped[c.ID] {
			continue
		}
		if err := w.d.rt.StopContainer(ctx, c.ID, 0); err != nil {
			w.log.Debug("could not release an exited container's task", "containerID", c.ID, "err", err)
			continue
		}
		w.tasks.reaped[c.ID] = true
	}
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
	if len(errs) == 0 && w.d.userns != nil {
		// The containers are gone: the pod's IDs are free (kubelet
		// releases them when it removes the pod's directory).
		if err := w.d.userns.Release(w.uid); err != nil {
			errs = append(errs, err)
		}
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

// statusReport is what a worker remembers of the statuses it reported.
type statusReport struct {
	startTime time.Time // status.startTime
	// seen is when the agent first saw the pod; running says the start
	// duration was observed.
	seen         time.Time
	running      bool
	backoffEvent map[string]string // container → back-off message last reported
	messages     map[string]string // termination messages by container ID (termination.go)
}

// setStatus computes the pod's status and hands it to the status manager.
func (w *worker) setStatus(ctx context.Context, pod *v1.Pod, rs pleg.PodStatus, waiting map[string]status.Waiting, sandboxReady bool, now time.Time) v1.PodStatus {
	if w.ended.final && w.status != nil {
		return *w.status
	}
	// No exit is reported before its container's log is complete.
	w.settleExits(ctx, rs)
	in := status.Input{
		SandboxReady: sandboxReady,
		Waiting:      map[string]status.Waiting{},
		ImageIDs:     w.images.ids,
		Terminating:  pod.DeletionTimestamp != nil,
		HostIP:       w.d.hostIP(),
		PodIPs:       w.podIPsOf(pod),
		StartTime:    w.report.startTime,
	}
	if f := w.ended.failure; f != nil && f.rejected {
		in.Rejected, in.RejectReason, in.RejectMessage = true, f.reason, f.message
	}
	for k, v := range w.errs {
		in.Waiting[k] = v
	}
	for k, v := range waiting {
		in.Waiting[k] = v
	}
	pod = w.d.resize.withAllocation(pod)
	in.Resources, in.ResizeConditions = w.d.resize.statusInputs(pod, rs)
	w.statusExtras(ctx, pod, rs, &in)
	w.images.learnIDs(ctx, rs)
	st := status.Compute(w.withStatus(pod), rs, in, now)
	if !w.report.running && st.Phase == v1.PodRunning && allRunning(st.ContainerStatuses) {
		w.report.running = true
		w.d.met.startDuration.Observe(now.Sub(w.report.seen).Seconds())
	}
	for name, wt := range in.Waiting {
		if wt.Reason == status.ReasonCrashLoopBackOff && w.report.backoffEvent[name] != wt.Message {
			w.report.backoffEvent[name] = wt.Message
			w.d.event(pod, v1.EventTypeWarning, "BackOff", "Back-off restarting failed container "+name+" in pod "+pod.Name+"_"+pod.Namespace+"("+string(pod.UID)+")")
		}
	}
	if status.PodIsTerminal(st) && !w.finished(pod) {
		// Once, when the worker decides it: what the pod ended with
		// (its phase never changes again), for a journal kept at INFO.
		w.log.Info("pod finished", "phase", st.Phase, "reason", st.Reason, "containers", containerEnds(st))
	}
	w.status = &st
	w.terminal.Store(status.PodIsTerminal(st))
	w.ended.final = w.ended.released && status.PodIsTerminal(st)
	w.d.status.Set(pod, st)
	return st
}

// containerEnds summarises how a status's init and app containers ended:
// name=exitCode/reason for each terminated one, name=state otherwise.
func containerEnds(st v1.PodStatus) []string {
	var out []string
	for _, list := range [][]v1.ContainerStatus{st.InitContainerStatuses, st.ContainerStatuses} {
		for _, cs := range list {
			switch {
			case cs.State.Terminated != nil:
				out = append(out, fmt.Sprintf("%s=%d/%s", cs.Name, cs.State.Terminated.ExitCode, cs.State.Terminated.Reason))
			case cs.State.Running != nil:
				out = append(out, cs.Name+"=running")
			case cs.State.Waiting != nil:
				out = append(out, cs.Name+"=waiting/"+cs.State.Waiting.Reason)
			}
		}
	}
	return out
}

// statusExtras adds to a status's input what the probes, the termination
// messages and the termination in force (terminate.go) say.
func (w *worker) statusExtras(ctx context.Context, pod *v1.Pod, rs pleg.PodStatus, in *status.Input) {
	if w.ended.failure != nil || status.PodIsTerminal(w.withStatus(pod).Status) {
		w.probes.remove()
	} else {
		in.Probed = w.probes.update(pod, rs, w.podIP(pod))
	}
	in.Messages = w.terminationMessages(ctx, pod, rs)
	if f := w.ended.failure; f != nil && !f.rejected {
		in.FailReason, in.FailMessage = f.reason, f.message
		if f.disruption {
			in.Disruption = f.message
		}
	}
}
