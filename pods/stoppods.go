package pods

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodeagent/nodeagent/pleg"
	"github.com/nodeagent/nodeagent/pods/kubetypes"
	"github.com/nodeagent/nodeagent/pods/status"
	"github.com/nodeagent/nodeagent/runtime"
)

// StopReason is why the agent stops a pod that nobody deleted: the pod's
// status becomes Failed with Reason and Message, and it gets the
// DisruptionTarget condition (True, TerminationByKubelet, Message), as
// kubelet's killPodFunc callers set them.
type StopReason struct {
	Reason, Message string
}

// Kubelet's status of a pod stopped for a node shutdown
// (pkg/kubelet/nodeshutdown: nodeShutdownReason, nodeShutdownMessage).
var StopForNodeShutdown = StopReason{
	Reason:  "Terminated",
	Message: "Pod was terminated in response to imminent node shutdown.",
}

// Kubelet's rejection of a pod while the node shuts down
// (nodeshutdown.NodeShutdownNotAdmittedReason and its message).
const (
	ReasonNodeShutdown          = "NodeShutdown"
	messageNodeShutdownRejected = "Pod was rejected as the node is shutting down."
)

// shutdownRejection is admission's refusal while the node shuts down.
func (m *Manager) shutdownRejection() *status.Waiting {
	if f := m.opts.ShuttingDown; f != nil && f() != nil {
		return &status.Waiting{Reason: ReasonNodeShutdown, Message: messageNodeShutdownRejected}
	}
	return nil
}

// stopRequest is one StopPods call's demand on one pod's worker.
type stopRequest struct {
	why   StopReason
	grace time.Duration // the upper bound of the pod's own grace period
	once  sync.Once
	done  chan struct{} // closed once nothing of the pod runs and its status was written
}

func (r *stopRequest) finish() { r.once.Do(func() { close(r.done) }) }

// ActivePods returns the pods whose containers may run (kubelet's
// GetActivePods), for node-pressure eviction and node shutdown: known to a
// source, not deleted, not rejected, not in a terminal phase, and not
// already being evicted or stopped by the agent. They are copies, sorted by
// full name.
func (m *Manager) ActivePods() []*v1.Pod {
	m.mu.Lock()
	var pods []*v1.Pod
	for _, w := range m.workers {
		if w.source == sourceOrphan || w.rejected.Load() || w.terminal.Load() {
			continue
		}
		w.mu.Lock()
		p, skip := w.pod, w.removed || w.evictReq != nil || w.stopReq != nil
		w.mu.Unlock()
		if skip || p.DeletionTimestamp != nil {
			continue
		}
		pods = append(pods, p)
	}
	m.mu.Unlock()
	out := make([]*v1.Pod, 0, len(pods))
	for _, p := range pods {
		out = append(out, p.DeepCopy())
	}
	sort.Slice(out, func(i, j int) bool { return kubetypes.FullName(out[i]) < kubetypes.FullName(out[j]) })
	return out
}

// StopPods stops the pods with these UIDs at once, each with the smaller
// of its own grace period and maxGrace (preStop hooks included), marks
// them as why says, and returns once every one has stopped and its status
// was written (nil), or when ctx ends (ctx's error; the stops go on). A
// stopped pod is not started again. Pods the agent does not run are
// skipped; a pod deleted or evicted meanwhile stops as that says, and
// counts as stopped once nothing of it runs.
func (m *Manager) StopPods(ctx context.Context, uids []types.UID, maxGrace time.Duration, why StopReason) error {
	var reqs []*stopRequest
	m.mu.Lock()
	for _, uid := range uids {
		w := m.workers[uid]
		if w == nil {
			continue
		}
		r := &stopRequest{why: why, grace: maxGrace, done: make(chan struct{})}
		w.mu.Lock()
		if old := w.stopReq; old != nil {
			r = old // already asked: wait for that one
		} else {
			w.stopReq = r
		}
		w.mu.Unlock()
		w.poke()
		reqs = append(reqs, r)
	}
	m.mu.Unlock()
	var left int
	for _, r := range reqs {
		select {
		case <-r.done:
		case <-ctx.Done():
			left++
		}
	}
	if left > 0 {
		return fmt.Errorf("%d of %d pods not stopped: %w", left, len(reqs), ctx.Err())
	}
	return nil
}

// stopGrace is a pod's grace period under a stop request: its own, but at
// most the request's.
func stopGrace(pod *v1.Pod, max time.Duration) time.Duration {
	return min(gracePeriod(pod), max)
}

// enforceStop carries out a StopPods request: it stops every container
// (hooks first, in the sidecar order, at most the request's grace), then
// writes the pod's Failed status and tells the caller. It reports whether
// a request is pending (the sync is done) and when to sync next (0: at
// once, to see the containers' ends).
func (w *worker) enforceStop(ctx context.Context, pod *v1.Pod, rs pleg.PodStatus, now time.Time) (time.Duration, bool, error) {
	w.mu.Lock()
	req := w.stopReq
	w.mu.Unlock()
	if req == nil {
		return 0, false, nil
	}
	if w.stopHit == nil {
		w.stopHit = req
	}
	if running := w.toStop(rs); len(running) > 0 {
		grace := stopGrace(pod, req.grace)
		w.log.Info("stopping pod", "reason", req.why.Reason, "gracePeriod", grace, "containers", len(running))
		// The next sync sees the containers' ends and writes the status.
		return 0, true, w.stopRunning(ctx, pod, running, grace)
	}
	st := w.setStatus(ctx, pod, rs, nil, true, now)
	if !status.PodIsTerminal(st) {
		return 0, true, fmt.Errorf("pod status after the stop is %s, not terminal", st.Phase)
	}
	if err := w.d.status.Flush(ctx, w.uid); err != nil {
		return 0, true, fmt.Errorf("pod status not written: %w", err)
	}
	if err := w.stopFinishedPause(ctx, pod); err != nil {
		return 0, true, err
	}
	w.settleRequests()
	return w.d.resync, true, nil
}

// stopRunning stops the given running containers of the pod all at once,
// in kubelet's order (sidecars after the app containers), each with at
// most grace (preStop hooks included), keeping the status current
// meanwhile. Every stop path of the worker uses it: deletion, eviction,
// node shutdown, the active deadline, a rejected pod.
func (w *worker) stopRunning(ctx context.Context, pod *v1.Pod, running []runtime.Container, grace time.Duration) error {
	var wg sync.WaitGroup
	errs := make([]error, len(running))
	w.stopAll(ctx, pod, running, grace, &wg, errs)
	w.whileStopping(ctx, pod, &wg)
	for i, c := range running {
		if errs[i] == nil {
			w.reaped[c.ID] = true
		}
	}
	return errors.Join(errs...)
}

// settleRequests ends what waits for the pod to stop (Evict, StopPods)
// once nothing of it runs, whichever path stopped it: an evicted pod asked
// to stop for a node shutdown, or a pod deleted meanwhile, does not keep
// its caller waiting until its context ends.
func (w *worker) settleRequests() {
	w.mu.Lock()
	e, r := w.evictReq, w.stopReq
	w.mu.Unlock()
	if e != nil {
		e.finish()
	}
	if r != nil {
		r.finish()
	}
}

// stopFinishedPause releases the sandbox (pause, namespaces, network,
// volumes, cgroup: releaseFinished) of a finished pod the agent stopped
// itself (such a pod is not synced again), as kubelet stops a finished
// pod's sandbox.
func (w *worker) stopFinishedPause(ctx context.Context, pod *v1.Pod) error {
	if !w.terminal.Load() {
		return nil
	}
	return w.releaseFinished(ctx, pod)
}
