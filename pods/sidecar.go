package pods

import (
	"context"
	"slices"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/utils/clock"

	"github.com/nodeagent/nodeagent/kubetypes"
	"github.com/nodeagent/nodeagent/runtime"
)

// Sidecars are init containers with restartPolicy Always (kubelet's
// restartable init containers). This file holds what is particular to
// them: their place in the init sequence, their restarts, their end when
// the pod's regular containers are done, and the order in which a pod's
// containers stop.

// startedFunc reports whether the running container attempt id of the
// container name has started: its startup probe succeeded, or it has none.
type startedFunc func(name, id string) bool

func alwaysStarted(string, string) bool { return true }

// initActions adds to p what the pod's init containers need, as kubelet's
// computeInitContainerActions: they run in declaration order, a regular one
// until it exits 0, a sidecar until it has started (postStart done, which
// start waits for, and its startup probe succeeded); then the next one
// starts. Once the sequence has reached an init container, every sidecar
// before it is kept running: restarted (with the crash-loop back-off)
// whenever it exits, whatever the pod's restart policy, and replaced when
// its spec changed. A pod whose app containers exist has initialized
// before, and only its sidecars run again.
//
// It reports whether the pod has initialized (its app containers may run)
// and whether its initialization failed for good (a regular init container
// failed in a pod with restartPolicy Never).
func (p *plan) initActions(pod *v1.Pod, named map[string]*attempts, bo map[string]crashLoop, started startedFunc, now time.Time) (initialized, failed bool) {
	inits := pod.Spec.InitContainers
	// reached: the sequence has reached (or passed) the init container
	// the loop looks at, going from the last to the first.
	reached := false
	for _, c := range pod.Spec.Containers {
		if named[c.Name] != nil {
			reached = true
		}
	}
	initialized = reached || len(inits) == 0
	first := len(p.start)
	next := -1 // the init container to start next, if any
	for i := len(inits) - 1; i >= 0; i-- {
		c := &inits[i]
		sidecar := kubetypes.IsSidecar(c)
		a := named[c.Name]
		if a == nil {
			if reached && sidecar {
				// Its container is gone (removed): start it again.
				p.start = append(p.start, startAction{container: c, init: true})
			}
			continue
		}
		if reached && !sidecar {
			continue // done before
		}
		cur := a.cur
		// done: this init container has done its part in the sequence.
		done := false
		switch cur.State {
		case runtime.StateCreated:
			// Created but never started (the agent stopped in between):
			// the same attempt again (see plan.go).
			p.remove = append(p.remove, *cur)
			p.start = append(p.start, startAction{container: c, init: true, attempt: cur.Attempt})
		case runtime.StateRunning:
			if !sidecar || !started(c.Name, cur.ID) {
				break // wait for it to exit, or to start
			}
			done = true
			if specChanged(cur, c) {
				p.kill = append(p.kill, killAction{c: *cur, reason: "its spec changed"})
				p.start = append(p.start, startAction{container: c, init: true, attempt: cur.Attempt + 1})
			}
		case runtime.StateExited:
			switch {
			case sidecar:
				p.restartOrWait(pod, c, true, cur, bo[c.Name], now)
			case cur.ExitCode != 0:
				if pod.Spec.RestartPolicy == v1.RestartPolicyNever {
					p.start = p.start[:first]
					return false, true
				}
				p.restartOrWait(pod, c, true, cur, bo[c.Name], now)
			default:
				done = true
			}
		default: // unknown: wait for it
		}
		if done {
			if i == len(inits)-1 {
				initialized = true
			} else if !reached {
				next = i + 1
			}
		}
		reached = true
	}
	if !reached && len(inits) > 0 {
		next = 0
	}
	if next >= 0 {
		p.start = append(p.start, startAction{container: &inits[next], init: true})
	}
	// The loop went backwards: start in declaration order.
	slices.Reverse(p.start[first:])
	return initialized, false
}

