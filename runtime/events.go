package runtime

import (
	"context"
	"errors"
	"fmt"
	"time"

	apievents "github.com/containerd/containerd/api/events"
	eventsapi "github.com/containerd/containerd/api/services/events/v1"
	"github.com/containerd/containerd/namespaces"
	"github.com/containerd/typeurl/v2"
)

// ErrEventsOverflow is the Err of no event, but the reason an EventStreamUp
// is sent after the consumer fell behind and events were dropped.
var ErrEventsOverflow = errors.New("runtime: event consumer too slow, events dropped")

const (
	eventBuffer    = 1024
	backoffInitial = 100 * time.Millisecond
	backoffMax     = 5 * time.Second
)

// Subscribe follows containerd's task events (start, exit, delete, OOM of a
// container's init process) and container events (create, delete) of the
// namespace until ctx is cancelled, then closes the channel.
//
// It reconnects with exponential backoff (100ms doubling to 5s) whenever the
// stream breaks, sending EventStreamDown when it breaks and EventStreamUp
// when it is (re)established, including the first time. Consumers should
// relist after every EventStreamUp: events between the last one seen and the
// new stream are lost. If the consumer does not keep up, task and container
// events are dropped (the buffer holds 1024) and an EventStreamUp is sent as
// soon as there is room again; stream events themselves are never dropped.
//
// On a TaskOOM event the container is labelled so that its exit reason
// becomes OOMKilled.
func (r *Runtime) Subscribe(ctx context.Context) <-chan Event {
	out := make(chan Event, eventBuffer)
	go r.followEvents(ctx, out)
	return out
}

func (r *Runtime) followEvents(ctx context.Context, out chan<- Event) {
	defer close(out)
	ns := r.opts.Namespace
	filters := []string{
		fmt.Sprintf(`namespace==%q,topic~="^/tasks/(start|exit|delete|oom)$"`, ns),
		fmt.Sprintf(`namespace==%q,topic~="^/containers/(create|delete)$"`, ns),
	}
	client := eventsapi.NewEventsClient(r.client.Conn())
	backoff := backoffInitial
	overflow := false
	send := func(ev Event) bool { // blocking, for stream events
		select {
		case out <- ev:
			return true
		case <-ctx.Done():
			return false
		}
	}
	for {
		sctx, cancel := context.WithCancel(namespaces.WithNamespace(ctx, ns))
		stream, err := client.Subscribe(sctx, &eventsapi.SubscribeRequest{Filters: filters})
		if err == nil {
			backoff = backoffInitial
			overflow = false
			if !send(Event{Type: EventStreamUp, Time: r.opts.Clock.Now()}) {
				cancel()
				return
			}
			for {
				var env *eventsapi.Envelope
				env, err = stream.Recv()
				if err != nil {
					break
				}
				ev, ok := r.decode(sctx, env)
				if !ok {
					continue
				}
				if overflow {
					select {
					case out <- Event{Type: EventStreamUp, Time: r.opts.Clock.Now(), Err: ErrEventsOverflow}:
						overflow = false
					default:
						continue
					}
				}
				select {
				case out <- ev:
				default:
					overflow = true
				}
			}
		}
		cancel()
		if ctx.Err() != nil {
			return
		}
		err = convertErr(err)
		r.opts.Logger.Warn("containerd event stream broken, reconnecting", "err", err, "backoff", backoff)
		if !send(Event{Type: EventStreamDown, Time: r.opts.Clock.Now(), Err: err}) {
			return
		}
		select {
		case <-r.opts.Clock.After(backoff):
		case <-ctx.Done():
			return
		}
		backoff = min(2*backoff, backoffMax)
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

// watchOOM labels OOM-killed containers whether or not anyone subscribes,
// so that their exit reason is right; it runs from New until Close.
func (r *Runtime) watchOOM(ctx context.Context) {
	client := eventsapi.NewEventsClient(r.client.Conn())
	filter := fmt.Sprintf(`namespace==%q,topic=="/tasks/oom"`, r.opts.Namespace)
	backoff := backoffInitial
	for ctx.Err() == nil {
		stream, err := client.Subscribe(namespaces.WithNamespace(ctx, r.opts.Namespace), &eventsapi.SubscribeRequest{Filters: []string{filter}})
		if err == nil {
			backoff = backoffInitial
			for {
				env, rerr := stream.Recv()
				if rerr != nil {
					break
				}
				if v, err := typeurl.UnmarshalAny(env.Event); err == nil {
					if e, ok := v.(*apievents.TaskOOM); ok {
						r.markOOM(ctx, e.ContainerID)
					}
				}
			}
		}
		select {
		case <-r.opts.Clock.After(backoff):
		case <-ctx.Done():
			return
		}
		backoff = min(2*backoff, backoffMax)
	}
}

func (r *Runtime) markOOM(ctx context.Context, id string) {
	ctx, cancel := r.callCtx(ctx)
	defer cancel()
	c, err := r.client.LoadContainer(ctx, id)
	if err == nil {
		_, err = c.SetLabels(ctx, map[string]string{labelOOMKilled: "true"})
	}
	if err != nil {
		r.opts.Logger.Warn("cannot record OOM kill", "containerID", id, "err", convertErr(err))
	}
}
