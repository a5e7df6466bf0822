package pleg

import (
	"context"
	"sync"
	"time"

	"github.com/nodeagent/nodeagent/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
)

// PodStatus is the cached runtime state of one pod.
type PodStatus struct {
	Pod        runtime.PodRef
	Containers []runtime.Container
	// Timestamp: the status reflects the runtime's state as of this time.
	Timestamp time.Time
}

// Cache holds the latest observed status of every pod. A pod that has no
// containers is reported as an empty PodStatus (not an error), so a worker
// can wait for "my pod's status newer than T" before or after its containers
// exist. It is safe for concurrent use.
type Cache struct {
	mu      sync.Mutex
	pods    map[types.UID]PodStatus
	global  time.Time     // every pod's status is at least as new as this
	changed chan struct{} // closed and replaced on every update
	// live, when set, reports that every status is current as of the
	// returned time (the event-driven PLEG's lazy global timestamp). It is
	// called without c.mu held.
	live  func() (time.Time, bool)
	clock clock.Clock // for waiting while live
}

func newCache() *Cache {
	return &Cache{pods: map[types.UID]PodStatus{}, changed: make(chan struct{})}
}

// Get returns the pod's status; the bool is false if the pod has no known
// containers (the returned status then has the global timestamp).
func (c *Cache) Get(uid types.UID) (PodStatus, bool) {
	live := c.liveTime()
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.getLocked(uid, live)
}

// notify wakes GetNewerThan waiters (liveness may have changed).
func (c *Cache) notify() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.notifyLocked()
}

func (c *Cache) liveTime() time.Time {
	if c.live == nil {
		return time.Time{}
	}
	t, _ := c.live()
	return t
}

func (c *Cache) getLocked(uid types.UID, live time.Time) (PodStatus, bool) {
	global := c.global
	if live.After(global) {
		global = live
	}
	s, ok := c.pods[uid]
	if !ok {
		return PodStatus{Pod: runtime.PodRef{UID: uid}, Timestamp: global}, false
	}
	if global.After(s.Timestamp) {
		s.Timestamp = global
	}
	return s, true
}

// GetNewerThan blocks until the pod's status is newer than min (strictly
// after it) and returns it, or returns ctx's error.
func (c *Cache) GetNewerThan(ctx context.Context, uid types.UID, min time.Time) (PodStatus, error) {
	for {
		live := c.liveTime()
		c.mu.Lock()
		s, _ := c.getLocked(uid, live)
		ch := c.changed
		c.mu.Unlock()
		if s.Timestamp.After(min) {
			return s, nil
		}
		var tick <-chan time.Time
		if !live.IsZero() && c.clock != nil {
			// Live but not yet past min: time itself will make it newer.
			tick = c.clock.After(time.Millisecond)
		}
		select {
		case <-ch:
		case <-tick:
		case <-ctx.Done():
			return PodStatus{}, ctx.Err()
		}
	}
}

func (c *Cache) notifyLocked() {
	close(c.changed)
	c.changed = make(chan struct{})
}

// set replaces a pod's status unless the cached one is newer.
func (c *Cache) set(s PodStatus) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if old, ok := c.pods[s.Pod.UID]; ok && old.Timestamp.After(s.Timestamp) {
		return
	}
	if len(s.Containers) == 0 {
		delete(c.pods, s.Pod.UID)
	} else {
		c.pods[s.Pod.UID] = s
	}
	c.notifyLocked()
}

// setAll replaces every pod's status with a complete listing taken at ts;
// pods absent from it are dropped unless updated after ts.
func (c *Cache) setAll(pods map[types.UID]PodStatus, ts time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for uid, old := range c.pods {
		if _, ok := pods[uid]; !ok && !old.Timestamp.After(ts) {
			delete(c.pods, uid)
		}
	}
	for uid, s := range pods {
		if old, ok := c.pods[uid]; ok && old.Timestamp.After(ts) {
			continue
		}
		s.Timestamp = ts
		c.pods[uid] = s
	}
	if ts.After(c.global) {
		c.global = ts
	}
	c.notifyLocked()
}
