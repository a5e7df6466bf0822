// Package heartbeat keeps the node alive in the control plane's eyes by
// renewing its Lease, kube-node-lease/<nodeName>, as KEP-589 describes.
//
// Contract:
//   - Sync performs one renewal: up to MaxAttempts attempts, each bounded by
//     half the renew interval (leaseDuration × 0.25), all of them within the
//     interval. Upstream's controller gives each attempt 10s, so five attempts
//     can outlast a 40s lease; here the whole renewal fits in the interval, and
//     no code path (ensuring the Lease exists included) blocks longer.
//   - A failed attempt is retried no earlier than its slot: attempt n starts
//     at least (n-1) × interval/MaxAttempts after the renewal began, so the
//     attempts cover the whole interval and a renewal succeeds within
//     interval/MaxAttempts (2s) of an API server that comes back, instead of
//     failing five times in a second and waiting for the next interval.
//   - NotFound drops the cached Lease; the next attempt re-creates it, so a
//     deleted Lease is back within one renewal. An update whose outcome
//     leaves the cached resourceVersion in doubt (a conflict, a timeout, a
//     lost connection: the server may have applied it) is followed by a
//     merge patch of the spec without resourceVersion, one request instead
//     of kubelet's 409, read and update; its answer makes the next renewal
//     an update again.
//     Creating it (read the Lease, read the Node for the owner reference,
//     create) resumes across attempts: what an attempt learnt before it
//     timed out is kept, so against a slow API server each request must fit
//     into an attempt, not all three.
//   - After an attempt the API server did not answer (timeout, lost or
//     refused connection), and after every failed attempt from the second
//     on, OnRepeatedFailure is called (the agent closes the heartbeat
//     transport's idle connections, so a dead TCP/HTTP/2 connection is
//     replaced instead of reused, and its other API connections, as kubelet
//     does).
//   - The Lease carries holderIdentity=<nodeName>, leaseDurationSeconds,
//     renewTime and an owner reference to the Node (added as soon as the Node
//     exists; the Lease is created without one if the Node is not there yet).
//   - Run renews every interval plus up to JitterFactor of it, measured from
//     the start of the previous renewal, so the cadence does not drift with
//     the API server's latency. SetLeaseDuration takes effect immediately:
//     it triggers a renewal that writes the new duration.
//   - The Lease is never deleted on shutdown: an agent that stops should look
//     like one that died, and the node lifecycle controller decides.
//
// All waiting goes through the injected clock; Sync and the helpers are safe
// to call from tests without Run.
package heartbeat

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
)

// Namespace holds the node Leases.
const Namespace = corev1.NamespaceNodeLease

// Defaults, as in kubelet.
const (
	DefaultLeaseDuration = 40 * time.Second
	// RenewIntervalFraction of the lease duration between renewals.
	RenewIntervalFraction = 0.25
	DefaultMaxAttempts    = 5
	DefaultJitterFactor   = 0.04
)

// LeaseClient is the part of the Lease API the controller uses
// (coordinationv1client.LeaseInterface satisfies it).
type LeaseClient interface {
	Get(ctx context.Context, name string, opts metav1.GetOptions) (*coordinationv1.Lease, error)
	Create(ctx context.Context, lease *coordinationv1.Lease, opts metav1.CreateOptions) (*coordinationv1.Lease, error)
	Update(ctx context.Context, lease *coordinationv1.Lease, opts metav1.UpdateOptions) (*coordinationv1.Lease, error)
	Patch(ctx context.Context, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions, subresources ...string) (*coordinationv1.Lease, error)
}

// NodeGetter reads the Node the Lease belongs to (for its UID).
type NodeGetter interface {
	Get(ctx context.Context, name string, opts metav1.GetOptions) (*corev1.Node, error)
}

// Clock is what the controller needs of a clock; k8s.io/utils/clock.RealClock
// and the fake clock of k8s.io/utils/clock/testing both satisfy it.
type Clock interface {
	clock.WithTicker
	AfterFunc(d time.Duration, f func()) clock.Timer
}

