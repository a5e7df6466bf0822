package pods

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/nodeagent/nodeagent/crilog"
	"github.com/nodeagent/nodeagent/kubetypes"
	"github.com/nodeagent/nodeagent/runtime"
)

// appendLog writes lines to a container's CRI log as its log writer does.
func appendLog(t *testing.T, path, text string) {
	t.Helper()
	w, err := crilog.OpenWriter(path, crilog.Rotation{}, nil, func(err error) { t.Error(err) })
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Copy(strings.NewReader(text), crilog.Stdout); err != nil {
		t.Fatal(err)
	}
	w.Close()
}

func fallbackPod(name string) *v1.Pod {
	c := ctr("c")
	c.TerminationMessagePolicy = v1.TerminationMessageFallbackToLogsOnError
	return testPod(name, v1.RestartPolicyNever, c)
}

func terminatedMessage(st v1.PodStatus, name string) (string, bool) {
	for _, cs := range st.ContainerStatuses {
		if cs.Name == name && cs.State.Terminated != nil {
			return cs.State.Terminated.Message, true
		}
	}
	return "", false
}

// An exit reaches the status once the container's log holds all it
// wrote (the drain), and before its task is released: the termination
// message taken from the log (FallbackToLogsOnError) ends with the last
// line, and the status does not wait for the release. The drain is
// bounded and asked once.
func TestWorkerDrainsTheLogBeforeReportingAnExit(t *testing.T) {
	e := newWorkerEnv(t)
	pod := fallbackPod("job")
	w := e.worker(pod, kubetypes.SourceAPI)
	e.settle(w)
	c := e.rt.running()["c"]
	if c.LogPath == "" {
		t.Fatal("the container has no log path")
	}
	appendLog(t, c.LogPath, "first\n")
	e.clk.Step(time.Second)
	e.rt.exit(c.ID, 1)

	var order []string
	e.rt.onDrain = func(ctx context.Context, got runtime.Container) {
		if got.ID != c.ID || got.State != runtime.StateExited {
			t.Errorf("drained %s in state %s, want the exited %s", got.ID, got.State, c.ID)
		}
		if dl, ok := ctx.Deadline(); !ok || time.Until(dl) > drainTimeout {
			t.Errorf("the drain is not bounded by %s (deadline %v, %v)", drainTimeout, dl, ok)
		}
		_, reported := terminatedMessage(e.lastStatus(pod.UID), "c")
		order = append(order, fmt.Sprintf("drain (exit reported: %v)", reported))
		// What the writer still had in the pipe.
		appendLog(t, got.LogPath, "last\n")
	}
	released := false
	e.rt.onStop = func(id string) {
		if id == c.ID && !released {
			released = true
			msg, reported := terminatedMessage(e.lastStatus(pod.UID), "c")
			order = append(order, fmt.Sprintf("release (exit reported: %v, message %q)", reported, msg))
		}
	}
	e.settle(w)
	want := []string{"drain (exit reported: false)", `release (exit reported: true, message "first\nlast\n")`}
	if fmt.Sprint(order) != fmt.Sprint(want) {
		t.Fatalf("order %q, want %q", order, want)
	}
	st := e.lastStatus(pod.UID)
	if msg, _ := terminatedMessage(st, "c"); st.Phase != v1.PodFailed || msg != "first\nlast\n" {
		t.Fatalf("phase %s, message %q; want Failed, \"first\\nlast\\n\"", st.Phase, msg)
	}
	e.clk.Step(time.Minute)
	e.settle(w)
	if len(e.rt.drains) != 1 {
		t.Errorf("drains %v, want one", e.rt.drains)
	}
}

// When the log writer cannot drain (stdin or a terminal, a writer from
// before the protocol, one that does not answer in time), the task is
// released first, as before: the release waits for the writer, so the
// message still ends with the last line. The task is released once.
func TestWorkerReleasesTheTaskFirstWhenTheLogCannotBeDrained(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
	}{
		{"stdin or tty", fmt.Errorf("runtime: drain: %w", runtime.ErrCannotDrain)},
		{"writer from an older version", fmt.Errorf("runtime: crilog: drain: %w", crilog.ErrNoLogger)},
		{"writer does not answer", fmt.Errorf("crilog: drain: %w", context.DeadlineExceeded)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newWorkerEnv(t)
			pod := fallbackPod("job")
			w := e.worker(pod, kubetypes.SourceAPI)
			e.settle(w)
			c := e.rt.running()["c"]
			appendLog(t, c.LogPath, "first\n")
			e.clk.Step(time.Second)
			e.rt.exit(c.ID, 1)
			e.rt.drainErr = tc.err
			var releases []string
			e.rt.onStop = func(id string) {
				if id == c.ID {
					_, reported := terminatedMessage(e.lastStatus(pod.UID), "c")
					releases = append(releases, fmt.Sprintf("exit reported: %v", reported))
					// The shim closes the pipes; the writer writes the
					// rest and exits before the release returns.
					appendLog(t, c.LogPath, "last\n")
				}
			}
			e.settle(w)
			if len(releases) == 0 || releases[0] != "exit reported: false" {
				t.Fatalf("releases %q: want the first before the exit is reported", releases)
			}
			st := e.lastStatus(pod.UID)
			if msg, _ := terminatedMessage(st, "c"); st.Phase != v1.PodFailed || msg != "first\nlast\n" {
				t.Fatalf("phase %s, message %q; want Failed, \"first\\nlast\\n\"", st.Phase, msg)
			}
			if len(e.rt.drains) != 1 {
				t.Errorf("drains %v, want one", e.rt.drains)
			}
		})
	}
}

// Containers the worker stopped itself (a deletion, a failed probe) are
// not drained: their release already waited for the writer.
func TestWorkerDoesNotDrainWhatItStopped(t *testing.T) {
	e := newWorkerEnv(t)
	pod := testPod("web", v1.RestartPolicyAlways, ctr("c"))
	w := e.worker(pod, kubetypes.SourceAPI)
	e.settle(w)
	w.remove()
	if _, done := e.settle(w); !done {
		t.Fatal("the pod did not end")
	}
	if len(e.rt.stops) == 0 {
		t.Fatal("the container was not stopped")
	}
	if len(e.rt.drains) != 0 {
		t.Errorf("drained %v after stopping them", e.rt.drains)
	}
}

// Drained containers are forgotten once the runtime no longer has them.
func TestWorkerForgetsDrainedContainers(t *testing.T) {
	e := newWorkerEnv(t)
	pod := testPod("crash", v1.RestartPolicyAlways, ctr("c"))
	w := e.worker(pod, kubetypes.SourceAPI)
	e.settle(w)
	first := e.rt.running()["c"].ID
	e.clk.Step(time.Second)
	e.rt.exit(first, 1)
	e.settle(w)
	if !w.tasks.drained[first] {
		t.Fatalf("drained %v, want %s", w.tasks.drained, first)
	}
	if err := e.rt.RemoveContainer(context.Background(), first); err != nil {
		t.Fatal(err)
	}
	e.clk.Step(time.Minute)
	e.settle(w)
	if w.tasks.drained[first] {
		t.Errorf("still remembers the removed %s: %v", first, w.tasks.drained)
	}
}
