package status

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"
	utilptr "k8s.io/utils/ptr"

	"github.com/nodeagent/nodeagent/kubetypes"
)

// Manager writes pod statuses to the API server, as kubelet's status
// manager: only when a status differs from the API's copy, as a
// strategic-merge patch with a UID precondition, from a few goroutines. A
// static pod's status goes to its mirror pod. Every write of one pod goes
// through one work queue, which never hands the same pod to two goroutines,
// so a pod's patches never race; failed writes are retried with the queue's
// rate limiter (requestRetry*). Set, Forget and MirrorChanged are safe to
// call concurrently and never block on the API server.
type Manager struct {
	client PodsGetter
	log    *slog.Logger
	queue  workqueue.TypedRateLimitingInterface[types.UID]
	clock  clock.PassiveClock

	mu      sync.Mutex
	lister  corelisters.PodLister
	entries map[types.UID]*entry
	waiters map[types.UID][]chan error // Flush calls waiting for a write
}

type entry struct {
	pod    *v1.Pod
	status v1.PodStatus
	synced bool
	// written is the API's pod after our last patch, until the informer
	// has caught up with it.
	written *v1.Pod
	// changedAt is when status last changed (Set), for the latency trace.
	changedAt time.Time
}

const (
	// writers is how many goroutines write statuses.
	writers = 4
	// Retry of a failed write: 500ms doubling to 30s per pod.
	requestRetryInitial = 500 * time.Millisecond
	requestRetryMax     = 30 * time.Second
	// requestTimeout bounds each API call.
	requestTimeout = 10 * time.Second
)

// PodClient is what the manager uses of one namespace's Pods: client-go's
// typed client (and its fake) and internal/kubeclient's satisfy it.
type PodClient interface {
	Get(ctx context.Context, name string, opts metav1.GetOptions) (*v1.Pod, error)
	Patch(ctx context.Context, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions, subresources ...string) (*v1.Pod, error)
	Delete(ctx context.Context, name string, opts metav1.DeleteOptions) error
}

// PodsGetter returns the Pods client of a namespace.
type PodsGetter func(namespace string) PodClient

// NewManager returns a Manager; a nil pods makes it discard statuses
// (static pods without an API server).
func NewManager(pods PodsGetter, log *slog.Logger) *Manager {
	return &Manager{
		client:  pods,
		log:     log,
		clock:   clock.RealClock{},
		entries: map[types.UID]*entry{},
		waiters: map[types.UID][]chan error{},
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(
			workqueue.NewTypedItemExponentialFailureRateLimiter[types.UID](requestRetryInitial, requestRetryMax),
			workqueue.TypedRateLimitingQueueConfig[types.UID]{Name: "pod-status"}),
	}
}

// SetClock replaces the real clock (tests; the agent's injected clock).
func (s *Manager) SetClock(c clock.PassiveClock) { s.clock = c }

// SetLister gives the Manager the API server's pods of this node (the API
// source's informer); without one nothing is written.
func (s *Manager) SetLister(l corelisters.PodLister) {
	s.mu.Lock()
	s.lister = l
	s.mu.Unlock()
}

// Set records a pod's computed status; it is written if it differs from the
// API's.
func (s *Manager) Set(pod *v1.Pod, st v1.PodStatus) {
	if s.client == nil {
		return
	}
	s.mu.Lock()
	e := s.entries[pod.UID]
	if e != nil && e.synced && Equal(e.status, st) {
		e.pod = pod
		s.mu.Unlock()
		return
	}
	if e == nil {
		e = &entry{}
		s.entries[pod.UID] = e
	}
	e.pod, e.status, e.synced = pod, st, false
	e.changedAt = s.clock.Now()
	s.mu.Unlock()
	s.queue.Add(pod.UID)
}

// Get returns the pod's last computed status.
func (s *Manager) Get(uid types.UID) (v1.PodStatus, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if e := s.entries[uid]; e != nil {
		return *e.status.DeepCopy(), true
	}
	return v1.PodStatus{}, false
}

// Forget drops a pod that is gone.
func (s *Manager) Forget(uid types.UID) {
	s.mu.Lock()
	delete(s.entries, uid)
	s.mu.Unlock()
}