// Options configure a Controller.
type Options struct {
	NodeName      string
	Leases        LeaseClient // for Namespace
	Nodes         NodeGetter
	LeaseDuration time.Duration // DefaultLeaseDuration when zero
	MaxAttempts   int           // DefaultMaxAttempts when zero
	JitterFactor  float64       // DefaultJitterFactor when zero; negative disables jitter
	Clock         Clock         // clock.RealClock{} when nil
	Logger        *slog.Logger
	Metrics       *Metrics // may be nil
	// OnRepeatedFailure is called after a failed attempt the API server did
	// not answer (timeout, lost or refused connection) and after the second
	// and later failed attempts of a renewal. May be nil.
	OnRepeatedFailure func()
}

// Controller renews one node's Lease. Create it with New.
type Controller struct {
	nodeName    string
	leases      LeaseClient
	nodes       NodeGetter
	maxAttempts int
	jitter      float64
	clock       Clock
	log         *slog.Logger
	metrics     *Metrics
	onFailure   func()

	// latest is the Lease as last written or read; only Sync touches it.
	latest *coordinationv1.Lease
	// leaseMissing: the last read found no Lease, so the next attempt
	// creates it without reading again; nodeUID is the Node's UID once
	// read, for the owner reference. Together they let an attempt resume
	// the creation (read, read the Node, create) where a timed-out one
	// stopped: against a slow API server the three requests need not fit
	// into one attempt. Only Sync touches them.
	leaseMissing bool
	nodeUID      types.UID
	// patchNext: the last update failed in a way that leaves latest's
	// resourceVersion in doubt (a conflict, or no answer: the server may
	// have applied it), so the next attempt patches renewTime without a
	// resourceVersion instead of reading and updating again. Only Sync
	// touches it.
	patchNext bool

	mu            sync.Mutex
	leaseDuration time.Duration
	lastRenew     time.Time // last successful renewal (renewTime written)
	lastAttempt   time.Time // end of the last renewal, successful or not
	lastErr       error
	changed       chan struct{} // 1-buffered: a duration change wakes Run
	registered    chan struct{} // 1-buffered: the Node now exists (NodeRegistered)
}

// New validates o and returns a Controller.
func New(o Options) (*Controller, error) {
	if o.NodeName == "" || o.Leases == nil || o.Nodes == nil {
		return nil, errors.New("heartbeat: NodeName, Leases and Nodes are required")
	}
	if o.LeaseDuration == 0 {
		o.LeaseDuration = DefaultLeaseDuration
	}
	if o.LeaseDuration < time.Second {
		return nil, fmt.Errorf("heartbeat: lease duration %s is below 1s", o.LeaseDuration)
	}
	if o.MaxAttempts == 0 {
		o.MaxAttempts = DefaultMaxAttempts
	}
	if o.JitterFactor == 0 {
		o.JitterFactor = DefaultJitterFactor
	}
	if o.JitterFactor < 0 {
		o.JitterFactor = 0
	}
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	c := &Controller{
		nodeName: o.NodeName, leases: o.Leases, nodes: o.Nodes,
		maxAttempts: o.MaxAttempts, jitter: o.JitterFactor, clock: o.Clock,
		log: o.Logger.With("node", o.NodeName), metrics: o.Metrics, onFailure: o.OnRepeatedFailure,
		leaseDuration: o.LeaseDuration, changed: make(chan struct{}, 1), registered: make(chan struct{}, 1),
	}
	c.metrics.setDuration(o.LeaseDuration)
	return c, nil
}

// RenewInterval is the time between renewals for a lease duration.
func RenewInterval(leaseDuration time.Duration) time.Duration {
	return time.Duration(float64(leaseDuration) * RenewIntervalFraction)
}

// AttemptTimeout bounds one attempt: half the renew interval, so that a hung
// attempt leaves room for a second one on a fresh connection within the
// interval, and a slow API server (2s per response, or an agent starved of
// CPU) still gets its answer in. It never goes below 500ms.
func AttemptTimeout(renewInterval time.Duration) time.Duration {
	return max(renewInterval/2, 500*time.Millisecond)
}

