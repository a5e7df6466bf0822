package runtime

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/containerd/containerd"
	apievents "github.com/containerd/containerd/api/events"
	eventsapi "github.com/containerd/containerd/api/services/events/v1"
	"github.com/containerd/containerd/namespaces"
	"github.com/containerd/typeurl/v2"
	"k8s.io/apimachinery/pkg/util/wait"
)

// ErrEventsOverflow is the Err of no event, but the reason an EventStreamUp
// is sent after the consumer fell behind and events were dropped.
var ErrEventsOverflow = errors.New("runtime: event consumer too slow, events dropped")

const eventBuffer = 1024

// Subscribe follows containerd's task events (start, exit, delete, OOM of a
// container's init process) and container events (create, delete) of the
// namespace until ctx is cancelled, then closes the channel.
//
// It reconnects with exponential backoff (100ms doubling to 5s, see follow)
// whenever the stream breaks, sending EventStreamDown when it breaks and
// EventStreamUp when it is (re)established, including the first time.
// Consumers should relist after every EventStreamUp: events between the
// last one seen and the new stream are lost. If the consumer does not keep
// up, task and container events are dropped (the buffer holds 1024) and an
// EventStreamUp is sent as soon as there is room again; stream events
// themselves are never dropped.
//
// On a TaskOOM event the container is labelled so that its exit reason
// becomes OOMKilled. A TaskExit is delivered as it arrives, with its exit
// status, time and (when the event decides it) reason, so that a consumer
// needs no round trip to containerd to learn of the exit; its exit status
// is recorded in the container's labels by the exit recorder (watchTasks),
// and again by StopContainer before it deletes the task. (Until
// 2026-11-29 this stream recorded it itself before delivering the event:
// two more calls to containerd, one of them a metadata write, on the path
// of every exit, and the same write the recorder makes.)
func (r *Runtime) Subscribe(ctx context.Context) <-chan Event {
	out := make(chan Event, eventBuffer)
	go r.followEvents(ctx, out)
	return out
}

func (r *Runtime) followEvents(ctx context.Context, out chan<- Event) {
	defer close(out)
	ns := r.opts.Namespace
	overflow := false
	// Containers whose TaskOOM this stream decoded, for their TaskExit's
	// reason; forgotten at the exit (or the task's or container's deletion).
	oom := map[string]bool{}
	send := func(ev Event) { // blocking, for stream events
		select {
		case out <- ev:
		case <-ctx.Done():
		}
	}
	r.follow(ctx, eventStream{
		filters: []string{
			fmt.Sprintf(`namespace==%q,topic~="^/tasks/(start|exit|delete|oom)$"`, ns),
			fmt.Sprintf(`namespace==%q,topic~="^/containers/(create|delete)$"`, ns),
		},
		up: func() {
			overflow = false
			send(Event{Type: EventStreamUp, Time: r.opts.Clock.Now()})
		},
		event: func(ctx context.Context, env *eventsapi.Envelope) {
			ev, ok := r.decode(ctx, env)
			if !ok {
				return
			}
			switch ev.Type {
			case EventTaskOOM:
				oom[ev.ContainerID] = true
			case EventTaskExit:
				ev.Reason = r.eventExitReason(int32(ev.ExitCode), oom[ev.ContainerID])
				delete(oom, ev.ContainerID)
			case EventTaskDelete, EventContainerDelete:
				delete(oom, ev.ContainerID)
			}
			if overflow {
				select {
				case out <- Event{Type: EventStreamUp, Time: r.opts.Clock.Now(), Err: ErrEventsOverflow}:
					overflow = false
				default:
					return
				}
			}
			select {
			case out <- ev:
			default:
				overflow = true
			}
		},
		down: func(err error, retryIn time.Duration) {
			r.opts.Logger.Warn("containerd event stream broken, reconnecting", "err", err, "retryIn", retryIn)
			send(Event{Type: EventStreamDown, Time: r.opts.Clock.Now(), Err: err})
		},
	})
}

