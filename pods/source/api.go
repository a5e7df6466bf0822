package source

import (
	"context"
	"log/slog"
	"time"

	"github.com/nodeagent/nodeagent/internal/informer"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"

	"github.com/nodeagent/nodeagent/kubetypes"
)

// Handler receives what the API source sees. Its methods are called from
// the informer's goroutine, one at a time, and must not block.
type Handler interface {
	// PodUpdate: a pod bound to this node was added or changed (including
	// a deletionTimestamp being set).
	PodUpdate(pod *v1.Pod)
	// PodRemove: the pod is gone from the API server.
	PodRemove(uid types.UID)
	// MirrorUpdate and MirrorRemove: a mirror pod (the API's reflection of
	// a static pod) changed or is gone. Mirror pods are never desired pods.
	MirrorUpdate(mp *v1.Pod)
	MirrorRemove(mp *v1.Pod)
}

// APISource follows the pods bound to this node through an informer with a
// spec.nodeName field selector. As kubelet, it takes no pod before the
// node's own informer has synced, so that pods are admitted against the
// registered Node.
type APISource struct {
	informer   cache.SharedIndexInformer
	lister     corelisters.PodLister
	nodeSynced func() bool
	clock      clock.Clock
	log        *slog.Logger
}

// nodeSyncPoll is how often the API source checks whether the Node
// informer has synced.
const nodeSyncPoll = 100 * time.Millisecond

// PodListWatcher lists and watches the Pods of all namespaces: client-go's
// typed client CoreV1().Pods("") (and its fake) and internal/kubeclient's
// Pods("") satisfy it.
type PodListWatcher interface {
	List(ctx context.Context, opts metav1.ListOptions) (*v1.PodList, error)
	Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error)
}

// NewAPISource returns a source that tells h about the pods of nodeName.
// nodeSynced reports whether the Node informer has synced (nil: always).
func NewAPISource(client PodListWatcher, nodeName string, h Handler, nodeSynced func() bool, clk clock.Clock, log *slog.Logger) *APISource {
	inf := informer.New[*v1.PodList](client, fields.OneTermEqualSelector("spec.nodeName", nodeName).String(), &v1.Pod{})
	if nodeSynced == nil {
		nodeSynced = func() bool { return true }
	}
	s := &APISource{informer: inf, lister: corelisters.NewPodLister(inf.GetIndexer()), nodeSynced: nodeSynced, clock: clk, log: log}
	_, _ = s.informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { changed(h, obj) },
		UpdateFunc: func(_, obj any) { changed(h, obj) },
		DeleteFunc: func(obj any) { deleted(h, obj) },
	})
	return s
}

// Lister lists the API server's pods of this node, mirror pods included.
func (s *APISource) Lister() corelisters.PodLister { return s.lister }

func changed(h Handler, obj any) {
	pod, ok := obj.(*v1.Pod)
	if !ok {
		return
	}
	if kubetypes.IsMirrorPod(pod) {
		h.MirrorUpdate(pod)
		return
	}
	h.PodUpdate(pod)
}

func deleted(h Handler, obj any) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	pod, ok := obj.(*v1.Pod)
	if !ok {
		return
	}
	if kubetypes.IsMirrorPod(pod) {
		h.MirrorRemove(pod)
		return
	}
	h.PodRemove(pod.UID)
}

// Run follows the pods until ctx is done; synced is closed once the source
// has listed them all.
func (s *APISource) Run(ctx context.Context, synced chan<- struct{}) {
	for logged := false; !s.nodeSynced(); {
		if !logged {
			s.log.Info("waiting for the node to sync before taking pods from the API server")
			logged = true
		}
		select {
		case <-ctx.Done():
			return
		case <-s.clock.After(nodeSyncPoll):
		}
	}
	done := make(chan struct{})
	go func() { defer close(done); s.informer.Run(ctx.Done()) }()
	if cache.WaitForCacheSync(ctx.Done(), s.informer.HasSynced) {
		close(synced)
	}
	<-ctx.Done()
	<-done
}