// AttemptStart is the earliest start of attempt n (1-based) of a renewal
// that started at start: attempts are interval/maxAttempts apart.
func AttemptStart(start time.Time, interval time.Duration, maxAttempts, n int) time.Time {
	return start.Add(time.Duration(n-1) * (interval / time.Duration(maxAttempts)))
}

// SetLeaseDuration changes the lease duration (and so the renew interval)
// while running. The next renewal, which Run starts at once, writes it.
func (c *Controller) SetLeaseDuration(d time.Duration) {
	if d < time.Second {
		return
	}
	c.mu.Lock()
	old := c.leaseDuration
	c.leaseDuration = d
	c.mu.Unlock()
	if old == d {
		return
	}
	c.metrics.setDuration(d)
	c.log.Info("lease duration changed", "old", old, "new", d, "renewInterval", RenewInterval(d))
	c.RenewNow()
}

// RenewNow makes Run renew at once instead of at the end of the interval.
// It never blocks.
func (c *Controller) RenewNow() {
	select {
	case c.changed <- struct{}{}:
	default: // a wake-up is already pending
	}
}

// NodeRegistered tells Run that the Node exists now: a Lease created just
// before it gets its owner reference at once rather than a renew interval
// later. A Lease that already has its owner (the first renewal came after
// the registration) is not renewed again off its cadence. It never blocks.
func (c *Controller) NodeRegistered() {
	select {
	case c.registered <- struct{}{}:
	default: // a wake-up is already pending
	}
}

// LeaseDuration returns the current lease duration.
func (c *Controller) LeaseDuration() time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.leaseDuration
}

// Status is a snapshot for health checks and readiness.
type Status struct {
	LastRenew     time.Time // zero before the first success
	LastAttempt   time.Time // end of the last renewal, successful or not
	LastError     error     // of the last renewal; nil when it succeeded
	LeaseDuration time.Duration
}

// Status returns the controller's current state.
func (c *Controller) Status() Status {
	c.mu.Lock()
	defer c.mu.Unlock()
	return Status{LastRenew: c.lastRenew, LastAttempt: c.lastAttempt, LastError: c.lastErr, LeaseDuration: c.leaseDuration}
}

// RenewedWithin reports whether the last successful renewal is at most d old.
// Use it for readiness: the control plane sees the node alive.
func (s Status) RenewedWithin(now time.Time, d time.Duration) error {
	switch {
	case s.LastRenew.IsZero():
		if s.LastError != nil {
			return fmt.Errorf("lease not renewed yet: %w", s.LastError)
		}
		return errors.New("lease not renewed yet")
	case now.Sub(s.LastRenew) > d:
		return fmt.Errorf("lease last renewed %s ago (limit %s): %v", now.Sub(s.LastRenew).Round(time.Second), d, s.LastError)
	}
	return nil
}

// LoopAlive reports whether the renew loop finished a renewal attempt within
// d. It is the liveness check (systemd watchdog, /livez): a loop that keeps
// trying against an unreachable API server is alive, one that is wedged is not.
func (s Status) LoopAlive(now time.Time, d time.Duration) error {
	if s.LastAttempt.IsZero() || now.Sub(s.LastAttempt) <= d {
		return nil
	}
	return fmt.Errorf("lease renew loop has not completed a renewal for %s (limit %s)", now.Sub(s.LastAttempt).Round(time.Second), d)
}

// Live is the heartbeat's part of the agent's liveness check (/livez, the
// systemd watchdog) for a loop started at started: a renewal takes at most
// one interval and starts at most an interval (plus jitter) after the
// previous one, so a loop that has not finished an attempt for three
// intervals is wedged, and one that has not finished its first within two
// has never come up. An unreachable API server does not fail it.
func (s Status) Live(now, started time.Time) error {
	interval := RenewInterval(s.LeaseDuration)
	if err := s.LoopAlive(now, 3*interval+time.Second); err != nil {
		return err
	}
	if s.LastAttempt.IsZero() && now.Sub(started) > 2*interval+time.Second {
		return errors.New("lease renew loop has not completed its first renewal")
	}
	return nil
}

