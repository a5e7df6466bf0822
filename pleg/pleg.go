package pleg

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"sync"
	"time"

	"github.com/nodeagent/nodeagent/runtime"
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/clock"
)

// Defaults of Options.
const (
	DefaultRelistPeriod         = 5 * time.Minute
	DefaultFallbackRelistPeriod = time.Second
	DefaultHealthThreshold      = 3 * time.Minute
	DefaultInspectTimeout       = 10 * time.Second
	DefaultRelistTimeout        = 30 * time.Second
	DefaultEventBuffer          = 1000
	DefaultStreamBuffer         = 256

	// maxConcurrentInspections bounds the targeted inspections in flight;
	// each has its own timeout, so a hung one holds a slot for at most
	// InspectTimeout.
	maxConcurrentInspections = 16
	// recheckDelay/rechecks: after cgroup.events says "populated 0"
	// containerd may still report the task as running for a moment, and a
	// container whose cgroup just appeared is still being started. See
	// recheckAfter: about 2.3s of waiting in all.
	recheckDelay = 5 * time.Millisecond
	rechecks     = 18
	// maxInspectFailures: a container whose inspection failed this many
	// times in a row is left to the next relist.
	maxInspectFailures = 5
)

// Options configure the PLEG. Zero values take the defaults.
type Options struct {
	// RelistPeriod is the safety-net relist period while all event sources
	// work (default 5m).
	RelistPeriod time.Duration
	// FallbackRelistPeriod is the relist period when relisting is the
	// detector: no event sources configured (kubelet's baseline) or one of
	// them failed (default 1s).
	FallbackRelistPeriod time.Duration
	// HealthThreshold: Healthy() turns false once relisting has been stuck
	// or failing this long (default 3m).
	HealthThreshold time.Duration
	// Sources are the upstream event sources; empty means relist-only.
	Sources []Source
	// InspectTimeout bounds one targeted inspection (default 10s);
	// RelistTimeout one relist's listing (default 30s).
	InspectTimeout time.Duration
	RelistTimeout  time.Duration
	// EventBuffer is the capacity of the Watch channel (default 1000).
	EventBuffer int
	// CgroupRoot is the cgroup v2 (unified) mount point; default: found in
	// /proc/self/mountinfo (/sys/fs/cgroup on pure v2, /sys/fs/cgroup/unified
	// on hybrid hosts).
	CgroupRoot string
	// CgroupParents are the cgroupfs paths under which pod cgroups are
	// created (default runtime.DefaultCgroupParent). The cgroup source
	// watches them, even before they exist, so that containers of new pods
	// are seen when their directories appear; containers elsewhere are
	// watched once observed running.
	CgroupParents []string
	// Clock, Logger and Registerer default to the real clock, slog.Default()
	// and no metrics registration.
	Clock      clock.WithTicker
	Logger     *slog.Logger
	Registerer prometheus.Registerer

	// newInotify creates the cgroup source's inotify instance (tests
	// inject failing ones); default fsnotify.
	newInotify func() (inotify, error)
}

// Validate reports every invalid option.
func (o Options) Validate() error {
	var errs []error
	for name, d := range map[string]time.Duration{"relistPeriod": o.RelistPeriod, "fallbackRelistPeriod": o.FallbackRelistPeriod,
		"healthThreshold": o.HealthThreshold, "inspectTimeout": o.InspectTimeout, "relistTimeout": o.RelistTimeout} {
		if d < 0 {
			errs = append(errs, fmt.Errorf("%s: must not be negative, got %s", name, d))
		}
	}
	if o.EventBuffer < 0 {
		errs = append(errs, fmt.Errorf("eventBuffer: must not be negative, got %d", o.EventBuffer))
	}
	seen := map[Source]bool{}
	for i, s := range o.Sources {
		if _, err := ParseSource(string(s)); err != nil {
			errs = append(errs, fmt.Errorf("sources[%d]: %w", i, err))
		} else if seen[s] {
			errs = append(errs, fmt.Errorf("sources[%d]: %q listed twice", i, s))
		}
		seen[s] = true
	}
	return errors.Join(errs...)
}

