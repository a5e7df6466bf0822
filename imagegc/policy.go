// Package imagegc removes unused images when the image filesystem fills
// up, as kubelet's image garbage collector does (pkg/kubelet/images).
//
// Every run (GCPeriod, 5m) it lists the images of the agent's containerd
// namespace and the images its containers use (in any state), and keeps a
// record per image ID: when it was first detected and when it was last seen
// in use. Then:
//
//   - with imageMaximumGCAge set, images unused for longer than that are
//     removed (once the collector has run for that long);
//   - when the image filesystem's usage (100 - available×100/capacity) is
//     at or above imageGCHighThresholdPercent, unused images are removed,
//     least recently used first (then first detected first), skipping those
//     detected less than imageMinimumGCAge ago, until the bytes to free
//     (capacity×(100-low)/100 - available) are freed; if they cannot be, a
//     FreeDiskSpaceFailed event says so.
//
// An image used by a container of the namespace, or pinned (containerd's
// io.cri-containerd.pinned=pinned label), is never removed. Nothing outside
// the namespace is seen or touched. The decisions are pure functions of
// (now, records, usage) in this file; gc.go applies them.
package imagegc

import (
	"sort"
	"time"
)

// Policy is the garbage collection policy (kubelet's ImageGCPolicy).
type Policy struct {
	HighThresholdPercent int           // imageGCHighThresholdPercent (85)
	LowThresholdPercent  int           // imageGCLowThresholdPercent (80)
	MinAge               time.Duration // imageMinimumGCAge (2m)
	MaxAge               time.Duration // imageMaximumGCAge (0: off)
}

// Disabled says the policy never removes anything (kubelet: a high
// threshold of 100 and no maximum age).
func (p Policy) Disabled() bool { return p.HighThresholdPercent >= 100 && p.MaxAge == 0 }

// Record is what the collector knows of one image.
type Record struct {
	ID            string
	FirstDetected time.Time
	LastUsed      time.Time // zero: never seen in use
	Size          int64
	Pinned        bool
	InUse         bool // in use at the last detection
}

// Usage is the image filesystem's size and free space, in bytes.
type Usage struct {
	Capacity  int64
	Available int64
}

// Percent is kubelet's usage percentage: 100 - available×100/capacity.
func (u Usage) Percent() int {
	if u.Capacity <= 0 {
		return 0
	}
	a := min(u.Available, u.Capacity)
	return 100 - int(a*100/u.Capacity)
}

// BytesToFree is how much must be freed to get from u down to the low
// threshold when u is at or above the high threshold; 0 otherwise.
func (p Policy) BytesToFree(u Usage) int64 {
	if u.Capacity <= 0 || u.Percent() < p.HighThresholdPercent {
		return 0
	}
	a := min(u.Available, u.Capacity)
	return max(u.Capacity*int64(100-p.LowThresholdPercent)/100-a, 0)
}

// Evictable returns the records that may be removed at all (not in use,
// not pinned), in eviction order: least recently used first, then first
// detected first, then by ID for a stable order.
func Evictable(records []Record) []Record {
	var out []Record
	for _, r := range records {
		if !r.InUse && !r.Pinned {
			out = append(out, r)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if !a.LastUsed.Equal(b.LastUsed) {
			return a.LastUsed.Before(b.LastUsed)
		}
		if !a.FirstDetected.Equal(b.FirstDetected) {
			return a.FirstDetected.Before(b.FirstDetected)
		}
		return a.ID < b.ID
	})
	return out
}

// TooOld returns the evictable images unused for longer than MaxAge, in
// eviction order; none while MaxAge is 0 or the collector has not run for
// MaxAge yet (began: its start), as kubelet (an image's last use before the
// agent started is not known).
func (p Policy) TooOld(now, began time.Time, records []Record) []Record {
	if p.MaxAge == 0 || now.Sub(began) <= p.MaxAge {
		return nil
	}
	var out []Record
	for _, r := range Evictable(records) {
		if now.Sub(lastSeen(r)) > p.MaxAge {
			out = append(out, r)
		}
	}
	return out
}

// lastSeen is when the image was last used, or first detected if never.
func lastSeen(r Record) time.Time {
	if r.LastUsed.IsZero() {
		return r.FirstDetected
	}
	return r.LastUsed
}

// ForSpace returns the images to remove, in order, to free need bytes at
// now: evictable images detected at least MinAge ago, least recently used
// first, until their sizes add up to need (fewer if there are not enough),
// and the bytes they add up to.
func (p Policy) ForSpace(now time.Time, need int64, records []Record) ([]Record, int64) {
	if need <= 0 {
		return nil, 0
	}
	var out []Record
	var sum int64
	for _, r := range Evictable(records) {
		if !r.LastUsed.Before(now) && !r.LastUsed.IsZero() {
			continue // used just now
		}
		if now.Sub(r.FirstDetected) < p.MinAge {
			continue
		}
		out = append(out, r)
		sum += r.Size
		if sum >= need {
			break
		}
	}
	return out, sum
}