// eventStream is one follower of containerd's event stream: its filters and
// what it does when the subscription is accepted (up), for each event, and
// when the subscription failed or broke (down, with the delay before the
// next attempt). The callbacks run on follow's goroutine.
type eventStream struct {
	filters []string
	up      func()
	event   func(ctx context.Context, env *eventsapi.Envelope)
	down    func(err error, retryIn time.Duration)
}

// follow subscribes to containerd's events until ctx is done, subscribing
// again whenever the subscription fails or the stream breaks: after 100ms,
// doubling to 5s, without jitter (the agent is containerd's only such
// client on the node), and from 100ms again once a subscription is
// accepted. It waits on the runtime's clock.
func (r *Runtime) follow(ctx context.Context, s eventStream) {
	newBackoff := func() wait.Backoff {
		return wait.Backoff{Duration: 100 * time.Millisecond, Factor: 2, Jitter: 0, Steps: math.MaxInt32, Cap: 5 * time.Second}
	}
	client := eventsapi.NewEventsClient(r.client.Conn())
	backoff := newBackoff()
	for {
		sctx, cancel := context.WithCancel(namespaces.WithNamespace(ctx, r.opts.Namespace))
		stream, err := client.Subscribe(sctx, &eventsapi.SubscribeRequest{Filters: s.filters})
		if err == nil {
			backoff = newBackoff()
			if s.up != nil {
				s.up()
			}
			for {
				var env *eventsapi.Envelope
				if env, err = stream.Recv(); err != nil {
					break
				}
				s.event(sctx, env)
			}
		}
		cancel()
		if ctx.Err() != nil {
			return
		}
		delay := backoff.Step()
		if s.down != nil {
			s.down(convertErr(err), delay)
		}
		select {
		case <-r.opts.Clock.After(delay):
		case <-ctx.Done():
			return
		}
	}
}

// decode turns an envelope into an Event; ok is false for events that are
// not about a container's init process.
func (r *Runtime) decode(ctx context.Context, env *eventsapi.Envelope) (Event, bool) {
	v, err := typeurl.UnmarshalAny(env.Event)
	if err != nil {
		r.opts.Logger.Debug("undecodable containerd event", "topic", env.Topic, "err", err)
		return Event{}, false
	}
	ev := Event{Time: env.Timestamp.AsTime()}
	switch e := v.(type) {
	case *apievents.TaskStart:
		ev.Type, ev.ContainerID, ev.Pid = EventTaskStart, e.ContainerID, e.Pid
	case *apievents.TaskExit:
		if e.ID != "" && e.ID != e.ContainerID {
			return Event{}, false // an exec'd process, not the container
		}
		ev.Type, ev.ContainerID, ev.Pid, ev.ExitCode = EventTaskExit, e.ContainerID, e.Pid, e.ExitStatus
		ev.ExitedAt = e.ExitedAt.AsTime()
	case *apievents.TaskDelete:
		if e.ID != "" && e.ID != e.ContainerID {
			return Event{}, false
		}
		ev.Type, ev.ContainerID, ev.Pid, ev.ExitCode = EventTaskDelete, e.ContainerID, e.Pid, e.ExitStatus
	case *apievents.TaskOOM:
		ev.Type, ev.ContainerID = EventTaskOOM, e.ContainerID
		r.markOOM(ctx, e.ContainerID)
	case *apievents.ContainerCreate:
		ev.Type, ev.ContainerID = EventContainerCreate, e.ID
	case *apievents.ContainerDelete:
		ev.Type, ev.ContainerID = EventContainerDelete, e.ID
	default:
		return Event{}, false
	}
	return ev, true
}