func (o *Options) setDefaults() {
	def := func(d *time.Duration, v time.Duration) {
		if *d == 0 {
			*d = v
		}
	}
	def(&o.RelistPeriod, DefaultRelistPeriod)
	def(&o.FallbackRelistPeriod, DefaultFallbackRelistPeriod)
	def(&o.HealthThreshold, DefaultHealthThreshold)
	def(&o.InspectTimeout, DefaultInspectTimeout)
	def(&o.RelistTimeout, DefaultRelistTimeout)
	if o.EventBuffer == 0 {
		o.EventBuffer = DefaultEventBuffer
	}
	if o.CgroupParents == nil {
		o.CgroupParents = []string{runtime.DefaultCgroupParent}
	}
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.newInotify == nil {
		o.newInotify = newFsnotify
	}
}

// PLEG is the pod lifecycle event generator. See the package documentation
// for its contract. Its methods are safe for concurrent use; Run must be
// called once.
type PLEG struct {
	opts  Options
	rt    Runtime
	clock clock.WithTicker
	log   *slog.Logger
	m     *metrics
	cache *Cache
	out   chan Event
	bc    *broadcaster
	cg    *cgroupWatcher // nil unless the cgroup source is enabled

	sem       chan struct{}
	wake      chan struct{} // 1-buffered: timers must be recomputed
	relistReq chan struct{} // 1-buffered: relist soon (coalesced)

	// inspections counts the inspection goroutines; Run waits for them.
	inspections sync.WaitGroup

	// mu guards the fields below. It is never held during I/O (runtime
	// calls, file reads, inotify, logging): collect under it, act outside.
	mu   sync.Mutex
	logs []logLine // written by unlock
	// reinspect are containers whose expected event expired: unlock has
	// them inspected again (with runCtx, Run's context) once mu is free.
	reinspect          []string
	runCtx             context.Context
	stopped            bool // Run has ended: no new inspections
	records            map[string]*record
	exp                *expectations
	expDone            chan struct{} // closed and replaced when expectations are met or expire
	sourceOK           map[Source]bool
	inFallback         bool
	inflight           map[string]*inspection
	created            time.Time
	lastRelistStart    time.Time
	lastRelistOK       time.Time
	relistRunningSince time.Time
	relistFailingSince time.Time
}

type record struct {
	c          runtime.Container
	observedAt time.Time
}

type inspection struct {
	source      Source
	triggeredAt time.Time
	dirty       bool // triggered again while in flight
	// want: the signal implies this state (exited: cgroup emptied or task
	// exit; running: a container's cgroup appeared), which the runtime may
	// report a moment later; recheck while it reports the previous state.
	want     runtime.State
	rechecks int
	failures int
	backoff  wait.Backoff  // before retrying a failed inspection
	wake     chan struct{} // 1-buffered: cut a recheck/backoff wait short
}

// newInspectBackoff is the wait before retrying a failed inspection: 1s,
// doubling (capped at 30s, never reached: it is given up after
// maxInspectFailures), no jitter; it starts over after a success.
func newInspectBackoff() wait.Backoff {
	return wait.Backoff{Duration: time.Second, Factor: 2, Jitter: 0, Steps: math.MaxInt32, Cap: 30 * time.Second}
}

// logLine is a log record queued while p.mu is held.
type logLine struct {
	level slog.Level
	msg   string
	args  []any
}

// logLocked queues a log record; unlock writes it.
func (p *PLEG) logLocked(level slog.Level, msg string, args ...any) {
	p.logs = append(p.logs, logLine{level, msg, args})
}

// unlock releases p.mu, then writes the log records queued meanwhile.
func (p *PLEG) unlock() {
	logs, ids, ctx := p.logs, p.reinspect, p.runCtx
	p.logs, p.reinspect = nil, nil
	p.mu.Unlock()
	for _, l := range logs {
		p.log.Log(context.Background(), l.level, l.msg, l.args...)
	}
	if ctx != nil {
		for _, id := range ids {
			p.trigger(ctx, id, SourceRelist, p.clock.Now(), "")
		}
	}
}

