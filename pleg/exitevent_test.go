package pleg

import (
	"context"
	"reflect"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/nodeagent/nodeagent/runtime"
)

// A TaskExit that decides the exit (status, time, reason) is applied to a
// running container at once, without waiting for the runtime to answer an
// inspection: here containerd takes 50ms to answer one, and the
// ContainerDied (with its exit code, the cache with the exit time and
// reason) is there before any of it has passed. Before 2026-11-29 the PLEG
// asked containerd after every exit signal (issue 32: signal → event
// 9.6 / 24.9 / 53 ms p50 / p90 / max). What stays: the inspection that
// confirms it (no second event when it agrees), expectations (an exit the
// worker expected is not delivered, and its wait ends), an undecided
// reason (a SIGKILL on cgroup v2) left to the inspection, and an older
// observation of the container running, arriving later, discarded.
func TestTaskExitIsAppliedFromTheEvent(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := newFakeRuntime()
		p, stop := runPLEG(t, rt, Options{Sources: []Source{SourceContainerd}, RelistPeriod: time.Hour, Registerer: prometheus.NewRegistry()})
		defer stop()
		for _, id := range []string{"a", "b", "c", "d"} {
			rt.set(id, "p", runtime.StateRunning, 0)
		}
		rt.events <- runtime.Event{Type: runtime.EventStreamUp}
		synctest.Wait()
		if got := drain(p.Watch()); len(got) != 4 {
			t.Fatalf("events of the first relist: %v", got)
		}
		exitedAt := time.Now().Add(-time.Millisecond)
		// containerd's answer, when it comes: the same exit.
		exited := func(id string, code int32, reason string) {
			rt.mu.Lock()
			c := rt.containers[id]
			c.State, c.ExitCode, c.Reason, c.FinishedAt = runtime.StateExited, code, reason, exitedAt
			rt.containers[id] = c
			rt.busy[id] = 50 * time.Millisecond
			rt.mu.Unlock()
		}
		cached := func(id string) runtime.Container {
			s, _ := p.Cache().Get("uid-p")
			for _, c := range s.Containers {
				if c.ID == id {
					return c
				}
			}
			t.Fatalf("%s not in the cache: %+v", id, s)
			return runtime.Container{}
		}

		// a exits with 3.
		exited("a", 3, runtime.ReasonError)
		rt.events <- runtime.Event{Type: runtime.EventTaskExit, ContainerID: "a", ExitCode: 3, ExitedAt: exitedAt, Reason: runtime.ReasonError}
		synctest.Wait() // the inspection is waiting for containerd
		select {
		case ev := <-p.Watch():
			if ev.Type != ContainerDied || ev.ContainerID != "a" || ev.ExitCode == nil || *ev.ExitCode != 3 || ev.Source != SourceContainerd {
				t.Errorf("event %+v, want a's ContainerDied with exit code 3", ev)
			}
		default:
			t.Fatal("no ContainerDied before containerd answered the inspection")
		}
		if c := cached("a"); c.State != runtime.StateExited || c.ExitCode != 3 || !c.FinishedAt.Equal(exitedAt) || c.Reason != runtime.ReasonError || c.Pid != 0 {
			t.Errorf("cached %+v, want exited with 3 at %s (Error)", c, exitedAt)
		}
		time.Sleep(100 * time.Millisecond)
		synctest.Wait()
		if got := drain(p.Watch()); len(got) != 0 {
			t.Errorf("events after the inspection agreed: %v", got)
		}
		if n := rt.inspectCount("a"); n != 1 {
			t.Errorf("a inspected %d times, want once (to confirm)", n)
		}

		// b is being stopped by its worker: its exit is expected, met by
		// the event, and not delivered.
		p.ExpectWithin("uid-p", "b", ContainerDied, time.Minute)
		waited := make(chan error, 1)
		go func() { waited <- p.WaitExpected(context.Background(), "uid-p") }()
		exited("b", 0, runtime.ReasonCompleted)
		rt.events <- runtime.Event{Type: runtime.EventTaskExit, ContainerID: "b", ExitedAt: exitedAt, Reason: runtime.ReasonCompleted}
		synctest.Wait()
		select {
		case err := <-waited:
			if err != nil {
				t.Fatal(err)
			}
		default:
			t.Fatal("the worker's wait for its expected exit did not end before containerd answered")
		}
		if got := drain(p.Watch()); len(got) != 0 {
			t.Errorf("an expected exit was delivered: %v", got)
		}
		time.Sleep(100 * time.Millisecond)
		synctest.Wait()

		// c is SIGKILLed on cgroup v2: the event leaves the reason open
		// and the inspection decides it.
		exited("c", 137, runtime.ReasonOOMKilled)
		rt.events <- runtime.Event{Type: runtime.EventTaskExit, ContainerID: "c", ExitCode: 137, ExitedAt: exitedAt}
		synctest.Wait()
		if got := drain(p.Watch()); len(got) != 0 {
			t.Fatalf("events before containerd answered for an undecided exit: %v", got)
		}
		time.Sleep(100 * time.Millisecond)
		synctest.Wait()
		if got := drain(p.Watch()); !reflect.DeepEqual(got, []string{"ContainerDied/c"}) {
			t.Errorf("events after the inspection: %v", got)
		}
		if c := cached("c"); c.Reason != runtime.ReasonOOMKilled {
			t.Errorf("c's reason %q, want the inspection's OOMKilled", c.Reason)
		}

		// d: an inspection that saw it running is still on its way when
		// it exits; what it reports, older than the exit, is discarded.
		rt.mu.Lock()
		rt.busy["d"] = 50 * time.Millisecond
		rt.mu.Unlock()
		rt.events <- runtime.Event{Type: runtime.EventTaskStart, ContainerID: "d"}
		synctest.Wait() // it read d running and is waiting
		time.Sleep(10 * time.Millisecond)
		exited("d", 1, runtime.ReasonError)
		rt.events <- runtime.Event{Type: runtime.EventTaskExit, ContainerID: "d", ExitCode: 1, ExitedAt: exitedAt, Reason: runtime.ReasonError}
		synctest.Wait()
		if got := drain(p.Watch()); !reflect.DeepEqual(got, []string{"ContainerDied/d"}) {
			t.Errorf("events at d's exit: %v", got)
		}
		time.Sleep(200 * time.Millisecond)
		synctest.Wait()
		if got := drain(p.Watch()); len(got) != 0 {
			t.Errorf("events after the older inspection returned: %v", got)
		}
		if c := cached("d"); c.State != runtime.StateExited || c.ExitCode != 1 {
			t.Errorf("d cached %+v, want exited with 1", c)
		}
	})
}
