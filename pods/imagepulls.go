package pods

import (
	"context"
	"errors"
	"time"

	"k8s.io/client-go/util/flowcontrol"
	"k8s.io/utils/clock"
)

// ImagePullLimits are kubelet's image pull settings: serializeImagePulls,
// maxParallelImagePulls, registryPullQPS and registryBurst. The zero value
// is parallel pulls without a bound or a rate limit.
type ImagePullLimits struct {
	// Serialize pulls one image at a time on the node.
	Serialize bool
	// MaxParallel bounds the pulls in progress when they are not
	// serialized; 0 means no bound.
	MaxParallel int32
	// QPS and Burst are a token bucket on pull starts; QPS 0 means no limit.
	QPS   float32
	Burst int
}

// errPullQPSExceeded is kubelet's error for a pull that found the pull
// rate's bucket empty: it fails at once, becoming the container's
// ErrImagePull and putting the image into back-off, rather than waiting.
var errPullQPSExceeded = errors.New("pull QPS exceeded")

// imagePuller is the node's pulls, shared by every pod's worker, as
// kubelet's image manager has one puller: with Serialize a pull waits for
// the one in progress (kubelet's serial puller, a queue in order of
// asking), with MaxParallel for one of those in progress to end; the rate
// limit is checked when a pull gets its turn, as kubelet's throttled image
// service sits under its puller.
type imagePuller struct {
	// slots holds a token per pull in progress (nil: no bound).
	slots   chan struct{}
	limiter flowcontrol.RateLimiter // nil: no rate limit
	clock   clock.PassiveClock
}

func newImagePuller(l ImagePullLimits, clk clock.Clock) *imagePuller {
	p := &imagePuller{clock: clk}
	switch {
	case l.Serialize:
		p.slots = make(chan struct{}, 1)
	case l.MaxParallel > 0:
		p.slots = make(chan struct{}, l.MaxParallel)
	}
	if l.QPS > 0 {
		p.limiter = flowcontrol.NewTokenBucketRateLimiterWithClock(l.QPS, l.Burst, clk)
	}
	return p
}

// do runs pull when its turn comes and the rate allows, and returns how
// long the pull itself took (the Pulled event's first duration: without
// the wait for its turn). A pull whose ctx ends while it waits is not run.
func (p *imagePuller) do(ctx context.Context, pull func(context.Context) error) (time.Duration, error) {
	if p.slots != nil {
		// Waiting goroutines are handed the slot in the order they
		// came, as kubelet's serial puller takes its queue in order.
		select {
		case p.slots <- struct{}{}:
		case <-ctx.Done():
			return 0, ctx.Err()
		}
		defer func() { <-p.slots }()
	}
	start := p.clock.Now()
	if p.limiter != nil && !p.limiter.TryAccept() {
		return p.clock.Since(start), errPullQPSExceeded
	}
	err := pull(ctx)
	return p.clock.Since(start), err
}
