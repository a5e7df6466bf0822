// Package objcache keeps watched copies of the single Secrets and
// ConfigMaps that pods on this node reference, the way kubelet's
// watch-based secret and configMap managers do: each object a pod asks for
// is watched on its own (a list and watch with fieldSelector
// metadata.name=<name>), which the Node authorizer permits for objects
// referenced by pods bound to the node, and nothing else.
//
// A Cache is safe for concurrent use. Get registers the asking pod as a
// user of the object and starts its watch on first use; Release drops all
// of a pod's registrations and stops the watches no pod uses any more. An
// optional OnChange callback hears which pods use an object when it is
// created, changed or deleted, so that their workers can act at once
// instead of at their next periodic sync.
//
// An immutable object is watched until it is first seen, then kept as it
// is (kubelet's rule). Objects returned by Get are shared with the cache:
// callers must not modify them.
package objcache

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"

	// Its init keeps client-go's reflectors listing then watching (the
	// WatchListClient gate off), for these reflectors too.
	_ "github.com/nodeagent/nodeagent/internal/informer"
)

// DefaultSyncTimeout is how long Get waits for a new watch's first list
// when the caller's context has no earlier deadline.
const DefaultSyncTimeout = 10 * time.Second

// syncPoll is how often a Get waiting for a first list checks whether it
// failed.
const syncPoll = 20 * time.Millisecond

// ListWatchFunc returns the list and watch of one named object (a
// fieldSelector on metadata.name).
type ListWatchFunc func(namespace, name string) *cache.ListWatch

// Cache holds watched copies of objects of one resource, of type T.
type Cache[T runtime.Object] struct {
	resource    schema.GroupResource // for NotFound errors: kubelet's "secret", "configmap"
	newLW       ListWatchFunc
	expected    T
	log         *slog.Logger
	syncTimeout time.Duration

	mu       sync.Mutex
	items    map[types.NamespacedName]*item
	onChange func(uids []types.UID, namespace, name string)
}

type item struct {
	key      types.NamespacedName
	refs     sets.Set[types.UID] // under Cache.mu
	stop     chan struct{}
	stopOnce sync.Once

	mu      sync.Mutex
	obj     runtime.Object // nil: absent
	rv      string
	synced  chan struct{} // closed by the first list
	lastErr error         // the last list or watch error
}

// New returns a Cache of resource (its name in NotFound errors) whose
// watches come from newLW. expected is a zero object of type T (the
// reflector's expected type).
func New[T runtime.Object](resource schema.GroupResource, expected T, newLW ListWatchFunc, log *slog.Logger) *Cache[T] {
	if log == nil {
		log = slog.Default()
	}
	return &Cache[T]{
		resource:    resource,
		newLW:       newLW,
		expected:    expected,
		log:         log,
		syncTimeout: DefaultSyncTimeout,
		items:       map[types.NamespacedName]*item{},
	}
}

// NewSecrets returns a Cache of Secrets read through client, the Secrets
// client of a namespace (client-go's CoreV1().Secrets, its fake's, or
// internal/kubeclient's). A missing Secret is apierrors.NotFound for
// resource "secret", as kubelet reports it (`secret "x" not found`).
func NewSecrets[C Namespaced[*v1.SecretList]](client func(namespace string) C, log *slog.Logger) *Cache[*v1.Secret] {
	return New(schema.GroupResource{Resource: "secret"}, &v1.Secret{}, byName(func(ns string) Namespaced[*v1.SecretList] {
		return client(ns)
	}), log)
}

// NewConfigMaps returns a Cache of ConfigMaps read through client, the
// ConfigMaps client of a namespace. A missing ConfigMap is
// apierrors.NotFound for resource "configmap".
func NewConfigMaps[C Namespaced[*v1.ConfigMapList]](client func(namespace string) C, log *slog.Logger) *Cache[*v1.ConfigMap] {
	return New(schema.GroupResource{Resource: "configmap"}, &v1.ConfigMap{}, byName(func(ns string) Namespaced[*v1.ConfigMapList] {
		return client(ns)
	}), log)
}

// Namespaced is the part of a typed client for one namespace that a watch
// by name needs.
type Namespaced[L runtime.Object] interface {
	List(ctx context.Context, o metav1.ListOptions) (L, error)
	Watch(ctx context.Context, o metav1.ListOptions) (watch.Interface, error)
}

// byName lists and watches one object by name (a field selector on
// metadata.name, which the Node authorizer allows for objects a bound pod
// references).
func byName[L runtime.Object](client func(ns string) Namespaced[L]) ListWatchFunc {
	return func(ns, name string) *cache.ListWatch {
		c := client(ns)
		return &cache.ListWatch{
			ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
				o.FieldSelector = nameSelector(name)
				return c.List(ctx, o)
			},
			WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
				o.FieldSelector = nameSelector(name)
				return c.Watch(ctx, o)
			},
		}
	}
}

func nameSelector(name string) string {
	return fields.OneTermEqualSelector("metadata.name", name).String()
}

// OnChange sets f to be called, outside the cache's locks and from the
// watch's goroutine, with the pods that use an object when it appears,
// changes (new resourceVersion) or disappears. Set it before the first
// Get.
func (c *Cache[T]) OnChange(f func(uids []types.UID, namespace, name string)) {
	c.mu.Lock()
	c.onChange = f
	c.mu.Unlock()
}

