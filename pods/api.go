package pods

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	utilptr "k8s.io/utils/ptr"
)

// apiSource follows the pods bound to this node through an informer with a
// spec.nodeName field selector. Mirror pods are not desired pods (they
// reflect static pods); their changes only wake the status manager.
type apiSource struct {
	m        *Manager
	factory  informers.SharedInformerFactory
	informer cache.SharedIndexInformer
	lister   corelisters.PodLister
}

// nodeSyncPoll is how often the API source checks whether the Node
// informer has synced.
const nodeSyncPoll = 100 * time.Millisecond

func newAPISource(client kubernetes.Interface, nodeName string, m *Manager) *apiSource {
	f := informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithTweakListOptions(func(o *metav1.ListOptions) {
		o.FieldSelector = fields.OneTermEqualSelector("spec.nodeName", nodeName).String()
	}))
	inf := f.Core().V1().Pods()
	s := &apiSource{m: m, factory: f, informer: inf.Informer(), lister: inf.Lister()}
	_, _ = s.informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { s.changed(obj) },
		UpdateFunc: func(_, obj any) { s.changed(obj) },
		DeleteFunc: s.deleted,
	})
	return s
}

func isMirror(p *v1.Pod) bool {
	_, ok := p.Annotations[AnnotationConfigMirror]
	return ok
}

func (s *apiSource) changed(obj any) {
	pod, ok := obj.(*v1.Pod)
	if !ok {
		return
	}
	if isMirror(pod) {
		s.m.status.mirrorChanged(pod)
		if pod.DeletionTimestamp != nil {
			// Deleted by someone: like kubelet, delete it for good and
			// let the static pod's worker make a new one.
			s.m.pokeByName(fullName(pod))
		}
		return
	}
	s.m.upsert(SourceAPI, pod)
}

func (s *apiSource) deleted(obj any) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	pod, ok := obj.(*v1.Pod)
	if !ok {
		return
	}
	if isMirror(pod) {
		// Someone deleted a mirror pod: its static pod's worker makes a
		// new one.
		s.m.pokeByName(fullName(pod))
		return
	}
	s.m.forget(pod.UID)
}

func (s *apiSource) run(ctx context.Context, synced chan<- struct{}) {
	// As kubelet, take no API pod before the Node informer synced: pods are
	// admitted against the registered Node's allocatable.
	for logged := false; !s.m.opts.NodeSynced(); {
		if !logged {
			s.m.log.Info("waiting for the node to sync before taking pods from the API server")
			logged = true
		}
		select {
		case <-ctx.Done():
			return
		case <-s.m.clock.After(nodeSyncPoll):
		}
	}
	s.factory.Start(ctx.Done())
	if cache.WaitForCacheSync(ctx.Done(), s.informer.HasSynced) {
		synced <- struct{}{}
	}
	<-ctx.Done()
	s.factory.Shutdown()
}

// ensureMirror makes sure a static pod has its mirror pod in the API: one
// with the static pod's config hash, owned by the node. It reports false
// when it could not (yet) and should be tried again soon.
func (m *Manager) ensureMirror(ctx context.Context, pod *v1.Pod) bool {
	if m.api == nil {
		return true
	}
	hash := pod.Annotations[AnnotationConfigHash]
	cur, err := m.api.lister.Pods(pod.Namespace).Get(pod.Name)
	if err == nil {
		if !isMirror(cur) {
			m.log.Warn("a pod that is not a mirror pod has the static pod's name; not creating a mirror pod", "pod", fullName(pod))
			return true
		}
		if cur.Annotations[AnnotationConfigMirror] == hash && cur.DeletionTimestamp == nil {
			return true
		}
		// An outdated mirror pod (the manifest changed): replace it.
		if err := m.deleteAPIPod(ctx, cur); err != nil && !apierrors.IsNotFound(err) {
			m.log.Warn("cannot delete an outdated mirror pod", "pod", fullName(pod), "err", err)
			return false
		}
	}
	node := m.opts.Node()
	if node == nil {
		return false // not registered yet
	}
	mp := pod.DeepCopy()
	mp.UID, mp.ResourceVersion, mp.Status = "", "", v1.PodStatus{}
	mp.Annotations[AnnotationConfigMirror] = hash
	mp.OwnerReferences = []metav1.OwnerReference{{
		APIVersion: "v1", Kind: "Node", Name: node.Name, UID: node.UID, Controller: utilptr.To(true),
	}}
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if _, err := m.opts.Client.CoreV1().Pods(pod.Namespace).Create(cctx, mp, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		m.log.Warn("cannot create the mirror pod", "pod", fullName(pod), "err", err)
		return false
	}
	m.log.Info("created mirror pod", "pod", fullName(pod))
	return true
}

