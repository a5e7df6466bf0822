// Package informer builds the agent's shared informers directly over a
// typed client's List and Watch, without client-go's informer factory
// (which links every API group: issue 16). It imports nothing of the
// agent, so that packages bound to import nothing of ours (nodestatus) may
// use it.
package informer

import (
	"context"

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
// metadata.name and its pods by spec.nodeName).
//
// It lists, then watches (watchlist.go keeps client-go's streaming list
// off). Should that gate be turned on, a client whose type says it has no
// watch-list semantics (client-go's fakes, IsWatchListSemanticsUnSupported)
// still gets list-then-watch.
func New[L runtime.Object](lw ListWatcher[L], fieldSelector string, obj runtime.Object) cache.SharedIndexInformer {
	return cache.NewSharedIndexInformer(cache.ToListWatcherWithWatchListSemantics(&cache.ListWatch{
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
}
