package nodestatus

import (
	"context"
	"fmt"
	"sync"
	"time"

	"k8s.io/utils/clock"
)

// probe calls a runtime function with a timeout, keeps at most one call in
// flight and remembers the last good answer, so one slow or failed call does
// not change what the node reports.
type probe[T any] struct {
	name    string
	clock   clock.Clock
	timeout time.Duration
	fn      func(ctx context.Context) (T, error)

	mu        sync.Mutex
	running   bool
	startedAt time.Time
	done      chan struct{} // closed when the call in flight returns
	value     T
	okAt      time.Time // last success; zero = never
	lastErr   error     // error of the last finished (or timed out) call; nil after a success
}

func newProbe[T any](name string, c clock.Clock, timeout time.Duration, fn func(ctx context.Context) (T, error)) *probe[T] {
	return &probe[T]{name: name, clock: c, timeout: timeout, fn: fn}
}

// start begins a call unless one is already in flight. It returns a channel
// closed when the call in flight returns, and when that call started.
func (p *probe[T]) start() (<-chan struct{}, time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.running {
		p.running = true
		p.startedAt = p.clock.Now()
		p.done = make(chan struct{})
		go p.call(p.done)
	}
	return p.done, p.startedAt
}

func (p *probe[T]) call(done chan struct{}) {
	defer close(done)
	// The deadline is real time: it is what the runtime client honours. A call
	// that ignores it keeps running; no second call starts meanwhile.
	ctx, cancel := context.WithTimeout(context.Background(), p.timeout)
	defer cancel()
	v, err := p.fn(ctx)
	p.mu.Lock()
	defer p.mu.Unlock()
	p.running = false
	if err != nil {
		p.lastErr = err
		return
	}
	p.value, p.okAt, p.lastErr = v, p.clock.Now(), nil
}

// wait waits until the call started at startedAt returns or its timeout
// passes on the injected clock; a call still running then counts as failed.
func (p *probe[T]) wait(done <-chan struct{}, startedAt time.Time) {
	select {
	case <-done:
		return
	default:
	}
	if remaining := startedAt.Add(p.timeout).Sub(p.clock.Now()); remaining > 0 {
		select {
		case <-done:
			return
		case <-p.clock.After(remaining):
		}
	}
	select {
	case <-done:
		return
	default:
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.running && p.startedAt.Equal(startedAt) {
		p.lastErr = fmt.Errorf("%s: no answer within %v", p.name, p.timeout)
	}
}

// refresh starts a call (unless one is in flight) and waits for it.
func (p *probe[T]) refresh() { p.wait(p.start()) }

// get returns the last good value and whether there is one. err is non-nil
// when the answer cannot be trusted: no call ever succeeded, or calls have
// been failing and the last success is at least grace old.
func (p *probe[T]) get(now time.Time, grace time.Duration) (v T, ok bool, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.okAt.IsZero() {
		if p.lastErr == nil {
			return v, false, fmt.Errorf("%s: no answer yet", p.name)
		}
		return v, false, p.lastErr
	}
	if p.lastErr != nil && now.Sub(p.okAt) >= grace {
		return p.value, true, p.lastErr
	}
	return p.value, true, nil
}