// regularDone reports whether every app container of the pod has exited
// for good (the restart policy does not restart it): the pod is done, and
// its sidecars must not keep it alive (kubelet's KillPod when no regular
// container is kept or started).
func regularDone(pod *v1.Pod, named map[string]*attempts) bool {
	if len(pod.Spec.Containers) == 0 {
		return false
	}
	for _, c := range pod.Spec.Containers {
		a := named[c.Name]
		if a == nil || a.cur.State != runtime.StateExited || shouldRestart(pod.Spec.RestartPolicy, a.cur.ExitCode) {
			return false
		}
	}
	return true
}

// stopSidecars replaces the sidecar starts of p by stops of the running
// sidecars, the last declared first (the order kubelet stops them in), for
// a pod that is done (regularDone) or whose initialization failed.
func (p *plan) stopSidecars(pod *v1.Pod, named map[string]*attempts, reason string) {
	p.start = slices.DeleteFunc(p.start, func(s startAction) bool {
		return s.init && kubetypes.IsSidecar(s.container)
	})
	for i := len(pod.Spec.InitContainers) - 1; i >= 0; i-- {
		c := &pod.Spec.InitContainers[i]
		if !kubetypes.IsSidecar(c) {
			continue
		}
		delete(p.waiting, c.Name)
		delete(p.backoff, c.Name)
		if a := named[c.Name]; a != nil && a.cur.State == runtime.StateRunning {
			p.kill = append(p.kill, killAction{c: *a.cur, reason: reason})
		}
	}
}

// stopOrder is kubelet's termination order for a pod with sidecars: the
// regular containers stop at once; a sidecar stops once every regular
// container and every sidecar declared after it has stopped, or once its
// grace period is over, whichever comes first. Containers that are not
// running are not waited for. Its methods may be called concurrently.
type stopOrder struct {
	mu    sync.Mutex
	done  map[string]chan struct{}   // closed once the container of that name stopped
	after map[string][]chan struct{} // what a container waits for
}

func newStopOrder(pod *v1.Pod, running []runtime.Container) *stopOrder {
	o := &stopOrder{done: map[string]chan struct{}{}, after: map[string][]chan struct{}{}}
	isRunning := map[string]bool{}
	for _, c := range running {
		isRunning[c.Name] = true
	}
	ch := func(name string) chan struct{} {
		c := make(chan struct{})
		if isRunning[name] {
			o.done[name] = c
		} else {
			close(c)
		}
		return c
	}
	var regular []chan struct{}
	for _, c := range pod.Spec.Containers {
		regular = append(regular, ch(c.Name))
	}
	var later chan struct{} // the sidecar declared after the current one
	for i := len(pod.Spec.InitContainers) - 1; i >= 0; i-- {
		c := &pod.Spec.InitContainers[i]
		done := ch(c.Name)
		if !kubetypes.IsSidecar(c) {
			continue
		}
		o.after[c.Name] = slices.Clip(regular)
		if later != nil {
			o.after[c.Name] = append(o.after[c.Name], later)
		}
		later = done
	}
	return o
}

// wait blocks until it is the turn of the container name to stop, for at
// most limit, and returns how long it waited.
func (o *stopOrder) wait(ctx context.Context, clk clock.Clock, name string, limit time.Duration) time.Duration {
	deps := o.after[name]
	if len(deps) == 0 || limit <= 0 {
		return 0
	}
	start := clk.Now()
	t := clk.NewTimer(limit)
	defer t.Stop()
	for _, d := range deps {
		select {
		case <-d:
		case <-t.C():
			return clk.Since(start)
		case <-ctx.Done():
			return clk.Since(start)
		}
	}
	return clk.Since(start)
}

// stopped records that the container name has stopped (or failed to).
func (o *stopOrder) stopped(name string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if c, ok := o.done[name]; ok {
		close(c)
		delete(o.done, name)
	}
}