// eventExitReason is the reason of an exit with code that a TaskExit
// decides (see Event.Reason): "" for a SIGKILL on cgroup v2 not known to
// be an OOM kill, which an inspection decides from the cgroups.
func (r *Runtime) eventExitReason(code int32, oomSeen bool) string {
	if !oomSeen && r.unified && code == sigkillExitCode {
		return ""
	}
	return exitReason(code, oomSeen)
}

// watchTasks records, whether or not anyone subscribes, what containerd
// may forget: it labels OOM-killed containers so that their exit reason is
// right, and records the exit status of every container's init process in
// its labels. containerd 1.6 keeps an exited task (and its status) until it
// is deleted; containerd 2.x deletes exited tasks silently when it restarts
// (it reaps shims without running processes), after which the labels are
// the only record of the exit. It runs from New until Close.
func (r *Runtime) watchTasks(ctx context.Context) {
	r.follow(ctx, eventStream{
		filters: []string{fmt.Sprintf(`namespace==%q,topic~="^/tasks/(exit|oom)$"`, r.opts.Namespace)},
		event: func(ctx context.Context, env *eventsapi.Envelope) {
			v, err := typeurl.UnmarshalAny(env.Event)
			if err != nil {
				return
			}
			switch e := v.(type) {
			case *apievents.TaskOOM:
				r.markOOM(ctx, e.ContainerID)
			case *apievents.TaskExit:
				if e.ID == "" || e.ID == e.ContainerID {
					r.markExit(ctx, e.ContainerID, int32(e.ExitStatus), e.ExitedAt.AsTime())
				}
			}
		},
		down: func(err error, retryIn time.Duration) {
			r.opts.Logger.Debug("containerd event stream of the exit recorder broken, reconnecting", "err", err, "retryIn", retryIn)
		},
	})
}

// markExit records the exit status of a container's init process in its
// labels (containers that are not ours are left alone).
func (r *Runtime) markExit(ctx context.Context, id string, code int32, at time.Time) {
	ctx, cancel := r.callCtx(ctx)
	defer cancel()
	c, err := r.client.LoadContainer(ctx, id)
	if err != nil {
		if !errors.Is(convertErr(err), ErrNotFound) {
			r.opts.Logger.Warn("cannot record exit status", "containerID", id, "err", convertErr(err))
		}
		return
	}
	// The labels LoadContainer just read: two calls per exit in all.
	info, err := c.Info(ctx, containerd.WithoutRefreshedMetadata)
	if err != nil || info.Labels[LabelPodUID] == "" {
		return // not ours
	}
	// On cgroup v2 a SIGKILL exit may be an OOM kill whose TaskOOM
	// containerd lost (oomkill.go).
	extra := r.decideOOM(ctx, id, info.Labels, code)
	if err := r.recordExitWith(ctx, c, info.Labels, code, at, extra); err != nil && !errors.Is(err, ErrNotFound) {
		r.opts.Logger.Warn("cannot record exit status", "containerID", id, "err", err)
	}
}

func (r *Runtime) markOOM(ctx context.Context, id string) {
	ctx, cancel := r.callCtx(ctx)
	defer cancel()
	c, err := r.client.LoadContainer(ctx, id)
	var labels map[string]string
	if err == nil {
		labels, err = c.Labels(ctx)
	}
	if err == nil {
		set := map[string]string{labelOOMKilled: "true"}
		if labels[labelExitCode] != "" { // the exit was recorded first
			set[labelReason] = ReasonOOMKilled
		}
		// The pod's kills so far are this one's: a SIGKILL exit of
		// another container is not put down to them (oomkill.go).
		if r.unified && labels[labelPodOOMKillsSeen] == "" {
			if n, ok := podOOMKills(r.cgroupRoot, labels); ok {
				set[labelPodOOMKillsSeen] = strconv.FormatUint(n, 10)
			}
		}
		_, err = c.SetLabels(ctx, set)
	}
	if err != nil {
		r.opts.Logger.Warn("cannot record OOM kill", "containerID", id, "err", convertErr(err))
	}
}
