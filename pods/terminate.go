package pods

import (
	"context"
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/nodeagent/nodeagent/pleg"
	"github.com/nodeagent/nodeagent/pods/status"
)

// The syncer's half of the one termination path (the podWorker's half is
// syncTermination): whatever ends a pod, its running containers are
// stopped with the termination's grace period, in kubelet's order; then
// its status is written as the termination says and the termination's
// after-steps run. What differs between reasons is data, in termPolicy.

// termState is what a worker keeps of its pod's end.
type termState struct {
	// failure is what the termination in force writes into the status
	// (nil: none).
	failure *termStatus
	// deleted: the zero-grace API delete was sent.
	deleted bool
	// released: the finished pod's sandbox was released (finished.go).
	released bool
	// final: the finished pod's status was computed after its sandbox's
	// release. kubelet's pod worker is done with such a pod and never
	// computes its status again (a deletion bumps metadata.generation,
	// which would otherwise be written as status.observedGeneration, with
	// the released sandbox's PodReadyToStartContainers flipped back to
	// True): setStatus keeps it as it is.
	final bool
	// volumesDown: the pod's volumes were torn down before its API
	// delete (SyncTerminatedPod); releaseSandbox does not repeat it.
	volumesDown bool
}

// termPolicy is what a termination reason asks besides stopping the
// containers.
type termPolicy struct {
	// statusFirst: the status is written before the containers stop
	// (an eviction's DisruptionTarget, a deadline's), with sandboxReady.
	statusFirst bool
	// sandboxReady is the status's PodReadyToStartContainers.
	sandboxReady bool
	// flush: the status is written to the API before the termination
	// completes (node shutdown: it must be Failed when StopPods returns;
	// deletion: before the API delete).
	flush bool
	// release: the finished pod's sandbox is released (finished.go).
	release bool
	// finishFirst: whoever waits is told as soon as nothing runs.
	finishFirst bool
}

var termPolicies = map[termReason]termPolicy{
	termDeadline:  {statusFirst: true, sandboxReady: true, release: true},
	termStop:      {sandboxReady: true, flush: true, release: true},
	termEviction:  {statusFirst: true, sandboxReady: false, release: true},
	termRejection: {sandboxReady: false},
	termDeletion:  {sandboxReady: true, flush: true, finishFirst: true},
	termRemoval:   {finishFirst: true},
}

// SyncTerminatingPod stops what runs of the pod for t, all at once, in
// kubelet's order (sidecars after the app containers), each container
// with t's grace period (preStop hooks included). It reports whether
// nothing runs any more.
func (w *worker) SyncTerminatingPod(ctx context.Context, pod *v1.Pod, rs pleg.PodStatus, t *termination, now time.Time) (bool, error) {
	if t.status != (termStatus{}) && (w.ended.failure == nil || *w.ended.failure != t.status) {
		st := t.status
		w.ended.failure = &st
		if t.reason != termRejection && t.reason != termDeadline {
			w.log.Info("terminating pod", "reason", t.reason, "statusReason", st.reason, "message", st.message, "gracePeriod", t.gracePeriod(pod))
		}
	}
	running := w.toStop(rs)
	if len(running) == 0 {
		return true, nil
	}
	p := termPolicies[t.reason]
	switch {
	case p.statusFirst:
		w.setStatus(ctx, pod, rs, nil, p.sandboxReady, now)
	case t.reason == termDeletion || t.reason == termRemoval:
		w.probes.update(pod, rs, w.podIP(pod)) // liveness and startup probes end with the deletion
	}
	grace := t.gracePeriod(pod)
	w.log.Info("stopping pod", "reason", t.reason, "gracePeriod", grace, "containers", len(running))
	return false, w.stopRunning(ctx, pod, running, grace)
}

// SyncTerminatedPod carries out what t asks once nothing of the pod runs:
// the status it promises (written to the API when it must be), the
// release of a finished pod's sandbox, the zero-grace API delete of a
// deleted API pod, the cleanup of a removed one (the worker is then
// done); then it tells whoever waits.
func (w *worker) SyncTerminatedPod(ctx context.Context, pod *v1.Pod, rs pleg.PodStatus, t *termination, now time.Time) (time.Duration, bool, error) {
	p := termPolicies[t.reason]
	if p.finishFirst {
		t.finish()
	}
	if t.reason == termRemoval {
		if err := w.cleanup(ctx, pod, rs); err != nil {
			return 0, false, fmt.Errorf("pod cleanup: %w", err)
		}
		w.log.Info("pod removed")
		return 0, true, nil
	}
	if w.ended.deleted {
		return w.d.resync, false, nil // waiting for the API to drop it
	}
	st := w.setStatus(ctx, pod, rs, nil, p.sandboxReady, now)
	if p.flush {
		if t.reason == termStop && !status.PodIsTerminal(st) {
			return 0, false, fmt.Errorf("pod status after the stop is %s, not terminal", st.Phase)
		}
		if err := w.d.status.Flush(ctx, w.uid); err != nil {
			return 0, false, fmt.Errorf("final pod status (%s) not written: %w", st.Phase, err)
		}
	}
	if p.release && w.terminal.Load() {
		// A finished pod the agent stopped itself is not synced again:
		// its sandbox is released here (pause, namespaces, network,
		// volumes, cgroup: releaseFinished), as kubelet stops a finished
		// pod's sandbox.
		if err := w.releaseFinished(ctx, pod); err != nil {
			return 0, false, err
		}
	}
	if t.reason == termDeletion {
		// kubelet deletes a pod from the API only once its volumes are
		// torn down (SyncTerminatedPod waits for the unmount; the status
		// manager deletes once the pod's resources are reclaimed): the
		// claims' protection finalizers go with the pod object, and a PV
		// whose reclaim policy is Delete must not be deleted while this
		// node still has it published.
		if err := w.teardownVolumes(); err != nil {
			return 0, false, fmt.Errorf("the pod's volumes are not torn down, it stays in the API: %w", err)
		}
		if err := w.d.status.DeletePod(ctx, pod); err != nil && !apierrors.IsNotFound(err) {
			return 0, false, fmt.Errorf("pod not deleted from the API: %w", err)
		}
		w.ended.deleted = true
		w.log.Info("pod stopped and deleted from the API")
	}
	t.finish()
	return w.d.resync, false, nil
}

// Deadline is when the pod passes its activeDeadlineSeconds (zero: no
// deadline, not started, or already terminal).
func (w *worker) Deadline(pod *v1.Pod) time.Time {
	if w.status != nil && status.PodIsTerminal(*w.status) {
		return time.Time{}
	}
	return deadlineAt(pod, podStartTime(w.status, pod))
}
