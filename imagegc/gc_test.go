package imagegc

import (
	"context"
	"errors"
	"reflect"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/nodeagent/nodeagent/internal/testing/testlog"
	"github.com/nodeagent/nodeagent/runtime"
)

// fakeFS is a runtime whose images take space on a filesystem.
type fakeFS struct {
	mu       sync.Mutex
	images   map[string]runtime.Image
	ctrs     []runtime.Container
	capacity int64
	other    int64 // bytes used by everything else
	removed  []string
	failRm   map[string]bool
	lists    int
	vols     []runtime.ImageVolume // images mounted as pod volumes
}

func (f *fakeFS) ListImageVolumes(context.Context) ([]runtime.ImageVolume, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]runtime.ImageVolume(nil), f.vols...), nil
}

func (f *fakeFS) ListImages(context.Context) ([]runtime.Image, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.lists++
	var out []runtime.Image
	for _, im := range f.images {
		out = append(out, im)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, nil
}

func (f *fakeFS) ListContainers(context.Context) ([]runtime.Container, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]runtime.Container(nil), f.ctrs...), nil
}

func (f *fakeFS) RemoveImage(_ context.Context, id string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.failRm[id] {
		return errors.New("image is busy")
	}
	delete(f.images, id)
	f.removed = append(f.removed, id)
	return nil
}

func (f *fakeFS) usage(context.Context) (Usage, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	used := f.other
	for _, im := range f.images {
		used += im.Size
	}
	return Usage{Capacity: f.capacity, Available: f.capacity - used}, nil
}

func (f *fakeFS) add(id, name string, size int64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.images[id] = runtime.Image{ID: id, Names: []string{name}, Size: size}
}

type events struct {
	mu  sync.Mutex
	evs []string
}

func (e *events) Event(_ k8sruntime.Object, typ, reason, msg string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.evs = append(e.evs, typ+" "+reason+": "+msg)
}

func newCollector(t *testing.T, p Policy) (*Collector, *fakeFS, *testingclock.FakeClock, *events) {
	fs := &fakeFS{images: map[string]runtime.Image{}, capacity: 1000}
	clk := testingclock.NewFakeClock(t0)
	ev := &events{}
	c := New(Options{Policy: p, Runtime: fs, Usage: fs.usage, Recorder: ev, Node: &v1.Node{}, Clock: clk, Logger: testlog.New(t)})
	return c, fs, clk, ev
}

var kubeletPolicy = Policy{HighThresholdPercent: 85, LowThresholdPercent: 80, MinAge: 2 * time.Minute}

// Above the high threshold, unused images are removed least recently used
// first until usage is below the low threshold; images in use, pinned or
// younger than the minimum age stay.
func TestCollectorFreesDownToLow(t *testing.T) {
	c, fs, clk, ev := newCollector(t, kubeletPolicy)
	ctx := context.Background()
	fs.other = 690
	fs.add("sha256:a", "docker.io/library/a:1", 40)
	fs.add("sha256:b", "docker.io/library/b:1", 40)
	fs.add("sha256:c", "docker.io/library/c:1", 40)
	fs.add("sha256:pinned", "registry.k8s.io/pause:3.10", 40)
	fs.images["sha256:pinned"] = runtime.Image{ID: "sha256:pinned", Names: []string{"registry.k8s.io/pause:3.10"}, Size: 40, Pinned: true}
	// c runs (referenced by its short name), a ran once and stopped.
	fs.ctrs = []runtime.Container{{ID: "1", Image: "c:1"}, {ID: "2", Image: "docker.io/library/a:1"}}
	if err := c.RunOnce(ctx); err != nil { // 85%: nothing old enough yet
		if !strings.Contains(err.Error(), "only found 0 bytes eligible") {
			t.Fatalf("first run: %v", err)
		}
	}
	if len(fs.removed) != 0 {
		t.Fatalf("removed images younger than the minimum age: %v", fs.removed)
	}
	if len(ev.evs) != 1 || !strings.HasPrefix(ev.evs[0], "Warning FreeDiskSpaceFailed: Failed to garbage collect required amount of images. Attempted to free 50 bytes, but only found 0 bytes eligible to free.") {
		t.Fatalf("events %v", ev.evs)
	}
	// a's container is removed; a was used more recently than b.
	clk.Step(time.Minute)
	fs.ctrs = fs.ctrs[:1]
	clk.Step(2 * time.Minute)
	fs.add("sha256:d", "docker.io/library/d:1", 10) // young
	// 860 used of 1000 (86%): free 60 down to 80%.
	ev.evs = nil
	if err := c.RunOnce(ctx); err != nil {
		t.Fatalf("second run: %v", err)
	}
	if want := []string{"sha256:b", "sha256:a"}; !reflect.DeepEqual(fs.removed, want) {
		t.Fatalf("removed %v, want %v (never used, then least recently used)", fs.removed, want)
	}
	if u, _ := fs.usage(ctx); u.Percent() > 82 {
		t.Fatalf("usage after GC %d%%", u.Percent())
	}
	if len(ev.evs) != 0 {
		t.Fatalf("events %v", ev.evs)
	}
	// Below the high threshold nothing more goes.
	fs.removed = nil
	clk.Step(10 * time.Minute)
	if err := c.RunOnce(ctx); err != nil || len(fs.removed) != 0 {
		t.Fatalf("under the threshold: removed %v, err %v", fs.removed, err)
	}
}

