package imagegc

import (
	"context"
	"fmt"
	"math"

	utilerrors "k8s.io/apimachinery/pkg/util/errors"
)

// DeleteUnusedImages removes every image no container uses that was
// detected at least imageMinimumGCAge ago, whatever the thresholds
// (kubelet's DeleteUnusedImages, which its eviction manager calls to
// reclaim disk before evicting pods). It returns the bytes freed. Safe to
// call while Run runs.
func (c *Collector) DeleteUnusedImages(ctx context.Context) (int64, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.o.Clock.Now()
	if err := c.detect(ctx, now); err != nil {
		return 0, fmt.Errorf("detecting images: %w", err)
	}
	plan, _ := c.o.Policy.ForSpace(now, math.MaxInt64, c.Records())
	freed, errs := c.remove(ctx, plan, 0, "disk pressure")
	if len(errs) > 0 {
		return freed, fmt.Errorf("freed %d bytes with errors in image deletion: %w", freed, utilerrors.NewAggregate(errs))
	}
	return freed, nil
}
