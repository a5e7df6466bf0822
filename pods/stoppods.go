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

	"github.com/nodeagent/nodeagent/kubetypes"
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

// ActivePods returns the pods whose containers may run (kubelet's
// GetActivePods), for node-pressure eviction and node shutdown: known to a
// source, not deleted, not rejected, not in a terminal phase, and not
// already being evicted or stopped by the agent. They are copies, sorted by
// full name.
func (m *Manager) ActivePods() []*v1.Pod {
	m.mu.Lock()
	var pods []*v1.Pod
	for _, w := range m.workers {
		if p, ok := w.active(); ok {
			pods = append(pods, p)
		}
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
	var reqs []*termination
	st := termStatus{reason: why.Reason, message: why.Message, disruption: true}
	m.mu.Lock()
	for _, uid := range uids {
		if w := m.workers[uid]; w != nil {
			// A pod already terminating for another reason (or asked to
			// stop before) is waited for as that says.
			reqs = append(reqs, w.requestTermination(newTermination(termStop, maxGrace, st)))
		}
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

// stopRunning stops the given running containers of the pod all at once,
// in kubelet's order (sidecars after the app containers), each with at
// most grace (preStop hooks included), keeping the status current
// meanwhile. Every stop path of the worker uses it: deletion, eviction,
// node shutdown, the active deadline, a rejected pod.
func (w *worker) stopRunning(ctx context.Context, pod *v1.Pod, running []runtime.Container, grace time.Duration) error {
	var wg sync.WaitGroup
	errs := make([]error, len(running))
	for _, c := range running {
		w.tasks.stopping[c.ID] = true
	}
	w.killer.stopAll(ctx, pod, running, grace, w.podIP(pod), &wg, errs)
	w.whileStopping(ctx, pod, &wg)
	for i, c := range running {
		delete(w.tasks.stopping, c.ID)
		if errs[i] == nil {
			w.tasks.reaped[c.ID] = true
		}
	}
	return errors.Join(errs...)
}

// whileStopping waits for a terminating pod's containers to stop (wg),
// reporting its status again whenever the worker is woken meanwhile (a
// readiness probe failed: the pod goes unready while its containers run
// their preStop hooks and grace periods, as with kubelet). The stopping
// goroutines touch no worker state. The caller syncs again at once after,
// so a wake consumed here for another reason is not lost.
func (w *worker) whileStopping(ctx context.Context, pod *v1.Pod, wg *sync.WaitGroup) {
	done := make(chan struct{})
	go func() {
		wg.Wait()
		close(done)
	}()
	for {
		select {
		case <-done:
			return
		case <-w.wake:
			if rs, ok := w.d.cache.Get(w.uid); ok {
				w.setStatus(ctx, pod, rs, nil, true, w.d.clock.Now())
			}
			select {
			case <-done:
				return
			case <-ctx.Done():
				<-done
				return
			case <-w.d.clock.After(time.Second): // at most one status a second
			}
		case <-ctx.Done():
			<-done
			return
		}
	}
}