// deleteMirror removes a static pod's mirror pod.
func (m *Manager) deleteMirror(ctx context.Context, pod *v1.Pod) error {
	if m.api == nil {
		return nil
	}
	cur, err := m.api.lister.Pods(pod.Namespace).Get(pod.Name)
	if err != nil || !isMirror(cur) || cur.Annotations[AnnotationConfigMirror] != pod.Annotations[AnnotationConfigHash] {
		return nil
	}
	if err := m.deleteAPIPod(ctx, cur); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete mirror pod: %w", err)
	}
	return nil
}

// deletePod removes a stopped pod from the API (zero grace, this UID only).
func (m *Manager) deletePod(ctx context.Context, pod *v1.Pod) error {
	if m.opts.Client == nil {
		return nil
	}
	return m.deleteAPIPod(ctx, pod)
}

func (m *Manager) deleteAPIPod(ctx context.Context, pod *v1.Pod) error {
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	return m.opts.Client.CoreV1().Pods(pod.Namespace).Delete(cctx, pod.Name, metav1.DeleteOptions{
		GracePeriodSeconds: utilptr.To[int64](0),
		Preconditions:      metav1.NewUIDPreconditions(string(pod.UID)),
	})
}

// cleanupMirrors deletes mirror pods whose static pod is gone.
func (m *Manager) cleanupMirrors(ctx context.Context) {
	if m.api == nil {
		return
	}
	mirrors, err := m.api.lister.List(everything())
	if err != nil {
		return
	}
	m.mu.Lock()
	static := map[string]string{} // full name → config hash
	for _, w := range m.workers {
		if w.source == SourceFile {
			p, removed := w.snapshot()
			if !removed {
				static[fullName(p)] = p.Annotations[AnnotationConfigHash]
			}
		}
	}
	m.mu.Unlock()
	for _, mp := range mirrors {
		if !isMirror(mp) || mp.DeletionTimestamp != nil {
			continue
		}
		if h, ok := static[fullName(mp)]; ok && h == mp.Annotations[AnnotationConfigMirror] {
			continue
		}
		m.log.Info("deleting a mirror pod without its static pod", "pod", fullName(mp))
		if err := m.deleteAPIPod(ctx, mp); err != nil && !apierrors.IsNotFound(err) {
			m.log.Warn("cannot delete an orphaned mirror pod", "pod", fullName(mp), "err", err)
		}
	}
}

func eventScheme() *k8sruntime.Scheme { return scheme.Scheme }

func startEventSink(bc record.EventBroadcaster, client kubernetes.Interface) {
	bc.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: client.CoreV1().Events("")})
}

// statusManager writes pod statuses to the API server: only when they
// differ from what the API has, from a few goroutines, retrying with
// back-off. A static pod's status goes to its mirror pod.
type statusManager struct {
	client kubernetes.Interface
	lister corelisters.PodLister
	log    *slog.Logger
	queue  workqueue.TypedRateLimitingInterface[types.UID]

	mu      sync.Mutex
	entries map[types.UID]*statusEntry
}

type statusEntry struct {
	pod     *v1.Pod
	status  v1.PodStatus
	synced  bool
	written *v1.Pod // the API's pod after our last patch
}

const statusWorkers = 4

func newStatusManager(client kubernetes.Interface, log *slog.Logger) *statusManager {
	return &statusManager{
		client:  client,
		log:     log,
		entries: map[types.UID]*statusEntry{},
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(
			workqueue.NewTypedItemExponentialFailureRateLimiter[types.UID](500*time.Millisecond, 30*time.Second),
			workqueue.TypedRateLimitingQueueConfig[types.UID]{Name: "pod-status"}),
	}
}

// set records a pod's computed status; it is written if it differs from
// the API's.
func (s *statusManager) set(pod *v1.Pod, st v1.PodStatus) {
	if s.client == nil {
		return
	}
	s.mu.Lock()
	e := s.entries[pod.UID]
	if e != nil && e.synced && StatusEqual(e.status, st) {
		e.pod = pod
		s.mu.Unlock()
		return
	}
	if e == nil {
		e = &statusEntry{}
		s.entries[pod.UID] = e
	}
	e.pod, e.status, e.synced = pod, st, false
	s.mu.Unlock()
	s.queue.Add(pod.UID)
}

func (s *statusManager) forget(uid types.UID) {
	s.mu.Lock()
	delete(s.entries, uid)
	s.mu.Unlock()
}

