// Package informer builds the agent's shared informers directly over a
// typed client's List and Watch, without client-go's informer factory
// (which links every API group: issue 16). It imports nothing of the
// agent, so that packages bound to import nothing of ours (nodestatus) may
// use it.
package informer

import (
	"context"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
)

// ListWatcher lists and watches one resource: the typed clients of
// internal/kubeclient and of client-go (and its fakes) satisfy it, L being
// the resource's list type.
type ListWatcher[L runtime.Object] interface {
	List(ctx context.Context, opts metav1.ListOptions) (L, error)
	Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error)
}

// New returns a shared informer of objects like obj over lw, with a
// namespace index and no resync, restricted to fieldSelector unless it is
// empty (the Node authorizer lets a node list its own Node by
// metadata.name and its pods by spec.nodeName). Its cache holds the objects
// without their managedFields (StripManagedFields).
//
// It lists, then watches (watchlist.go keeps client-go's streaming list
// off). Should that gate be turned on, a client whose type says it has no
// watch-list semantics (client-go's fakes, IsWatchListSemanticsUnSupported)
// still gets list-then-watch.
func New[L runtime.Object](lw ListWatcher[L], fieldSelector string, obj runtime.Object) cache.SharedIndexInformer {
	inf := cache.NewSharedIndexInformer(cache.ToListWatcherWithWatchListSemantics(&cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			if fieldSelector != "" {
				o.FieldSelector = fieldSelector
			}
			return lw.List(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			if fieldSelector != "" {
				o.FieldSelector = fieldSelector
			}
			return lw.Watch(ctx, o)
		},
	}, lw), obj, 0, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	// Only fails once the informer has started.
	_ = inf.SetTransform(StripManagedFields)
	return inf
}

// StripManagedFields is a cache.TransformFunc that drops an object's
// managedFields before the informer stores it. The agent reads none of
// them (it writes status with patches, never an Update of a cached
// object), and they are a large share of a stored Pod or Node: one entry
// per field manager (the creator, the scheduler's binding, each status
// writer), each a JSON set of every field it owns. Idempotent, as client-go
// asks; anything without object metadata (a DeletedFinalStateUnknown
// tombstone) passes unchanged.
func StripManagedFields(obj any) (any, error) {
	if a, err := meta.Accessor(obj); err == nil {
		a.SetManagedFields(nil)
	}
	return obj, nil
}
