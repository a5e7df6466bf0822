package pods

import (
	"time"

	v1 "k8s.io/api/core/v1"
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

// podStartTime is the pod's status.startTime, the start of its deadline:
// as last computed (last; nil: none yet), else as its source has it.
func podStartTime(last *v1.PodStatus, pod *v1.Pod) time.Time {
	switch {
	case last != nil && last.StartTime != nil:
		return last.StartTime.Time
	case pod.Status.StartTime != nil:
		return pod.Status.StartTime.Time
	}
	return time.Time{}
}
