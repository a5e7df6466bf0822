package pleg

import (
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// stage orders event types along a container's life, so that an event can
// be recognised as a step towards, or past, an expected one.
func stage(t EventType) int {
	switch t {
	case ContainerChanged:
		return 0
	case ContainerStarted:
		return 1
	case ContainerDied:
		return 2
	case ContainerRemoved:
		return 3
	}
	return -1
}

// expectations implements the design proposal's expected-event filter. It
// is pure: every decision takes now and returns what to deliver; it is not
// safe for concurrent use (the PLEG holds its lock).
//
// For an event of a pod with pending expectations:
//   - same container and type as an expectation: the expectation is met and
//     the event is not delivered (the worker knows what it did);
//   - same container, an earlier stage (ContainerChanged on the way to an
//     expected ContainerStarted; ContainerDied on the way to an expected
//     ContainerRemoved): absorbed, the expectation stays;
//   - same container, a later stage (ContainerDied while ContainerStarted was
//     expected: it started and already died): the expectation is met and the
//     event is news;
//   - news is held while the pod has pending expectations and delivered, in
//     order, once all are met or expired.
//
// Events of pods without expectations are delivered at once.
type expectations struct {
	pods map[types.UID]*podExpectations
}

type podExpectations struct {
	pending []Expectation
	held    []Event
}

func newExpectations() *expectations {
	return &expectations{pods: map[types.UID]*podExpectations{}}
}

// add records an expectation.
func (x *expectations) add(e Expectation) {
	p := x.pods[e.PodUID]
	if p == nil {
		p = &podExpectations{}
		x.pods[e.PodUID] = p
	}
	p.pending = append(p.pending, e)
}

// expired reports whether e is expired at now.
func (e Expectation) expired(now time.Time) bool { return !now.Before(e.Deadline) }

// observe filters one event. It returns the events to deliver now (held
// ones first, in order), the expectations the event met and those found
// expired on the way.
func (x *expectations) observe(ev Event, now time.Time) (deliver []Event, met, expired []Expectation) {
	p := x.pods[ev.PodUID]
	if p == nil {
		return []Event{ev}, nil, nil
	}
	expired = p.dropExpired(now)
	news := true
	kept := p.pending[:0]
	for _, e := range p.pending {
		if e.ContainerID != ev.ContainerID {
			kept = append(kept, e)
			continue
		}
		switch s, want := stage(ev.Type), stage(e.Type); {
		case s < want:
			news = false // a step towards the expected event
			kept = append(kept, e)
		case s == want:
			news = false
			met = append(met, e)
		default:
			met = append(met, e)
		}
	}
	p.pending = kept
	if news {
		p.held = append(p.held, ev)
	}
	if len(p.pending) == 0 {
		deliver = p.held
		delete(x.pods, ev.PodUID)
	}
	return deliver, met, expired
}

func (p *podExpectations) dropExpired(now time.Time) (expired []Expectation) {
	kept := p.pending[:0]
	for _, e := range p.pending {
		if e.expired(now) {
			expired = append(expired, e)
		} else {
			kept = append(kept, e)
		}
	}
	p.pending = kept
	return expired
}

// expire drops the expectations expired at now and returns the events that
// were held only by them.
func (x *expectations) expire(now time.Time) (deliver []Event, expired []Expectation) {
	for uid, p := range x.pods {
		expired = append(expired, p.dropExpired(now)...)
		if len(p.pending) == 0 {
			deliver = append(deliver, p.held...)
			delete(x.pods, uid)
		}
	}
	return deliver, expired
}

// nextDeadline is the earliest pending deadline.
func (x *expectations) nextDeadline() (time.Time, bool) {
	var next time.Time
	for _, p := range x.pods {
		for _, e := range p.pending {
			if next.IsZero() || e.Deadline.Before(next) {
				next = e.Deadline
			}
		}
	}
	return next, !next.IsZero()
}

// pendingFor reports whether the pod has pending expectations.
func (x *expectations) pendingFor(uid types.UID) bool { return x.pods[uid] != nil }