// Run renews until ctx is cancelled. The first renewal starts at once.
func (c *Controller) Run(ctx context.Context) {
	c.log.Info("starting lease heartbeat", "leaseDuration", c.LeaseDuration(), "renewInterval", RenewInterval(c.LeaseDuration()))
	for {
		start := c.clock.Now()
		if err := c.Sync(ctx); err != nil && ctx.Err() == nil {
			c.log.Error("lease renewal failed", "err", err)
		}
		wait := NextWait(start, c.clock.Now(), RenewInterval(c.LeaseDuration()), c.jitter*rand.Float64())
		t := c.clock.NewTimer(wait)
		if !c.waitNext(ctx, t) {
			return
		}
	}
}

// waitNext waits for the next renewal: the timer, a duration change, or a
// registration while the Lease lacks its owner. It returns false once ctx
// is done. Only Run's goroutine calls it (it reads latest, as Sync does).
func (c *Controller) waitNext(ctx context.Context, t clock.Timer) bool {
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return false
		case <-c.changed:
			return true
		case <-c.registered:
			if c.latest == nil || len(c.latest.OwnerReferences) == 0 {
				return true
			}
		case <-t.C():
			return true
		}
	}
}

// NextWait is how long Run sleeps after a renewal that started at start and
// ended at now: the renew interval stretched by jitterFraction (in [0, 1)),
// counted from start, and never negative.
func NextWait(start, now time.Time, interval time.Duration, jitterFraction float64) time.Duration {
	next := start.Add(interval + time.Duration(float64(interval)*jitterFraction))
	return max(next.Sub(now), 0)
}

// Sync performs one renewal (see the package doc). It returns the last
// attempt's error when every attempt failed.
func (c *Controller) Sync(ctx context.Context) error {
	start := c.clock.Now()
	duration := c.LeaseDuration()
	interval := RenewInterval(duration)
	deadline := start.Add(interval)
	perAttempt := AttemptTimeout(interval)
	var err error
	for attempt := 1; attempt <= c.maxAttempts; attempt++ {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		timeout := min(perAttempt, deadline.Sub(c.clock.Now()))
		if timeout <= 0 {
			break
		}
		t0 := c.clock.Now()
		err = c.attempt(ctx, timeout, duration)
		c.metrics.observeAttempt(err, c.clock.Since(t0))
		if err == nil {
			c.finish(nil)
			c.metrics.observeRenewal(c.clock.Since(start), c.clock.Now())
			if attempt > 1 {
				c.log.Info("lease renewed after retries", "attempts", attempt)
			}
			return nil
		}
		c.log.Warn("lease renewal attempt failed", "attempt", attempt, "maxAttempts", c.maxAttempts, "err", err)
		// An attempt the API server did not answer (a timeout, a lost or
		// refused connection) replaces the connections before the next
		// one; API errors do so from the second attempt on, except the
		// answers about the Lease itself (a conflict, NotFound,
		// AlreadyExists: the connection works, the next attempt re-reads).
		var status apierrors.APIStatus
		if (attempt >= 2 || !errors.As(err, &status)) && !leaseAnswer(err) && c.onFailure != nil {
			c.onFailure()
		}
		// The attempts are spread over the interval: a fast failure
		// (connection refused while the API server restarts) waits for
		// the next attempt's slot instead of using up every attempt at
		// once, so the renewal succeeds within one slot of the API
		// server's return rather than at the next interval.
		// An answer about the Lease is retried at once (re-read, re-create).
		next := AttemptStart(start, interval, c.maxAttempts, attempt+1)
		if leaseAnswer(err) {
			next = c.clock.Now().Add(time.Duration(attempt) * 100 * time.Millisecond)
		}
		if pause := min(next.Sub(c.clock.Now()), deadline.Sub(c.clock.Now())); pause > 0 && attempt < c.maxAttempts {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-c.clock.After(pause):
			}
		}
	}
	if err == nil {
		err = fmt.Errorf("renewal budget of %s exhausted", interval)
	}
	err = fmt.Errorf("renewing lease %s/%s: %w", Namespace, c.nodeName, err)
	c.finish(err)
	c.metrics.renewalFailed()
	return err
}