// New creates a PLEG over rt. Nothing runs until Run.
func New(rt Runtime, opts Options) (*PLEG, error) {
	if err := opts.Validate(); err != nil {
		return nil, fmt.Errorf("pleg: invalid options: %w", err)
	}
	opts.setDefaults()
	p := &PLEG{
		opts:      opts,
		rt:        rt,
		clock:     opts.Clock,
		log:       opts.Logger,
		m:         newMetrics(opts.Registerer),
		cache:     newCache(),
		out:       make(chan Event, opts.EventBuffer),
		sem:       make(chan struct{}, maxConcurrentInspections),
		wake:      make(chan struct{}, 1),
		relistReq: make(chan struct{}, 1),
		records:   map[string]*record{},
		exp:       newExpectations(),
		expDone:   make(chan struct{}),
		sourceOK:  map[Source]bool{},
		inflight:  map[string]*inspection{},
		created:   opts.Clock.Now(),
	}
	p.bc = newBroadcaster(p.m)
	p.cache.live, p.cache.clock = p.liveAsOf, p.clock
	for _, s := range opts.Sources {
		p.sourceOK[s] = true
		p.m.sourceHealthy.WithLabelValues(string(s)).Set(1)
	}
	return p, nil
}

// Cache returns the pod status cache the PLEG maintains.
func (p *PLEG) Cache() *Cache { return p.cache }

// Watch returns the channel of pod lifecycle events for the pod workers
// (one consumer). Events matching expectations are filtered out and events
// held behind expectations are delivered late, as the package doc says. The
// channel is bounded (Options.EventBuffer); when it is full, new events are
// dropped and counted (nodeagent_pleg_discarded_events_total{consumer="watch"}).
func (p *PLEG) Watch() <-chan Event { return p.out }

// Expect records an event the caller's own action will cause, so that it is
// not delivered as news and so that the pod's other events are held until
// it is seen or expires. Record it before acting.
func (p *PLEG) Expect(e Expectation) {
	p.mu.Lock()
	p.exp.add(e)
	p.mu.Unlock()
	poke(p.wake)
}

// ExpectWithin is Expect with a deadline ttl from now.
func (p *PLEG) ExpectWithin(uid types.UID, containerID string, t EventType, ttl time.Duration) {
	p.Expect(Expectation{PodUID: uid, ContainerID: containerID, Type: t, Deadline: p.clock.Now().Add(ttl)})
}

