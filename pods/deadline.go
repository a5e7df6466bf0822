package pods

import (
	"context"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/nodeagent/nodeagent/pleg"
	"github.com/nodeagent/nodeagent/pods/status"
)

// Kubelet's reason and message for a pod past its activeDeadlineSeconds.
const (
	ReasonDeadlineExceeded  = "DeadlineExceeded"
	messageDeadlineExceeded = "Pod was active on the node longer than the specified deadline"
)

// deadlineAt is when a pod that started at start passes its
// activeDeadlineSeconds (zero: no deadline, or not started).
func deadlineAt(pod *v1.Pod, start time.Time) time.Time {
	if pod.Spec.ActiveDeadlineSeconds == nil || start.IsZero() {
		return time.Time{}
	}
	return start.Add(time.Duration(*pod.Spec.ActiveDeadlineSeconds) * time.Second)
}

// podStartTime is the pod's status.startTime, the start of its deadline.
func (w *worker) podStartTime(pod *v1.Pod) time.Time {
	switch {
	case w.status != nil && w.status.StartTime != nil:
		return w.status.StartTime.Time
	case pod.Status.StartTime != nil:
		return pod.Status.StartTime.Time
	}
	return time.Time{}
}

// deadline is when the worker must wake to enforce the pod's deadline
// (zero: never).
func (w *worker) deadline(pod *v1.Pod) time.Time {
	if w.deadlineHit != nil || (w.status != nil && status.PodIsTerminal(*w.status)) {
		return time.Time{}
	}
	return deadlineAt(pod, w.podStartTime(pod))
}

// enforceDeadline fails a pod past its activeDeadlineSeconds as kubelet
// does (Failed, DeadlineExceeded, an event) and stops its containers. It
// reports whether the pod is past its deadline (the sync is done).
func (w *worker) enforceDeadline(ctx context.Context, pod *v1.Pod, rs pleg.PodStatus, now time.Time) (time.Duration, bool, error) {
	if w.deadlineHit == nil {
		at := w.deadline(pod)
		if at.IsZero() || now.Before(at) {
			return 0, false, nil
		}
		w.deadlineHit = &status.Waiting{Reason: ReasonDeadlineExceeded, Message: messageDeadlineExceeded}
		w.log.Info("pod is past its active deadline; stopping it", "activeDeadlineSeconds", *pod.Spec.ActiveDeadlineSeconds)
		w.d.event(pod, v1.EventTypeNormal, ReasonDeadlineExceeded, messageDeadlineExceeded)
	}
	w.setStatus(ctx, pod, rs, nil, true, now)
	if running := w.toStop(rs); len(running) > 0 {
		// The next sync, at once, waits for the containers' ends and
		// writes them into the status.
		return 0, true, w.stopRunning(ctx, pod, running, gracePeriod(pod))
	}
	return w.d.resync, true, w.stopFinishedPause(ctx, pod)
}