func (c *Controller) finish(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.clock.Now()
	c.lastAttempt = now
	c.lastErr = err
	if err == nil {
		c.lastRenew = now
	}
}

// attempt makes one renewal attempt bounded by timeout on the injected clock.
func (c *Controller) attempt(parent context.Context, timeout, duration time.Duration) error {
	ctx, cancel := context.WithCancelCause(parent)
	timer := c.clock.AfterFunc(timeout, func() { cancel(errAttemptTimeout) })
	defer func() {
		timer.Stop()
		cancel(nil)
	}()
	err := c.renew(ctx, duration)
	if err != nil && errors.Is(context.Cause(ctx), errAttemptTimeout) {
		return fmt.Errorf("%w after %s: %v", errAttemptTimeout, timeout, err)
	}
	return err
}

var errAttemptTimeout = errors.New("attempt timed out")

// renew writes renewTime=now (and the current duration) to the Lease,
// creating or re-reading it when the cache is empty.
func (c *Controller) renew(ctx context.Context, duration time.Duration) error {
	if c.latest == nil && !c.leaseMissing {
		lease, err := c.leases.Get(ctx, c.nodeName, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			c.leaseMissing = true
			// The garbage collector deletes the Lease of a deleted Node:
			// read the (new) Node's UID again.
			c.nodeUID = ""
		case err != nil:
			return fmt.Errorf("reading lease: %w", err)
		default:
			c.latest = lease
		}
	}
	if c.latest == nil {
		created, err := c.leases.Create(ctx, c.desired(ctx, nil, duration), metav1.CreateOptions{})
		if err != nil {
			if apierrors.IsAlreadyExists(err) {
				c.leaseMissing = false // an earlier, timed-out create made it: read it
			}
			return fmt.Errorf("creating lease: %w", err)
		}
		c.log.Info("created lease", "lease", Namespace+"/"+c.nodeName)
		c.leaseMissing = false
		c.latest = created
		return nil
	}
	if c.patchNext {
		return c.patch(ctx, duration)
	}
	updated, err := c.leases.Update(ctx, c.desired(ctx, c.latest, duration), metav1.UpdateOptions{})
	if err != nil {
		if apierrors.IsNotFound(err) {
			c.latest = nil // re-create on the next attempt
		} else if !isAPIRefusal(err) {
			c.patchNext = true
		}
		return fmt.Errorf("updating lease: %w", err)
	}
	c.latest = updated
	return nil
}

// patch renews with a merge patch of the Lease's spec (and the owner
// reference while it is missing), without a resourceVersion. Kubelet
// re-reads the Lease after a conflict and then updates it: against an
// overloaded API server a renewal whose update timed out but was applied
// then costs four requests (the update, a 409, a read, the update again)
// and keeps the server overloaded. The patch costs one, whatever happened
// to the update before it; the Node authorizer allows a node to patch its
// own Lease. Its answer carries the new resourceVersion, so the renewals
// after it are updates again, as kubelet's.
func (c *Controller) patch(ctx context.Context, duration time.Duration) error {
	want := c.desired(ctx, c.latest, duration)
	type meta struct {
		OwnerReferences []metav1.OwnerReference `json:"ownerReferences,omitempty"`
	}
	body := struct {
		Metadata *meta                    `json:"metadata,omitempty"`
		Spec     coordinationv1.LeaseSpec `json:"spec"`
	}{Spec: coordinationv1.LeaseSpec{
		HolderIdentity:       want.Spec.HolderIdentity,
		LeaseDurationSeconds: want.Spec.LeaseDurationSeconds,
		RenewTime:            want.Spec.RenewTime,
	}}
	if len(c.latest.OwnerReferences) == 0 && len(want.OwnerReferences) > 0 {
		body.Metadata = &meta{OwnerReferences: want.OwnerReferences}
	}
	data, err := json.Marshal(body)
	if err != nil {
		return fmt.Errorf("patching lease: %w", err)
	}
	patched, err := c.leases.Patch(ctx, c.nodeName, types.MergePatchType, data, metav1.PatchOptions{})
	if err != nil {
		if apierrors.IsNotFound(err) {
			c.latest, c.patchNext = nil, false // re-create on the next attempt
		}
		return fmt.Errorf("patching lease: %w", err)
	}
	c.latest, c.patchNext = patched, false
	return nil
}