// MirrorChanged requeues the static pod whose mirror pod changed.
func (s *Manager) MirrorChanged(mp *v1.Pod) {
	s.mu.Lock()
	var uids []types.UID
	for uid, e := range s.entries {
		if kubetypes.FullName(e.pod) == kubetypes.FullName(mp) {
			e.synced = false
			uids = append(uids, uid)
		}
	}
	s.mu.Unlock()
	for _, uid := range uids {
		s.queue.Add(uid)
	}
}

// Run writes statuses until ctx is done.
func (s *Manager) Run(ctx context.Context) {
	var wg sync.WaitGroup
	for i := 0; i < writers; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for s.processNext(ctx) {
			}
		}()
	}
	<-ctx.Done()
	s.queue.ShutDown()
	wg.Wait()
}

// processNext writes one queued pod's status; false once the queue shut
// down.
func (s *Manager) processNext(ctx context.Context) bool {
	uid, shutdown := s.queue.Get()
	if shutdown {
		return false
	}
	defer s.queue.Done(uid)
	err := s.sync(ctx, uid)
	if err != nil {
		s.log.Warn("pod status not written; retrying", "podUID", uid, "err", err)
		s.queue.AddRateLimited(uid)
	} else {
		s.queue.Forget(uid)
	}
	s.mu.Lock()
	ws := s.waiters[uid]
	delete(s.waiters, uid)
	s.mu.Unlock()
	for _, w := range ws {
		w <- err
	}
	return true
}