// mirrorChanged requeues the static pod whose mirror pod changed.
func (s *statusManager) mirrorChanged(mp *v1.Pod) {
	s.mu.Lock()
	var uids []types.UID
	for uid, e := range s.entries {
		if fullName(e.pod) == fullName(mp) {
			e.synced = false
			uids = append(uids, uid)
		}
	}
	s.mu.Unlock()
	for _, uid := range uids {
		s.queue.Add(uid)
	}
}

func (s *statusManager) run(ctx context.Context) {
	var wg sync.WaitGroup
	for i := 0; i < statusWorkers; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				uid, shutdown := s.queue.Get()
				if shutdown {
					return
				}
				if err := s.sync(ctx, uid); err != nil {
					s.log.Warn("pod status not written; retrying", "podUID", uid, "err", err)
					s.queue.AddRateLimited(uid)
				} else {
					s.queue.Forget(uid)
				}
				s.queue.Done(uid)
			}
		}()
	}
	<-ctx.Done()
	s.queue.ShutDown()
	wg.Wait()
}

// flush writes a pod's status now (the final status before a delete).
func (s *statusManager) flush(ctx context.Context, uid types.UID) error {
	if s.client == nil {
		return nil
	}
	return s.sync(ctx, uid)
}

// target is the API object a pod's status goes to: the pod itself, or a
// static pod's mirror pod. nil: none (yet).
func (s *statusManager) target(e *statusEntry) *v1.Pod {
	if s.lister == nil {
		return nil
	}
	cur, err := s.lister.Pods(e.pod.Namespace).Get(e.pod.Name)
	if err != nil {
		cur = nil
	}
	if e.pod.Annotations[AnnotationConfigSource] == SourceFile {
		if cur == nil || !isMirror(cur) || cur.Annotations[AnnotationConfigMirror] != e.pod.Annotations[AnnotationConfigHash] {
			return nil
		}
	} else if cur == nil || cur.UID != e.pod.UID {
		cur = nil
	}
	// Our own last write may be newer than the informer's copy.
	if w := e.written; w != nil && (cur == nil || cur.UID == w.UID) && newerRV(w, cur) {
		if cur == nil && e.pod.Annotations[AnnotationConfigSource] == SourceFile {
			return nil
		}
		return w
	}
	return cur
}

// newerRV reports whether a's resourceVersion is newer than b's (etcd
// revisions are integers; anything else compares as not newer).
func newerRV(a, b *v1.Pod) bool {
	if b == nil {
		return true
	}
	var x, y int64
	if _, err := fmt.Sscan(a.ResourceVersion, &x); err != nil {
		return false
	}
	if _, err := fmt.Sscan(b.ResourceVersion, &y); err != nil {
		return false
	}
	return x > y
}

func (s *statusManager) sync(ctx context.Context, uid types.UID) error {
	s.mu.Lock()
	e := s.entries[uid]
	if e == nil || e.synced {
		s.mu.Unlock()
		return nil
	}
	want := e.status
	cur := s.target(e)
	s.mu.Unlock()
	if cur == nil {
		return nil // no pod to write to yet; a mirror pod's creation requeues
	}
	if StatusEqual(cur.Status, want) {
		s.markSynced(uid, want, nil)
		return nil
	}
	oldJSON, err := json.Marshal(v1.Pod{Status: cur.Status})
	if err != nil {
		return err
	}
	newJSON, err := json.Marshal(v1.Pod{Status: want})
	if err != nil {
		return err
	}
	patch, err := strategicpatch.CreateTwoWayMergePatch(oldJSON, newJSON, v1.Pod{})
	if err != nil {
		return fmt.Errorf("status patch: %w", err)
	}
	var pm map[string]any
	if err := json.Unmarshal(patch, &pm); err != nil {
		return err
	}
	pm["metadata"] = map[string]any{"uid": cur.UID}
	if patch, err = json.Marshal(pm); err != nil {
		return err
	}
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	got, err := s.client.CoreV1().Pods(cur.Namespace).Patch(pctx, cur.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "status")
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return nil // the pod is gone (or replaced); nothing to write to
	}
	if err != nil {
		return fmt.Errorf("patch status of %s: %w", fullName(cur), err)
	}
	s.markSynced(uid, want, got)
	return nil
}

func (s *statusManager) markSynced(uid types.UID, st v1.PodStatus, written *v1.Pod) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if e := s.entries[uid]; e != nil && StatusEqual(e.status, st) {
		e.synced = true
		if written != nil {
			e.written = written
		}
	}
}

func everything() labels.Selector { return labels.Everything() }