// isAPIRefusal reports whether err is the API server's answer that it did
// not apply the request (too many requests, forbidden, invalid, ...): the
// Lease's resourceVersion is not in doubt. A conflict, a timeout and a lost
// connection leave it in doubt.
func isAPIRefusal(err error) bool {
	var status apierrors.APIStatus
	if !errors.As(err, &status) || apierrors.IsConflict(err) {
		return false
	}
	switch {
	case apierrors.IsTimeout(err), apierrors.IsServerTimeout(err), apierrors.IsInternalError(err):
		return false // may have been applied
	}
	return true
}

// desired returns the Lease to write: base (nil to create) with this node as
// holder, the duration, renewTime=now and, when missing, the owner reference.
func (c *Controller) desired(ctx context.Context, base *coordinationv1.Lease, duration time.Duration) *coordinationv1.Lease {
	var l *coordinationv1.Lease
	if base == nil {
		l = &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: c.nodeName, Namespace: Namespace}}
	} else {
		l = base.DeepCopy()
	}
	l.Spec.HolderIdentity = ptr.To(c.nodeName)
	l.Spec.LeaseDurationSeconds = ptr.To(int32(duration / time.Second))
	if len(l.OwnerReferences) == 0 {
		// Best effort: the Node may not be registered yet; the next renewal
		// tries again. Its cost is one GET per renewal until it succeeds.
		if c.nodeUID == "" {
			c.lookUpNodeUID(ctx, AttemptTimeout(RenewInterval(duration))/ownerLookupShare)
		}
		if c.nodeUID != "" {
			l.OwnerReferences = []metav1.OwnerReference{{
				APIVersion: corev1.SchemeGroupVersion.String(),
				Kind:       "Node",
				Name:       c.nodeName,
				UID:        c.nodeUID,
			}}
		}
	}
	l.Spec.RenewTime = &metav1.MicroTime{Time: c.clock.Now()} // after the owner lookup's wait
	return l
}

// ownerLookupShare: the owner reference's Node read gets at most this
// fraction of an attempt (1 s of 5 s by default).
const ownerLookupShare = 5

// lookUpNodeUID reads the Node's UID for the owner reference within
// budget on the injected clock. The reference is best effort (it lets the
// garbage collector delete a deleted Node's Lease) and the renewal is not:
// against an overloaded API server (a fleet of 1,000 nodes on 2 cores)
// an unbounded read spent whole attempts, so renewals failed for the sake
// of a field a later renewal can add.
func (c *Controller) lookUpNodeUID(parent context.Context, budget time.Duration) {
	ctx, cancel := context.WithCancel(parent)
	timer := c.clock.AfterFunc(budget, cancel)
	defer func() {
		timer.Stop()
		cancel()
	}()
	node, err := c.nodes.Get(ctx, c.nodeName, metav1.GetOptions{})
	switch {
	case err == nil:
		c.nodeUID = node.UID
	case apierrors.IsNotFound(err):
	case parent.Err() == nil && ctx.Err() != nil:
		c.log.Warn("cannot read node for the lease owner reference in time; renewing without it", "budget", budget)
	default:
		c.log.Warn("cannot read node for the lease owner reference", "err", err)
	}
}

// leaseAnswer reports whether err is the API server's answer about the
// Lease itself (a conflict, NotFound, AlreadyExists after a create whose
// answer was lost): the next attempt re-reads or re-creates it at once, on
// the same connections.
func leaseAnswer(err error) bool {
	return apierrors.IsConflict(err) || apierrors.IsNotFound(err) || apierrors.IsAlreadyExists(err)
}
