package imagegc

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/utils/clock"

	"github.com/nodeagent/nodeagent/runtime"
)

// GCPeriod is how often the collector runs (kubelet's ImageGCPeriod).
const GCPeriod = 5 * time.Minute

// Event reasons and messages of kubelet's image garbage collector.
const (
	ReasonFreeDiskSpaceFailed = "FreeDiskSpaceFailed"
	ReasonImageGCFailed       = "ImageGCFailed"
	ReasonInvalidDiskCapacity = "InvalidDiskCapacity"
)

// Runtime is what the collector needs of the container runtime (the
// agent's namespace only); *runtime.Runtime implements it.
type Runtime interface {
	ListImages(ctx context.Context) ([]runtime.Image, error)
	ListContainers(ctx context.Context) ([]runtime.Container, error)
	// RemoveImage removes every name of the image with this ID.
	RemoveImage(ctx context.Context, id string) error
}

// ImageVolumes lists the images mounted as pod volumes (the volume
// source `image`), which are in use as long as their pod has them
// mounted, as kubelet counts image volumes (its handleImageVolumes);
// *runtime.Runtime implements it. A Runtime without it has none.
type ImageVolumes interface {
	ListImageVolumes(ctx context.Context) ([]runtime.ImageVolume, error)
}

// Recorder records events on the Node.
type Recorder interface {
	Event(object k8sruntime.Object, eventtype, reason, message string)
}

// Options configure a Collector.
type Options struct {
	Policy  Policy
	Runtime Runtime
	// Usage measures the image filesystem (statfs of containerd's
	// snapshotter root).
	Usage    func(ctx context.Context) (Usage, error)
	Recorder Recorder          // nil: no events
	Node     k8sruntime.Object // the object events are about
	Clock    clock.WithTicker
	Logger   *slog.Logger
}

// Collector runs the garbage collection; one goroutine (Run) owns it.
type Collector struct {
	mu      sync.Mutex // one collection at a time (Run, DeleteUnusedImages)
	o       Options
	records map[string]*Record
	began   time.Time
	failed  bool // the previous run failed
}

// New returns a collector; its age for imageMaximumGCAge starts now.
func New(o Options) *Collector {
	return &Collector{o: o, records: map[string]*Record{}, began: o.Clock.Now()}
}

// Run collects every GCPeriod until ctx is done (nothing when the policy
// is disabled). A failure is logged; a second failure in a row is also an
// ImageGCFailed event, as kubelet reports it.
func (c *Collector) Run(ctx context.Context) {
	if c.o.Policy.Disabled() {
		c.o.Logger.Info("image garbage collection disabled (imageGCHighThresholdPercent 100, no imageMaximumGCAge)")
		return
	}
	t := c.o.Clock.NewTicker(GCPeriod)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C():
		}
		c.RunOnce(ctx)
	}
}

// RunOnce runs one collection and reports its error as Run does.
func (c *Collector) RunOnce(ctx context.Context) error {
	err := c.GarbageCollect(ctx)
	switch {
	case err != nil && c.failed:
		c.o.Logger.Error("image garbage collection failed multiple times in a row", "err", err)
		c.event(v1.EventTypeWarning, ReasonImageGCFailed, err.Error())
	case err != nil:
		c.o.Logger.Warn("image garbage collection failed", "err", err)
	case c.failed:
		c.o.Logger.Info("image garbage collection succeeded")
	}
	c.failed = err != nil
	return err
}

func (c *Collector) event(typ, reason, msg string) {
	if c.o.Recorder != nil && c.o.Node != nil {
		c.o.Recorder.Event(c.o.Node, typ, reason, msg)
	}
}

// Records returns the collector's records (for tests and debugging).
func (c *Collector) Records() []Record {
	out := make([]Record, 0, len(c.records))
	for _, r := range c.records {
		out = append(out, *r)
	}
	return out
}