// Flush writes a pod's status now, through the queue like every write (the
// final status before a pod is deleted), and says whether it was written.
func (s *Manager) Flush(ctx context.Context, uid types.UID) error {
	if s.client == nil {
		return nil
	}
	done := make(chan error, 1)
	s.mu.Lock()
	s.waiters[uid] = append(s.waiters[uid], done)
	s.mu.Unlock()
	s.queue.Add(uid)
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// DeletePod removes a stopped API pod from the API server: zero grace, this
// UID only (a pod re-created under the same name is not touched). As
// kubelet's status manager, which sends no delete for a pod it finds gone
// or re-created, it sends none for a pod the API server removes by
// itself: one marked deleted with a grace period of 0 (the API server
// gives a terminal pod's deletion grace 0 and removes it in the request
// that marks it, or once its last finalizer goes), one the informer no
// longer has, or has under another UID. A 404 from a pod removed meanwhile
// is success.
func (s *Manager) DeletePod(ctx context.Context, pod *v1.Pod) error {
	if s.client == nil {
		return nil
	}
	if gone, why := s.goneFromAPI(pod); gone {
		s.log.Debug("pod delete skipped", "podUID", pod.UID, "reason", why)
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	err := s.client(pod.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{
		GracePeriodSeconds: utilptr.To[int64](0),
		Preconditions:      metav1.NewUIDPreconditions(string(pod.UID)),
	})
	s.log.Debug("pod delete", "podUID", pod.UID, "err", err)
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// goneFromAPI reports whether the API server removes pod without the
// agent's delete: its deletion's grace period is 0 (in pod or in the
// informer's copy), or the informer shows it removed (no pod of its name,
// or one with another UID). Without an informer only pod is known.
func (s *Manager) goneFromAPI(pod *v1.Pod) (bool, string) {
	const graceZero = "deleted with grace period 0: the API server removes it"
	if g := pod.DeletionGracePeriodSeconds; g != nil && *g == 0 {
		return true, graceZero
	}
	s.mu.Lock()
	l := s.lister
	s.mu.Unlock()
	if l == nil {
		return false, ""
	}
	cur, err := l.Pods(pod.Namespace).Get(pod.Name)
	switch {
	case apierrors.IsNotFound(err):
		return true, "not in the API server any more"
	case err != nil:
		return false, ""
	case cur.UID != pod.UID:
		return true, "re-created under another UID"
	case cur.DeletionGracePeriodSeconds != nil && *cur.DeletionGracePeriodSeconds == 0:
		return true, graceZero
	}
	return false, ""
}

// target is the API object a pod's status goes to: the pod itself, or a
// static pod's mirror pod; nil: none (yet). fresh says the informer's copy
// may be older than our own last write, so the caller reads the object
// from the API server instead (resource versions are opaque: their order
// cannot be told from the informer's copy).
func (s *Manager) target(e *entry) (cur *v1.Pod, fresh bool) {
	if s.lister == nil {
		return nil, false
	}
	cur, err := s.lister.Pods(e.pod.Namespace).Get(e.pod.Name)
	if err != nil {
		cur = nil
	}
	if kubetypes.IsStaticPod(e.pod) {
		if cur == nil || !kubetypes.IsMirrorPod(cur) || cur.Annotations[kubetypes.AnnotationConfigMirror] != e.pod.Annotations[kubetypes.AnnotationConfigHash] {
			return nil, false
		}
	} else if cur == nil || cur.UID != e.pod.UID {
		return nil, false
	}
	if w := e.written; w != nil {
		if w.UID == cur.UID && w.ResourceVersion == cur.ResourceVersion {
			e.written = nil // the informer caught up
		} else if w.UID == cur.UID {
			return cur, true
		}
	}
	return cur, false
}

func (s *Manager) sync(ctx context.Context, uid types.UID) error {
	start := s.clock.Now()
	s.mu.Lock()
	e := s.entries[uid]
	if e == nil || e.synced {
		s.mu.Unlock()
		return nil
	}
	want, changedAt := e.status, e.changedAt
	cur, fresh := s.target(e)
	s.mu.Unlock()
	var read time.Duration
	if cur == nil {
		return nil // no pod to write to yet; a mirror pod's creation requeues
	}
	if fresh {
		gctx, cancel := context.WithTimeout(ctx, requestTimeout)
		got, err := s.client(cur.Namespace).Get(gctx, cur.Name, metav1.GetOptions{})
		cancel()
		read = s.clock.Since(start)
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("read %s: %w", kubetypes.FullName(cur), err)
		}
		if got.UID != cur.UID {
			return nil // replaced; the informer will say so
		}
		cur = got
	}
	computed := want
	want = WithForeignConditions(cur.Status, want)
	if Equal(cur.Status, want) {
		s.markSynced(uid, computed, nil)
		return nil
	}
	patch, err := statusPatch(cur, want)
	if err != nil {
		return err
	}
	pctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	patchStart := s.clock.Now()
	got, err := s.client(cur.Namespace).Patch(pctx, cur.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "status")
	if s.log.Enabled(ctx, slog.LevelDebug) {
		// The latency trace (-v=4): from the status change (Set) to the
		// write's answer, and where that time went.
		now := s.clock.Now()
		s.log.Debug("pod status write", "podUID", uid, "phase", want.Phase, "err", err,
			"sinceChange", now.Sub(changedAt), "queued", start.Sub(changedAt), "read", read,
			"prepare", patchStart.Sub(start)-read, "patch", now.Sub(patchStart))
	}
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return nil // the pod is gone (or replaced); nothing to write to
	}
	if err != nil {
		return fmt.Errorf("patch status of %s: %w", kubetypes.FullName(cur), err)
	}
	s.markSynced(uid, computed, got)
	return nil
}

// WithForeignConditions returns want with the conditions the agent does
// not own as the API has them in cur (readiness gates set by controllers
// after the status was computed), as kubelet's mergePodStatus: a status
// write never removes or reverts them.
func WithForeignConditions(cur, want v1.PodStatus) v1.PodStatus {
	var conds []v1.PodCondition
	for _, c := range cur.Conditions {
		if !slices.Contains(conditionsOwned, c.Type) {
			conds = append(conds, c)
		}
	}
	for _, c := range want.Conditions {
		if slices.Contains(conditionsOwned, c.Type) {
			conds = append(conds, c)
		}
	}
	want.Conditions = withSharedConditions(cur, want, conds)
	return want
}

// statusPatch is the strategic-merge patch from cur's status to want, with
// cur's UID as a precondition.
func statusPatch(cur *v1.Pod, want v1.PodStatus) ([]byte, error) {
	oldJSON, err := json.Marshal(v1.Pod{Status: cur.Status})
	if err != nil {
		return nil, err
	}
	newJSON, err := json.Marshal(v1.Pod{Status: want})
	if err != nil {
		return nil, err
	}
	patch, err := strategicpatch.CreateTwoWayMergePatch(oldJSON, newJSON, v1.Pod{})
	if err != nil {
		return nil, fmt.Errorf("status patch: %w", err)
	}
	var pm map[string]any
	if err := json.Unmarshal(patch, &pm); err != nil {
		return nil, err
	}
	pm["metadata"] = map[string]any{"uid": cur.UID}
	return json.Marshal(pm)
}

func (s *Manager) markSynced(uid types.UID, st v1.PodStatus, written *v1.Pod) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if e := s.entries[uid]; e != nil && Equal(e.status, st) {
		e.synced = true
		if written != nil {
			e.written = written
		}
	}
}