// WaitExpected blocks until the pod has no pending expectations (every one
// met or expired) and returns nil, or returns ctx's error. A met
// expectation's observation is in the cache before WaitExpected returns, so
// a worker that waits for its own actions' events and then reads the cache
// sees their effect.
func (p *PLEG) WaitExpected(ctx context.Context, uid types.UID) error {
	for {
		p.mu.Lock()
		pending := p.exp.pendingFor(uid)
		ch := p.expDone
		p.mu.Unlock()
		if !pending {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// poke signals a 1-buffered channel without blocking; signals coalesce.
func poke(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// Run starts the event sources and relists until ctx is cancelled. It
// returns only after every goroutine it started (event sources, targeted
// inspections) has ended, so the runtime may be closed once it returned.
// Runtime calls get deadlines derived from ctx.
func (p *PLEG) Run(ctx context.Context) {
	p.mu.Lock()
	p.runCtx = ctx
	p.mu.Unlock()
	var sources sync.WaitGroup
	defer func() {
		sources.Wait() // no more signals, hence no new inspections
		p.mu.Lock()
		p.stopped = true
		p.mu.Unlock()
		p.inspections.Wait()
	}()
	for _, s := range p.opts.Sources {
		switch s {
		case SourceContainerd:
			sources.Go(func() { p.followRuntime(ctx) })
		case SourceCgroups:
			cg, err := newCgroupWatcherWith(p.opts.CgroupRoot, p.opts.CgroupParents, p.log, func(e cgroupEvent) { p.cgroupSignal(ctx, e) }, p.clock, p.opts.newInotify)
			if err != nil {
				p.setSource(SourceCgroups, false, err)
				continue
			}
			p.mu.Lock()
			p.cg = cg
			p.mu.Unlock()
			sources.Go(func() { cg.run(ctx) })
		}
	}
	if err := p.Relist(ctx); err != nil {
		p.log.Error("relist failed", "err", err)
	}
	for {
		now := p.clock.Now()
		next := p.nextWakeup(now)
		timer := p.clock.NewTimer(next.Sub(now))
		select {
		case <-ctx.Done():
			timer.Stop()
			return
		case <-p.wake:
		case <-p.relistReq:
			timer.Stop()
			if err := p.Relist(ctx); err != nil {
				p.log.Error("relist failed", "err", err)
			}
			continue
		case <-timer.C():
		}
		timer.Stop()
		p.tick(ctx)
	}
}

// periodLocked is the current relist period: the fallback period when
// relisting is the detector or the last relist failed (retry soon).
func (p *PLEG) periodLocked() time.Duration {
	if len(p.opts.Sources) == 0 || p.inFallback || !p.relistFailingSince.IsZero() {
		return p.opts.FallbackRelistPeriod
	}
	return p.opts.RelistPeriod
}

func (p *PLEG) nextWakeup(now time.Time) time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	next := p.lastRelistStart.Add(p.periodLocked())
	if d, ok := p.exp.nextDeadline(); ok && d.Before(next) {
		next = d
	}
	if next.Before(now) {
		next = now
	}
	return next
}

func (p *PLEG) eventModeLocked() bool { return len(p.opts.Sources) > 0 && !p.inFallback }

// liveAsOf tells the cache that every pod's status is current now: true in
// event mode while no inspection is pending or in flight, since every change
// then arrives as a signal. The cache asks lazily, so an idle event-driven
// PLEG needs no periodic work to keep GetNewerThan answering.
func (p *PLEG) liveAsOf() (time.Time, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.eventModeLocked() || len(p.inflight) > 0 || p.lastRelistOK.IsZero() {
		return time.Time{}, false
	}
	return p.clock.Now(), true
}

// tick does whatever is due at now: expire expectations, relist.
func (p *PLEG) tick(ctx context.Context) {
	now := p.clock.Now()
	p.mu.Lock()
	deliver, expired := p.exp.expire(now)
	p.deliverLocked(deliver, expired, nil, now)
	due := !now.Before(p.lastRelistStart.Add(p.periodLocked()))
	p.unlock()
	if due {
		if err := p.Relist(ctx); err != nil {
			p.log.Error("relist failed", "err", err)
		}
	}
}

// Relist lists all containers, generates events for every difference from
// the last observed state and refreshes the whole cache. Tests and the Run
// loop call it; concurrent calls are safe.
func (p *PLEG) Relist(ctx context.Context) error {
	start := p.clock.Now()
	p.mu.Lock()
	if !p.lastRelistStart.IsZero() {
		p.m.relistInterval.Observe(start.Sub(p.lastRelistStart).Seconds())
	}
	p.lastRelistStart = start
	p.relistRunningSince = start
	p.mu.Unlock()

	lctx, cancel := context.WithTimeout(ctx, p.opts.RelistTimeout)
	cs, err := p.rt.ListContainers(lctx)
	cancel()

	p.mu.Lock()
	defer p.unlock()
	p.relistRunningSince = time.Time{}
	if err != nil {
		p.m.relistFailures.Inc()
		if p.relistFailingSince.IsZero() {
			p.relistFailingSince = start
		}
		return fmt.Errorf("pleg: relist: %w", err)
	}
	seen := make(map[string]bool, len(cs))
	for _, c := range cs {
		seen[c.ID] = true
		if c.Undetermined {
			// The runtime could not tell its state (a busy shim): not a
			// change. What was observed last stands (a container never
			// observed is recorded as the runtime says, unknown), and
			// the container is inspected on its own, with retries.
			p.reinspect = append(p.reinspect, c.ID)
			if p.records[c.ID] != nil {
				continue
			}
		}
		p.applyLocked(c, true, start, SourceRelist, start, false)
	}
	for id, rec := range p.records {
		if !seen[id] && !rec.observedAt.After(start) {
			p.applyLocked(rec.c, false, start, SourceRelist, start, false)
		}
	}
	pods := map[types.UID]PodStatus{}
	for _, rec := range p.records {
		s := pods[rec.c.Pod.UID]
		s.Pod = rec.c.Pod
		s.Containers = append(s.Containers, rec.c)
		pods[rec.c.Pod.UID] = s
	}
	p.cache.setAll(pods, start)
	end := p.clock.Now()
	p.relistFailingSince = time.Time{}
	p.lastRelistOK = end
	p.m.relistDuration.Observe(end.Sub(start).Seconds())
	return nil
}

// transition generates kubelet generic PLEG events for a state change; ""
// means the container does not exist.
func transition(old, new runtime.State) []EventType {
	if old == new {
		return nil
	}
	switch new {
	case runtime.StateRunning:
		return []EventType{ContainerStarted}
	case runtime.StateExited:
		return []EventType{ContainerDied}
	case "":
		if old == runtime.StateExited {
			return []EventType{ContainerRemoved}
		}
		return []EventType{ContainerDied, ContainerRemoved}
	default: // created, unknown
		return []EventType{ContainerChanged}
	}
}

// applyLocked records an observation of c made at observedAt (exists false:
// the container was not found) and emits the events of the change. It
// reports whether the observation was applied (not stale).
func (p *PLEG) applyLocked(c runtime.Container, exists bool, observedAt time.Time, src Source, triggeredAt time.Time, updateCache bool) bool {
	rec := p.records[c.ID]
	if rec != nil && rec.observedAt.After(observedAt) {
		return false // a newer observation was applied already
	}
	var old, new runtime.State
	if rec != nil {
		old = rec.c.State
	}
	if exists {
		new = c.State
		p.records[c.ID] = &record{c: c, observedAt: observedAt}
	} else {
		if rec == nil {
			return true // never ours, or already gone
		}
		c = rec.c
		delete(p.records, c.ID)
	}
	if p.cg != nil {
		p.cg.track(c, exists && c.State == runtime.StateRunning) // no I/O
	}
	// The cache first: whoever learns of an event (or of a met
	// expectation, WaitExpected) finds it in the cache.
	if updateCache {
		s := PodStatus{Pod: c.Pod, Timestamp: observedAt}
		for _, r := range p.records {
			if r.c.Pod.UID == c.Pod.UID {
				s.Containers = append(s.Containers, r.c)
			}
		}
		p.cache.set(s)
	}
	now := p.clock.Now()
	kinds := transition(old, new)
	if len(kinds) == 0 && rec != nil && exists && new == runtime.StateExited && rec.c.Reason != c.Reason {
		// The same exit, told better: containerd's TaskOOM may come after
		// the TaskExit, and only then does the reason become OOMKilled.
		// The pod's worker must see it, or its status keeps "Error".
		kinds = []EventType{ContainerChanged}
	}
	for _, t := range kinds {
		ev := Event{
			Time:        now,
			PodUID:      c.Pod.UID,
			Pod:         c.Pod.Namespace + "/" + c.Pod.Name,
			ContainerID: c.ID,
			Container:   c.Name,
			Type:        t,
			Source:      src,
			triggeredAt: triggeredAt,
		}
		if t == ContainerDied && c.State == runtime.StateExited {
			code := c.ExitCode
			ev.ExitCode = &code
		}
		p.emitLocked(ev, now)
	}
	return true
}

func (p *PLEG) emitLocked(ev Event, now time.Time) {
	p.m.events.WithLabelValues(string(ev.Type), string(ev.Source)).Inc()
	if p.log.Enabled(context.Background(), slog.LevelDebug) {
		// The latency trace (-v=4): every event, expected or not, with
		// the time since its upstream signal (zero: a relist's).
		var since time.Duration
		if !ev.triggeredAt.IsZero() {
			since = now.Sub(ev.triggeredAt)
		}
		p.logLocked(slog.LevelDebug, "pod lifecycle event", "podUID", ev.PodUID, "type", ev.Type, "source", ev.Source, "sinceSignal", since)
	}
	p.bc.publish(ev)
	deliver, met, expired := p.exp.observe(ev, now)
	p.deliverLocked(deliver, expired, met, now)
}

func (p *PLEG) deliverLocked(deliver []Event, expired, met []Expectation, now time.Time) {
	for _, e := range expired {
		p.m.expectations.WithLabelValues("expired").Inc()
		p.logLocked(slog.LevelInfo, "expected pod lifecycle event did not come in time", "podUID", e.PodUID, "containerID", e.ContainerID, "type", e.Type)
		// This PLEG's view of the container may be stale (a signal lost,
		// or overtaken by an older inspection): look at it again rather
		// than wait for the next relist. The worker stopped waiting at the
		// expiry; what the inspection finds reaches it as an event.
		p.reinspect = append(p.reinspect, e.ContainerID)
	}
	if len(met) > 0 {
		p.m.expectations.WithLabelValues("met").Add(float64(len(met)))
	}
	if len(met)+len(expired) > 0 {
		close(p.expDone)
		p.expDone = make(chan struct{})
	}
	for _, ev := range deliver {
		select {
		case p.out <- ev:
			if !ev.triggeredAt.IsZero() {
				p.m.deliveryLatency.Observe(now.Sub(ev.triggeredAt).Seconds())
			}
			if p.log.Enabled(context.Background(), slog.LevelDebug) {
				// The latency trace (-v=4): from the upstream signal to
				// the event in the pod workers' channel.
				p.logLocked(slog.LevelDebug, "pod lifecycle event delivered", "podUID", ev.PodUID, "type", ev.Type,
					"source", ev.Source, "sinceSignal", now.Sub(ev.triggeredAt), "sinceDetected", now.Sub(ev.Time))
			}
		default:
			p.m.discarded.WithLabelValues("watch").Inc()
		}
	}
}

// trigger schedules a targeted inspection of one container, bounded by ctx.
// At most one inspection per container is in flight; triggers arriving
// meanwhile are coalesced into one more inspection after it, so
// per-container ordering holds and duplicates from several sources cost one
// inspection.
func (p *PLEG) trigger(ctx context.Context, id string, src Source, at time.Time, want runtime.State) {
	p.mu.Lock()
	if p.stopped {
		p.mu.Unlock()
		return
	}
	if in := p.inflight[id]; in != nil {
		in.dirty = true
		if want != "" {
			in.want, in.rechecks = want, 0
		}
		p.mu.Unlock()
		poke(in.wake)
		return
	}
	p.inflight[id] = &inspection{source: src, triggeredAt: at, want: want, backoff: newInspectBackoff(), wake: make(chan struct{}, 1)}
	p.inspections.Add(1)
	p.mu.Unlock()
	go func() {
		defer p.inspections.Done()
		p.inspect(ctx, id)
	}()
}

// inspect inspects one container until its state is settled, retrying
// failures with back-off, or until ctx is done.
func (p *PLEG) inspect(ctx context.Context, id string) {
	for {
		select {
		case p.sem <- struct{}{}:
		case <-ctx.Done():
			p.endInspection(id)
			return
		}
		p.mu.Lock()
		in := p.inflight[id]
		in.dirty = false
		p.mu.Unlock()

		start := p.clock.Now()
		ictx, cancel := context.WithTimeout(ctx, p.opts.InspectTimeout)
		c, err := p.rt.InspectContainer(ictx, id)
		cancel()
		<-p.sem
		p.m.inspectDuration.Observe(p.clock.Since(start).Seconds())
		if ctx.Err() != nil {
			p.endInspection(id)
			return
		}

		var retryAfter time.Duration
		p.mu.Lock()
		switch {
		case err == nil:
			p.m.inspections.WithLabelValues("ok").Inc()
			in.failures, in.backoff = 0, newInspectBackoff()
			p.applyLocked(c, true, start, in.source, in.triggeredAt, true)
			if in.want != "" && c.State != in.want && c.State == previous(in.want) && in.rechecks < rechecks {
				retryAfter = recheckAfter(in.rechecks)
				in.rechecks++
			} else {
				in.want, in.rechecks = "", 0
			}
		case errors.Is(err, runtime.ErrNotFound):
			p.m.inspections.WithLabelValues("notfound").Inc()
			in.failures, in.backoff = 0, newInspectBackoff()
			if rec := p.records[id]; rec != nil {
				p.applyLocked(rec.c, false, start, in.source, in.triggeredAt, true)
			}
		default:
			// Retried on its own with backoff; other containers are not
			// affected, and the next relist covers it too.
			p.m.inspections.WithLabelValues("error").Inc()
			in.failures++
			if in.failures > maxInspectFailures {
				p.logLocked(slog.LevelWarn, "container inspection keeps failing, leaving it to the next relist", "containerID", id, "err", err)
				p.endInspectionLocked(id)
				p.unlock()
				return
			}
			retryAfter = in.backoff.Step()
			p.logLocked(slog.LevelWarn, "container inspection failed", "containerID", id, "err", err, "retryIn", retryAfter)
		}
		if retryAfter > 0 && !in.dirty {
			p.unlock()
			timer := p.clock.NewTimer(retryAfter)
			select {
			case <-timer.C():
			case <-in.wake: // a new signal: inspect now
			case <-ctx.Done():
				timer.Stop()
				p.endInspection(id)
				return
			}
			timer.Stop()
			continue
		}
		if in.dirty {
			p.unlock()
			continue
		}
		p.endInspectionLocked(id)
		p.unlock()
		return
	}
}

func (p *PLEG) endInspection(id string) {
	p.mu.Lock()
	p.endInspectionLocked(id)
	p.mu.Unlock()
}

func (p *PLEG) endInspectionLocked(id string) {
	delete(p.inflight, id)
	if len(p.inflight) == 0 {
		p.cache.notify() // the cache may be live again
	}
}

// recheckAfter is the delay before recheck n (from 0): 5ms for the first
// ten (the runtime usually catches up within a few ms), then doubling up to 1s.
func recheckAfter(n int) time.Duration {
	if n < 10 {
		return recheckDelay
	}
	return min(recheckDelay<<(n-9), time.Second)
}

// previous is the state a container is in just before want.
func previous(want runtime.State) runtime.State {
	switch want {
	case runtime.StateRunning:
		return runtime.StateCreated
	case runtime.StateExited:
		return runtime.StateRunning
	}
	return ""
}

// cgroupSignal is called by the cgroup watcher; ctx is Run's.
func (p *PLEG) cgroupSignal(ctx context.Context, s cgroupEvent) {
	switch {
	case s.overflow:
		p.requestRelist()
	case s.failed != nil:
		p.setSource(SourceCgroups, false, s.failed)
	case s.recovered:
		p.setSource(SourceCgroups, true, nil)
		p.requestRelist() // covers what went unwatched
	default:
		var want runtime.State
		switch {
		case s.exited:
			want = runtime.StateExited
		case s.created:
			want = runtime.StateRunning
		}
		p.trigger(ctx, s.containerID, SourceCgroups, p.clock.Now(), want)
	}
}

func (p *PLEG) requestRelist() { poke(p.relistReq) }

// followRuntime turns runtime events into targeted inspections.
func (p *PLEG) followRuntime(ctx context.Context) {
	for ev := range p.rt.Subscribe(ctx) {
		switch ev.Type {
		case runtime.EventStreamUp:
			p.setSource(SourceContainerd, true, nil)
			p.requestRelist() // covers whatever happened before the stream was up
		case runtime.EventStreamDown:
			p.setSource(SourceContainerd, false, ev.Err)
		default:
			if ev.ContainerID != "" {
				var want runtime.State
				if ev.Type == runtime.EventTaskExit {
					want = runtime.StateExited
					p.exitFromEvent(ev)
				}
				// Inspected all the same: the runtime's record of the exit
				// (labels, a reason the event left open, a late TaskOOM).
				p.trigger(ctx, ev.ContainerID, SourceContainerd, p.clock.Now(), want)
			}
		}
	}
}

// exitFromEvent applies a TaskExit to a container this PLEG knows as
// running, without asking the runtime: the event has the exit status, the
// exit time and (unless an inspection must decide it) the reason, the rest
// is the container as last observed. The event goes through applyLocked as
// an inspection's would (cache first, expectations, stale observations
// discarded: an inspection or relist that started before now and reports
// the container running is older than this). Anything else (a container
// not known yet, or not running, an undecided reason) waits for the
// inspection the caller triggers.
func (p *PLEG) exitFromEvent(ev runtime.Event) {
	if ev.Reason == "" || ev.ExitedAt.IsZero() {
		return
	}
	p.mu.Lock()
	defer p.unlock()
	rec := p.records[ev.ContainerID]
	if p.stopped || rec == nil || rec.c.State != runtime.StateRunning {
		return
	}
	now := p.clock.Now()
	if rec.observedAt.After(now) {
		return
	}
	c := rec.c
	c.State, c.Pid = runtime.StateExited, 0
	c.ExitCode, c.FinishedAt, c.Reason = int32(ev.ExitCode), ev.ExitedAt, ev.Reason
	if runtime.OOMKillRecorded(c) {
		c.Reason = runtime.ReasonOOMKilled // its TaskOOM was seen before this stream was
	}
	triggeredAt := now
	if in := p.inflight[ev.ContainerID]; in != nil {
		// The trace's signal is the first one (the cgroup emptied).
		triggeredAt = in.triggeredAt
	}
	p.applyLocked(c, true, now, SourceContainerd, triggeredAt, true)
}

// setSource records a source's health and switches between event mode and
// fallback relisting.
func (p *PLEG) setSource(src Source, ok bool, cause error) {
	p.mu.Lock()
	defer p.unlock()
	if p.sourceOK[src] == ok {
		return
	}
	p.sourceOK[src] = ok
	v := 0.0
	if ok {
		v = 1
	}
	p.m.sourceHealthy.WithLabelValues(string(src)).Set(v)
	fallback := false
	for _, good := range p.sourceOK {
		fallback = fallback || !good
	}
	switch {
	case fallback && !p.inFallback:
		p.inFallback = true
		p.m.fallbacks.WithLabelValues(string(src)).Inc()
		p.m.fallbackActive.Set(1)
		p.logLocked(slog.LevelWarn, "PLEG event source failed, falling back to relisting", "source", src, "err", cause, "period", p.opts.FallbackRelistPeriod)
	case fallback:
		if !ok {
			p.m.fallbacks.WithLabelValues(string(src)).Inc()
			p.logLocked(slog.LevelWarn, "PLEG event source failed", "source", src, "err", cause)
		}
	case !fallback && p.inFallback:
		p.inFallback = false
		p.m.fallbackActive.Set(0)
		p.logLocked(slog.LevelInfo, "PLEG event sources recovered, back to event mode", "source", src, "relistPeriod", p.opts.RelistPeriod)
		p.cache.notify()
	}
	poke(p.wake)
}

// Healthy reports whether the PLEG works: false only when relisting has been
// hung or failing for longer than the health threshold (or has never
// succeeded that long after start). Slow or failing inspections of single
// containers do not make it unhealthy: they are retried on their own.
func (p *PLEG) Healthy() (bool, error) {
	now := p.clock.Now()
	th := p.opts.HealthThreshold
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case !p.relistRunningSince.IsZero() && now.Sub(p.relistRunningSince) > th:
		return false, fmt.Errorf("pleg: relist running for %s (threshold %s)", now.Sub(p.relistRunningSince), th)
	case !p.relistFailingSince.IsZero() && now.Sub(p.relistFailingSince) > th:
		return false, fmt.Errorf("pleg: relist failing for %s (threshold %s)", now.Sub(p.relistFailingSince), th)
	case p.lastRelistOK.IsZero() && now.Sub(p.created) > th:
		return false, fmt.Errorf("pleg: no successful relist in %s since start", now.Sub(p.created))
	}
	return true, nil
}

// EventMode reports whether the PLEG currently relies on event sources (true)
// or on fast relisting (false: relist-only, or a source failed).
func (p *PLEG) EventMode() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.eventModeLocked()
}