// Get returns the object namespace/name for the pod with uid, registering
// the pod as its user and starting its watch on first use. The first Get
// of an object waits for the watch's first list (until ctx is done or
// DefaultSyncTimeout passed); later ones answer from memory. A missing
// object is an apierrors.NotFound error; a list that failed (Forbidden,
// say) is returned as that error.
func (c *Cache[T]) Get(ctx context.Context, uid types.UID, namespace, name string) (T, error) {
	var zero T
	key := types.NamespacedName{Namespace: namespace, Name: name}
	c.mu.Lock()
	it, ok := c.items[key]
	if !ok {
		it = &item{key: key, refs: sets.New[types.UID](), stop: make(chan struct{}), synced: make(chan struct{})}
		c.items[key] = it
		c.start(it)
	}
	it.refs.Insert(uid)
	c.mu.Unlock()

	select {
	case <-it.synced:
	default:
		// Wait for the first list; a failed one (Forbidden, say) is
		// returned at once while the watch keeps retrying.
		t := time.NewTimer(c.syncTimeout)
		defer t.Stop()
		tick := time.NewTicker(syncPoll)
		defer tick.Stop()
	wait:
		for {
			select {
			case <-it.synced:
				break wait
			case <-ctx.Done():
				return zero, fmt.Errorf("wait for %s %q: %w", c.resource.Resource, name, errors.Join(ctx.Err(), it.err()))
			case <-t.C:
				return zero, fmt.Errorf("failed to sync %s cache: timed out waiting for the condition", c.resource.Resource)
			case <-tick.C:
				if err := it.err(); err != nil {
					return zero, err
				}
			}
		}
	}
	it.mu.Lock()
	obj := it.obj
	it.mu.Unlock()
	if obj == nil {
		return zero, apierrors.NewNotFound(c.resource, name)
	}
	return obj.(T), nil
}

// Release drops the pod's registrations; watches no pod uses stop.
func (c *Cache[T]) Release(uid types.UID) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for k, it := range c.items {
		it.refs.Delete(uid)
		if it.refs.Len() == 0 {
			it.stopWatch()
			delete(c.items, k)
		}
	}
}

// Watched returns how many objects are being watched.
func (c *Cache[T]) Watched() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.items)
}

// stopWatch ends the item's watch (once).
func (it *item) stopWatch() { it.stopOnce.Do(func() { close(it.stop) }) }

func (it *item) err() error {
	it.mu.Lock()
	defer it.mu.Unlock()
	return it.lastErr
}

// start runs the item's reflector until it is released. Under c.mu.
func (c *Cache[T]) start(it *item) {
	st := &store[T]{c: c, it: it}
	lw := c.newLW(it.key.Namespace, it.key.Name)
	list := lw.ListWithContextFunc
	// Keep the last list error for Get (a Forbidden list never syncs).
	lw.ListWithContextFunc = func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
		obj, err := list(ctx, o)
		if err != nil {
			it.mu.Lock()
			it.lastErr = err
			it.mu.Unlock()
			c.log.Debug("list failed", "resource", c.resource.Resource, "namespace", it.key.Namespace, "name", it.key.Name, "err", err)
		}
		return obj, err
	}
	r := cache.NewReflectorWithOptions(lw, c.expected, st, cache.ReflectorOptions{
		Name:            fmt.Sprintf("objcache %s %s", c.resource.Resource, it.key),
		TypeDescription: c.resource.Resource,
	})
	go r.Run(it.stop)
}

// changed tells OnChange about the item's users.
func (c *Cache[T]) changed(it *item) {
	c.mu.Lock()
	f := c.onChange
	uids := it.refs.UnsortedList()
	c.mu.Unlock()
	if f != nil && len(uids) > 0 {
		f(uids, it.key.Namespace, it.key.Name)
	}
}

// store is the reflector's store of one item: it keeps the object named by
// the item (the fieldSelector should ensure nothing else arrives; fake
// clients ignore it).
type store[T runtime.Object] struct {
	c  *Cache[T]
	it *item
}

func (s *store[T]) mine(obj any) (runtime.Object, bool) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	o, ok := obj.(runtime.Object)
	if !ok {
		return nil, false
	}
	m, err := meta.Accessor(o)
	if err != nil || m.GetName() != s.it.key.Name || m.GetNamespace() != s.it.key.Namespace {
		return nil, false
	}
	return o, true
}

// set records obj (nil: absent) and tells OnChange when that is news: an
// event (event), or a list that found the object changed (another
// resourceVersion) or appeared or gone.
func (s *store[T]) set(obj runtime.Object, event bool) {
	rv := ""
	if obj != nil {
		if m, err := meta.Accessor(obj); err == nil {
			rv = m.GetResourceVersion()
		}
	}
	it := s.it
	it.mu.Lock()
	news := event || (it.obj == nil) != (obj == nil) || it.rv != rv
	it.obj, it.rv, it.lastErr = obj, rv, nil
	select {
	case <-it.synced:
	default:
		close(it.synced)
	}
	it.mu.Unlock()
	if immutable(obj) {
		// It cannot change any more (only be deleted and re-created,
		// which pods that use it do not see, as with kubelet).
		it.stopWatch()
	}
	if news {
		s.c.changed(it)
	}
}

func immutable(obj runtime.Object) bool {
	switch o := obj.(type) {
	case *v1.Secret:
		return o.Immutable != nil && *o.Immutable
	case *v1.ConfigMap:
		return o.Immutable != nil && *o.Immutable
	}
	return false
}

func (s *store[T]) Add(obj any) error {
	if o, ok := s.mine(obj); ok {
		s.set(o, true)
	}
	return nil
}

func (s *store[T]) Update(obj any) error { return s.Add(obj) }

func (s *store[T]) Delete(obj any) error {
	if _, ok := s.mine(obj); ok {
		s.set(nil, true)
	}
	return nil
}

func (s *store[T]) Replace(list []any, _ string) error {
	var found runtime.Object
	for _, obj := range list {
		if o, ok := s.mine(obj); ok {
			found = o
		}
	}
	s.set(found, false)
	return nil
}

func (s *store[T]) Resync() error { return nil }
