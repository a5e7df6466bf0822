package pods

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodeagent/nodeagent/pleg"
	"github.com/nodeagent/nodeagent/pods/status"
	"github.com/nodeagent/nodeagent/runtime"
)

// ErrNoSuchPod: the agent runs no pod with that UID.
var ErrNoSuchPod = errors.New("no such pod")

// evictRequest is a node-pressure eviction asked of a worker.
type evictRequest struct {
	grace   time.Duration
	reason  string
	message string
	// noCondition: no DisruptionTarget condition (kubelet's local
	// storage evictions set none).
	noCondition bool
	once        sync.Once
	done        chan struct{} // closed once containers stopped and volumes released
}

func (r *evictRequest) finish() { r.once.Do(func() { close(r.done) }) }

// finished reports whether the eviction was carried out.
func (r *evictRequest) finished() bool {
	select {
	case <-r.done:
		return true
	default:
		return false
	}
}

// Evict stops a running pod for node pressure as kubelet's eviction
// manager does: its status becomes Failed with reason and message and the
// DisruptionTarget condition (TerminationByKubelet, the message), its
// containers are stopped with
// grace and its volumes released (an emptyDir's space is freed). It
// returns once that is done, or with ctx's error. The pod's API object
// stays (Failed) until its owner deletes it.
func (m *Manager) Evict(ctx context.Context, uid types.UID, grace time.Duration, reason, message string) error {
	return m.evict(ctx, uid, &evictRequest{grace: grace, reason: reason, message: message})
}

// EvictWithoutCondition is Evict without the DisruptionTarget condition,
// as kubelet evicts a pod that exceeds a local storage limit.
func (m *Manager) EvictWithoutCondition(ctx context.Context, uid types.UID, grace time.Duration, reason, message string) error {
	return m.evict(ctx, uid, &evictRequest{grace: grace, reason: reason, message: message, noCondition: true})
}

func (m *Manager) evict(ctx context.Context, uid types.UID, req *evictRequest) error {
	m.mu.Lock()
	w := m.workers[uid]
	m.mu.Unlock()
	if w == nil || w.source == sourceOrphan {
		return fmt.Errorf("evict pod %s: %w", uid, ErrNoSuchPod)
	}
	w.mu.Lock()
	if w.evictReq == nil {
		req.done = make(chan struct{})
		w.evictReq = req
	}
	done := w.evictReq.done
	w.mu.Unlock()
	w.poke()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("evict pod %s: %w", uid, ctx.Err())
	}
}

// enforceEviction carries out an eviction request: the Failed status,
// then the containers stopped and the volumes torn down. It reports
// whether the pod is evicted (the sync is done).
func (w *worker) enforceEviction(ctx context.Context, pod *v1.Pod, rs pleg.PodStatus, now time.Time) (time.Duration, bool, error) {
	w.mu.Lock()
	e := w.evictReq
	w.mu.Unlock()
	if e == nil {
		return 0, false, nil
	}
	if w.evicted == nil {
		w.evicted = e
		w.log.Info("evicting pod", "reason", e.reason, "message", e.message, "gracePeriod", e.grace)
	}
	if running := w.toStop(rs); len(running) > 0 {
		w.setStatus(ctx, pod, rs, nil, false, now)
		// The next sync sees the containers' ends and writes the status.
		return 0, true, w.stopRunning(ctx, pod, running, e.grace)
	}
	w.setStatus(ctx, pod, rs, nil, false, now)
	if !e.finished() {
		// kubelet releases a terminated pod's volumes at once.
		if err := w.d.volumes.Teardown(w.uid, w.podDir()); err != nil {
			return 0, true, fmt.Errorf("releasing the volumes of an evicted pod: %w", err)
		}
		if err := w.stopFinishedPause(ctx, pod); err != nil {
			return 0, true, err
		}
		w.settleRequests()
	}
	return w.d.resync, true, nil
}

// evictionStatus adds an eviction's reason, message and condition to a
// status input.
func (w *worker) evictionStatus(in *status.Input) {
	if e := w.evicted; e != nil {
		in.FailReason, in.FailMessage = e.reason, e.message
		if !e.noCondition {
			in.Disruption = e.message
		}
	}
}

// RemoveDeadContainers removes the exited containers of pods that are
// terminal (evicted, failed or completed), freeing their writable layers
// and logs, as kubelet's DeleteAllUnusedContainers does under disk
// pressure; their statuses stay as last reported. It returns how many it
// removed.
func (m *Manager) RemoveDeadContainers(ctx context.Context) (int, error) {
	m.mu.Lock()
	var uids []types.UID
	for uid, w := range m.workers {
		if w.terminal.Load() && w.source != sourceOrphan {
			uids = append(uids, uid)
		}
	}
	m.mu.Unlock()
	n := 0
	var errs []error
	for _, uid := range uids {
		rs, ok := m.deps.cache.Get(uid)
		if !ok {
			continue
		}
		for _, c := range rs.Containers {
			if c.State != runtime.StateExited {
				continue
			}
			if err := m.opts.Runtime.RemoveContainer(ctx, c.ID); err != nil {
				errs = append(errs, fmt.Errorf("remove dead container %s of pod %s: %w", c.ID, uid, err))
				continue
			}
			n++
		}
	}
	return n, errors.Join(errs...)
}
