package pods

import (
	"context"
	"errors"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/nodeagent/nodeagent/runtime"
)

// ErrNoSuchPod: the agent runs no pod with that UID.
var ErrNoSuchPod = errors.New("no such pod")

// Evict stops a running pod for node pressure as kubelet's eviction
// manager does: its status becomes Failed with reason and message and the
// DisruptionTarget condition (TerminationByKubelet, the message), its
// containers are stopped with
// grace and its volumes released (an emptyDir's space is freed). It
// returns once that is done, or with ctx's error. The pod's API object
// stays (Failed) until its owner deletes it.
func (m *Manager) Evict(ctx context.Context, uid types.UID, grace time.Duration, reason, message string) error {
	return m.evict(ctx, uid, grace, termStatus{reason: reason, message: message, disruption: true})
}

// EvictWithoutCondition is Evict without the DisruptionTarget condition,
// as kubelet evicts a pod that exceeds a local storage limit.
func (m *Manager) EvictWithoutCondition(ctx context.Context, uid types.UID, grace time.Duration, reason, message string) error {
	return m.evict(ctx, uid, grace, termStatus{reason: reason, message: message})
}

func (m *Manager) evict(ctx context.Context, uid types.UID, grace time.Duration, st termStatus) error {
	m.mu.Lock()
	w := m.workers[uid]
	m.mu.Unlock()
	if w == nil || w.source == sourceOrphan {
		return fmt.Errorf("evict pod %s: %w", uid, ErrNoSuchPod)
	}
	t := w.requestTermination(newTermination(termEviction, grace, st))
	select {
	case <-t.done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("evict pod %s: %w", uid, ctx.Err())
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
			if err := m.deps.rt.RemoveContainer(ctx, c.ID); err != nil {
				errs = append(errs, fmt.Errorf("remove dead container %s of pod %s: %w", c.ID, uid, err))
				continue
			}
			n++
		}
	}
	return n, errors.Join(errs...)
}
