// Package objcache reads the ConfigMaps and Secrets that pods reference
// from the API server with the node's credentials, and keeps each object
// for a TTL, as kubelet's cache-based configmap and secret managers
// (pkg/kubelet/util/manager) do.
//
// # What it promises
//
// Get returns the object as the API server last returned it, fetched with
// a GET when there is no copy, when the copy is older than the TTL, or
// when the caller asks for a fresh one (kubelet refetches an object when a
// new pod that references it is registered, so a pod created after an
// update sees the update). Errors are never cached: a NotFound object is
// asked for again on the next Get, so a pod waiting for a missing
// ConfigMap starts as soon as it exists. A fetch that fails for another
// reason while a copy is held returns the copy (kubelet's behaviour: an
// API outage does not stop containers from restarting).
//
// Under the Node authorizer a node may read only the objects referenced by
// pods bound to it; callers must not use a Store for static pods (kubelet
// refuses static pods that reference API objects).
//
// Get may be called concurrently; fetches of different objects run in
// parallel, fetches of one object are not coalesced.
package objcache

import (
	"context"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/clock"
)

// DefaultTTL is kubelet's default cache TTL for ConfigMaps and Secrets
// (its node.alpha.kubernetes.io/ttl annotation is not read).
const DefaultTTL = time.Minute

// maxEntries bounds the cache; beyond it, expired entries are dropped
// first, then everything.
const maxEntries = 4096

type key struct{ namespace, name string }

type entry[T any] struct {
	obj     T
	fetched time.Time
}

// Store caches one kind of object.
type Store[T any] struct {
	// resource names the kind in NotFound errors, as kubelet's managers
	// do ("configmap", "secret": `configmap "x" not found`).
	resource string
	get      func(ctx context.Context, namespace, name string) (T, error)
	clock    clock.PassiveClock
	ttl      time.Duration

	mu    sync.Mutex
	items map[key]entry[T]
}

// New makes a Store that fetches resource with get.
func New[T any](resource string, get func(ctx context.Context, namespace, name string) (T, error), clk clock.PassiveClock, ttl time.Duration) *Store[T] {
	if clk == nil {
		clk = clock.RealClock{}
	}
	if ttl <= 0 {
		ttl = DefaultTTL
	}
	return &Store[T]{resource: resource, get: get, clock: clk, ttl: ttl, items: map[key]entry[T]{}}
}

// ConfigMaps is a Store of the client's ConfigMaps.
func ConfigMaps(c kubernetes.Interface, clk clock.PassiveClock, ttl time.Duration) *Store[*v1.ConfigMap] {
	return New("configmap", func(ctx context.Context, ns, name string) (*v1.ConfigMap, error) {
		return c.CoreV1().ConfigMaps(ns).Get(ctx, name, metav1.GetOptions{})
	}, clk, ttl)
}

// Secrets is a Store of the client's Secrets.
func Secrets(c kubernetes.Interface, clk clock.PassiveClock, ttl time.Duration) *Store[*v1.Secret] {
	return New("secret", func(ctx context.Context, ns, name string) (*v1.Secret, error) {
		return c.CoreV1().Secrets(ns).Get(ctx, name, metav1.GetOptions{})
	}, clk, ttl)
}

// Get returns namespace/name; fresh forces a fetch. A missing object is
// a NotFound error that reads as kubelet's (`configmap "x" not found`).
func (s *Store[T]) Get(ctx context.Context, namespace, name string, fresh bool) (T, error) {
	k := key{namespace, name}
	now := s.clock.Now()
	s.mu.Lock()
	e, ok := s.items[k]
	s.mu.Unlock()
	if ok && !fresh && now.Sub(e.fetched) < s.ttl {
		return e.obj, nil
	}
	obj, err := s.get(ctx, namespace, name)
	if err != nil {
		if apierrors.IsNotFound(err) {
			s.mu.Lock()
			delete(s.items, k)
			s.mu.Unlock()
			var zero T
			return zero, apierrors.NewNotFound(schema.GroupResource{Resource: s.resource}, name)
		}
		if ok {
			return e.obj, nil
		}
		var zero T
		return zero, err
	}
	s.mu.Lock()
	if len(s.items) >= maxEntries {
		s.evict(now)
	}
	s.items[k] = entry[T]{obj: obj, fetched: now}
	s.mu.Unlock()
	return obj, nil
}

// evict drops expired entries, or all when none expired. Called with mu.
func (s *Store[T]) evict(now time.Time) {
	for k, e := range s.items {
		if now.Sub(e.fetched) >= s.ttl {
			delete(s.items, k)
		}
	}
	if len(s.items) >= maxEntries {
		clear(s.items)
	}
}

// Len is the number of cached objects.
func (s *Store[T]) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.items)
}