// detect refreshes the records from the runtime at now.
func (c *Collector) detect(ctx context.Context, now time.Time) error {
	imgs, err := c.o.Runtime.ListImages(ctx)
	if err != nil {
		return err
	}
	cs, err := c.o.Runtime.ListContainers(ctx)
	if err != nil {
		return err
	}
	// Containers name their image; map names to IDs.
	byName := map[string]string{}
	for _, im := range imgs {
		for _, n := range im.Names {
			byName[n] = im.ID
		}
	}
	inUse := map[string]bool{}
	if iv, ok := c.o.Runtime.(ImageVolumes); ok {
		vols, err := iv.ListImageVolumes(ctx)
		if err != nil {
			return err
		}
		for _, v := range vols {
			inUse[v.ImageID] = true
		}
	}
	for _, ct := range cs {
		if id, ok := byName[ct.Image]; ok {
			inUse[id] = true
		} else if norm, err := runtime.NormalizeImageRef(ct.Image); err == nil {
			inUse[byName[norm]] = true
		}
	}
	seen := map[string]bool{}
	for _, im := range imgs {
		seen[im.ID] = true
		r := c.records[im.ID]
		if r == nil {
			r = &Record{ID: im.ID, FirstDetected: now}
			c.records[im.ID] = r
		}
		r.Size, r.Pinned, r.InUse = im.Size, im.Pinned, inUse[im.ID]
		if r.InUse {
			r.LastUsed = now
		}
	}
	for id := range c.records {
		if !seen[id] {
			delete(c.records, id)
		}
	}
	return nil
}

// GarbageCollect runs one collection at the clock's now.
func (c *Collector) GarbageCollect(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.o.Clock.Now()
	if err := c.detect(ctx, now); err != nil {
		return fmt.Errorf("detecting images: %w", err)
	}
	if old := c.o.Policy.TooOld(now, c.began, c.Records()); len(old) > 0 {
		if _, errs := c.remove(ctx, old, 0, "age"); len(errs) > 0 {
			return fmt.Errorf("wanted to free images older than %v, encountered errors in image deletion: %w", c.o.Policy.MaxAge, utilerrors.NewAggregate(errs))
		}
	}
	u, err := c.o.Usage(ctx)
	if err != nil {
		return fmt.Errorf("measuring the image filesystem: %w", err)
	}
	if u.Capacity <= 0 {
		err := errors.New("invalid capacity 0 on image filesystem")
		c.event(v1.EventTypeWarning, ReasonInvalidDiskCapacity, err.Error())
		return err
	}
	need := c.o.Policy.BytesToFree(u)
	if need == 0 {
		return nil
	}
	c.o.Logger.Info("disk usage on the image filesystem is over the high threshold, trying to free bytes down to the low threshold",
		"usage", u.Percent(), "highThreshold", c.o.Policy.HighThresholdPercent, "amountToFree", need, "lowThreshold", c.o.Policy.LowThresholdPercent)
	plan, _ := c.o.Policy.ForSpace(now, need, c.Records())
	freed, errs := c.remove(ctx, plan, need, "space")
	if len(errs) > 0 {
		return fmt.Errorf("wanted to free %d bytes, but freed %d bytes space with errors in image deletion: %w", need, freed, utilerrors.NewAggregate(errs))
	}
	if freed < need {
		err := fmt.Errorf("Failed to garbage collect required amount of images. Attempted to free %d bytes, but only found %d bytes eligible to free.", need, freed) //nolint:staticcheck // kubelet's message
		c.event(v1.EventTypeWarning, ReasonFreeDiskSpaceFailed, err.Error())
		return err
	}
	return nil
}

// remove removes rs in order, until freed reaches need (0: all), and
// returns what it freed and the removals that failed.
func (c *Collector) remove(ctx context.Context, rs []Record, need int64, why string) (int64, []error) {
	var freed int64
	var errs []error
	for _, r := range rs {
		c.o.Logger.Info("removing image to free bytes", "imageID", r.ID, "size", r.Size, "reason", why)
		if err := c.o.Runtime.RemoveImage(ctx, r.ID); err != nil {
			errs = append(errs, err)
			continue
		}
		delete(c.records, r.ID)
		freed += r.Size
		if need > 0 && freed >= need {
			break
		}
	}
	return freed, errs
}
