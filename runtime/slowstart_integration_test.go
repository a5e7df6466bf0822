package runtime_test

import (
	"context"
	"testing"
	"time"

	"github.com/nodeagent/nodeagent/internal/testing/testimage"
	"github.com/nodeagent/nodeagent/runtime"
)

// A listing made while containerd is still starting a container (its
// shim busy in runc start, its process already exited 0) never reports
// the container exited with an unknown code: containerd 2.x leaves such a
// task out of its task list after its 2s state timeout, and the agent
// took the started container without a task for one that had exited
// (code -1), which failed restartPolicy Never pods (docs/pods.md). What
// it reports instead is the task's state asked again, or Undetermined;
// once the start returned, the container's real exit (0).
func TestListDuringSlowStart(t *testing.T) {
	if testing.Short() {
		t.Skip("needs a real containerd")
	}
	t.Setenv(testimage.RuncEnv, testimage.SlowStartRunc(t, 5*time.Second))
	rt, _ := newRuntime(t)
	ctx := context.Background()
	id, err := rt.CreateContainer(ctx, spec("slow", "main", "sh", "-c", "exit 0"))
	if err != nil {
		t.Fatal(err)
	}
	started := make(chan error, 1)
	go func() { started <- rt.StartContainer(ctx, id) }()
	var seen []string
	check := func(c runtime.Container, how string) {
		seen = append(seen, how+": "+string(c.State))
		if c.State == runtime.StateExited && c.ExitCode != 0 {
			t.Errorf("%s during the start: exited with code %d (%s); seen so far %v", how, c.ExitCode, c.Reason, seen)
		}
	}
	deadline := time.After(60 * time.Second)
	for done := false; !done; {
		select {
		case err := <-started:
			if err != nil {
				t.Fatal(err)
			}
			done = true
			continue
		case <-deadline:
			t.Fatal("the start did not return in 60s")
		default:
		}
		cs, err := rt.ListContainers(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range cs {
			if c.ID == id {
				check(c, "listed")
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Logf("observations during the start: %v", seen)
	if c := waitState(t, rt, id, runtime.StateExited); c.ExitCode != 0 {
		t.Fatalf("after the start: %+v, want exit code 0", c)
	}
}
