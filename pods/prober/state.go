package prober

import (
	"time"

	v1 "k8s.io/api/core/v1"
)

// Kind is a probe's type.
type Kind int8

const (
	Liveness Kind = iota
	Readiness
	Startup
)

func (k Kind) String() string {
	switch k {
	case Liveness:
		return "Liveness"
	case Readiness:
		return "Readiness"
	}
	return "Startup"
}

// initial is the result a probe has for a container before it has run
// enough (kubelet's initialValue): a container is not ready until its
// readiness probe succeeds, alive until its liveness probe fails, and of
// unknown start until its startup probe says.
func (k Kind) initial() Result {
	switch k {
	case Liveness:
		return Success
	case Readiness:
		return Failure
	}
	return Unknown
}

// Container is what the prober knows of a container's current attempt.
type Container struct {
	Name string
	// ID is the runtime ID of the current attempt ("" when none exists).
	ID         string
	Running    bool
	Terminated bool // exited (as opposed to created or not yet made)
	StartedAt  time.Time
}

// state is one probe worker's memory across rounds (kubelet's worker
// fields): the container attempt it probes, the last result and how many
// times in a row it came, and whether it holds (a liveness failure or a
// startup verdict is kept until the container is replaced).
type state struct {
	containerID string
	lastResult  Result
	run         int
	onHold      bool
}

// round is what one probe round decides before running the probe.
type round struct {
	// set, when not nil, is a result to publish for the container now.
	set *Result
	// reset: the container changed; results of the old one are dropped.
	reset bool
	// probe: run the probe now.
	probe bool
	// stop: the probe worker ends (the container will not run again).
	stop bool
}

// begin is kubelet's doProbe up to running the probe, as a pure function:
// c is the container's current attempt, started whether its startup probe
// passed (or it has none), deleting whether the pod is being deleted,
// restartable whether an exited container would run again.
func (s *state) begin(k Kind, spec *v1.Probe, c Container, started, deleting, restartable bool, now time.Time) round {
	var r round
	if c.ID == "" {
		return r // wait for the container
	}
	if c.ID != s.containerID {
		r.reset = s.containerID != ""
		s.containerID = c.ID
		s.onHold, s.lastResult, s.run = false, Unknown, 0
		v := k.initial()
		r.set = &v
	}
	if s.onHold {
		return r
	}
	if !c.Running {
		v := Failure
		r.set = &v
		r.stop = c.Terminated && !restartable
		return r
	}
	if deleting && k != Readiness {
		// Liveness and startup do not restart a pod that is stopping.
		v := Success
		r.set, r.stop = &v, true
		return r
	}
	if int32(now.Sub(c.StartedAt).Seconds()) < spec.InitialDelaySeconds {
		return r
	}
	if started == (k == Startup) {
		// Startup probes run until the container started; the others
		// only after.
		return r
	}
	r.probe = true
	return r
}

// end is kubelet's doProbe after the probe ran: it counts the result and
// returns it to publish once it came threshold times in a row (nil: keep
// the published result).
func (s *state) end(k Kind, spec *v1.Probe, res Result) *Result {
	if s.lastResult == res {
		s.run++
	} else {
		s.lastResult, s.run = res, 1
	}
	if (res == Failure && s.run < int(max(spec.FailureThreshold, 1))) ||
		(res == Success && s.run < int(max(spec.SuccessThreshold, 1))) {
		return nil
	}
	if (k == Liveness && res == Failure) || k == Startup {
		s.onHold, s.run = true, 0
	}
	return &res
}