// A second failure in a row is an ImageGCFailed event; removal errors are
// reported with kubelet's wording.
func TestCollectorFailures(t *testing.T) {
	c, fs, clk, ev := newCollector(t, kubeletPolicy)
	ctx := context.Background()
	fs.other = 900
	fs.add("sha256:a", "a", 50)
	fs.failRm = map[string]bool{"sha256:a": true}
	clk.Step(time.Hour)
	c.RunOnce(ctx) // detected now: too young
	clk.Step(3 * time.Minute)
	err := c.RunOnce(ctx)
	if err == nil || !strings.Contains(err.Error(), "wanted to free 150 bytes, but freed 0 bytes space with errors in image deletion: image is busy") {
		t.Fatalf("err %v", err)
	}
	var gcFailed int
	for _, e := range ev.evs {
		if strings.HasPrefix(e, "Warning ImageGCFailed: wanted to free") {
			gcFailed++
		}
	}
	if gcFailed != 1 {
		t.Fatalf("events %v, want one ImageGCFailed (the second failure)", ev.evs)
	}
}

// imageMaximumGCAge removes images unused for that long, whatever the
// usage, once the collector has run that long.
func TestCollectorMaxAge(t *testing.T) {
	p := kubeletPolicy
	p.MaxAge = time.Hour
	c, fs, clk, _ := newCollector(t, p)
	ctx := context.Background()
	fs.add("sha256:old", "old", 1)
	fs.add("sha256:used", "used", 1)
	fs.ctrs = []runtime.Container{{ID: "1", Image: "used"}}
	if err := c.RunOnce(ctx); err != nil {
		t.Fatal(err)
	}
	clk.Step(30 * time.Minute)
	c.RunOnce(ctx) // last seen in use at 30m
	fs.ctrs = nil
	clk.Step(31 * time.Minute)
	c.RunOnce(ctx)
	if want := []string{"sha256:old"}; !reflect.DeepEqual(fs.removed, want) {
		t.Fatalf("removed %v, want %v", fs.removed, want)
	}
	clk.Step(30 * time.Minute)
	c.RunOnce(ctx)
	if want := []string{"sha256:old", "sha256:used"}; !reflect.DeepEqual(fs.removed, want) {
		t.Fatalf("removed %v, want %v", fs.removed, want)
	}
}

// Run collects every 5 minutes, and not at all when disabled.
func TestCollectorRun(t *testing.T) {
	c, fs, clk, _ := newCollector(t, kubeletPolicy)
	fs.other = 950
	fs.add("sha256:a", "a", 10)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); c.Run(ctx) }()
	lists := func() int {
		fs.mu.Lock()
		defer fs.mu.Unlock()
		return fs.lists
	}
	for !clk.HasWaiters() {
		time.Sleep(time.Millisecond)
	}
	for i := 1; i <= 2; i++ {
		clk.Step(GCPeriod)
		deadline := time.Now().Add(5 * time.Second)
		for lists() < i {
			if time.Now().After(deadline) {
				t.Fatalf("no collection %d after %v", i, GCPeriod*time.Duration(i))
			}
			time.Sleep(time.Millisecond)
		}
	}
	cancel()
	<-done
	if want := []string{"sha256:a"}; !reflect.DeepEqual(fs.removed, want) {
		t.Fatalf("removed %v after two periods, want %v", fs.removed, want)
	}

	d, dfs, _, _ := newCollector(t, Policy{HighThresholdPercent: 100, LowThresholdPercent: 80})
	d.Run(context.Background()) // returns at once
	if dfs.lists != 0 {
		t.Fatal("a disabled collector listed images")
	}
}
