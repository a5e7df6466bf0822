package runtime_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nodeagent/nodeagent/internal/testing/testimage"
	"github.com/nodeagent/nodeagent/runtime"
	"k8s.io/apimachinery/pkg/types"
)

type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

func newRuntime(t *testing.T) (*runtime.Runtime, *testimage.Containerd) {
	t.Helper()
	return newRuntimeWith(t, nil)
}

// newRuntimeWith is newRuntime with options changed by set.
func newRuntimeWith(t *testing.T, set func(*runtime.Options)) (*runtime.Runtime, *testimage.Containerd) {
	t.Helper()
	cd := testimage.StartContainerd(t)
	rt := bareRuntime(t, cd, "", set) // "": the runtime's default namespace
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := testimage.Import(ctx, rt); err != nil {
		t.Fatal(err)
	}
	return rt, cd
}

func spec(pod, name string, cmd ...string) runtime.ContainerSpec {
	return runtime.ContainerSpec{
		Pod:     runtime.PodRef{UID: types.UID("uid-" + pod), Name: pod, Namespace: "default"},
		Name:    name,
		Image:   testimage.Ref,
		Command: cmd,
	}
}

func waitState(t *testing.T, rt *runtime.Runtime, id string, want runtime.State) runtime.Container {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		c, err := rt.InspectContainer(context.Background(), id)
		if err == nil && c.State == want {
			return c
		}
		if time.Now().After(deadline) {
			t.Fatalf("container %s: want state %s, have %+v (err %v)", id, want, c, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// exitedOutput returns an exited container's log once all its output is
// in it. containerd's shim reports the exit without waiting for its copy
// of the container's output into the file (a read right after Exited can
// miss the last lines on a loaded machine); releasing the task, which
// StopContainer does for an exited container, waits for that copy.
func exitedOutput(t *testing.T, rt *runtime.Runtime, id, logPath string) []byte {
	t.Helper()
	if err := rt.StopContainer(context.Background(), id, 0); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(logPath)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestRuntimeLifecycle(t *testing.T) {
	rt, _ := newRuntime(t)
	ctx := context.Background()

	v, err := rt.Version(ctx)
	if err != nil || v.RuntimeVersion == "" {
		t.Fatalf("Version: %+v, %v", v, err)
	}
	t.Logf("containerd %s", v.RuntimeVersion)

	imgs, err := rt.ListImages(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(imgs) != 1 || imgs[0].Names[0] != testimage.Ref || imgs[0].Size < 1<<20 || !strings.HasPrefix(imgs[0].ID, "sha256:") {
		t.Fatalf("ListImages = %+v", imgs)
	}

	logPath := filepath.Join(t.TempDir(), "logs", "a.log")
	s := spec("p1", "main", "sh", "-c", "echo hello $GREETING from $(pwd); exec sleep 1000")
	s.Env = []string{"GREETING=hi"}
	s.WorkingDir = "/tmp"
	s.LogPath = logPath
	s.Attempt = 3
	s.Resources = runtime.Resources{MemoryLimitBytes: 64 << 20, CPUQuota: 50000}
	id, err := rt.CreateContainer(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	c, err := rt.InspectContainer(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if c.State != runtime.StateCreated || c.Pod.UID != "uid-p1" || c.Pod.Name != "p1" || c.Name != "main" || c.Attempt != 3 || c.CreatedAt.IsZero() {
		t.Fatalf("after create: %+v", c)
	}
	if !strings.HasSuffix(c.CgroupsPath, "/uid-p1/"+id) {
		t.Fatalf("cgroups path %q", c.CgroupsPath)
	}
	if err := rt.StartContainer(ctx, id); err != nil {
		t.Fatal(err)
	}
	c = waitState(t, rt, id, runtime.StateRunning)
	if c.Pid == 0 || c.StartedAt.IsZero() {
		t.Fatalf("running container: %+v", c)
	}
	if err := rt.StartContainer(ctx, id); !errors.Is(err, runtime.ErrFailedPrecondition) {
		t.Fatalf("second start: %v, want ErrFailedPrecondition", err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		b, _ := os.ReadFile(logPath)
		if strings.Contains(string(b), "hello hi from /tmp") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("log %q", b)
		}
		time.Sleep(20 * time.Millisecond)
	}

	// A second container of the same pod that exits by itself with 3.
	id2, err := rt.CreateContainer(ctx, spec("p1", "side", "sh", "-c", "exit 3"))
	if err != nil {
		t.Fatal(err)
	}
	if err := rt.StartContainer(ctx, id2); err != nil {
		t.Fatal(err)
	}
	c2 := waitState(t, rt, id2, runtime.StateExited)
	if c2.ExitCode != 3 || c2.Reason != runtime.ReasonError || c2.FinishedAt.IsZero() {
		t.Fatalf("exited container: %+v", c2)
	}

	pods, err := rt.ListPods(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(pods) != 1 || len(pods[0].Containers) != 2 {
		t.Fatalf("ListPods = %+v", pods)
	}

	// sh as PID 1 ignores SIGTERM: Stop must escalate to SIGKILL after grace.
	start := time.Now()
	if err := rt.StopContainer(ctx, id, 500*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d < 500*time.Millisecond {
		t.Fatalf("stop returned after %s, before the grace period", d)
	}
	c, err = rt.InspectContainer(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if c.State != runtime.StateExited || c.ExitCode != 137 || c.Reason != runtime.ReasonError || c.FinishedAt.IsZero() {
		t.Fatalf("after stop: %+v", c)
	}
	if err := rt.StopContainer(ctx, id, time.Second); err != nil {
		t.Fatalf("stopping a stopped container: %v", err)
	}

	for _, id := range []string{id, id2} {
		if err := rt.RemoveContainer(ctx, id); err != nil {
			t.Fatal(err)
		}
		if _, err := rt.InspectContainer(ctx, id); !errors.Is(err, runtime.ErrNotFound) {
			t.Fatalf("inspect removed: %v", err)
		}
		if err := rt.RemoveContainer(ctx, id); err != nil {
			t.Fatalf("removing twice: %v", err)
		}
	}
	cs, err := rt.ListContainers(ctx)
	if err != nil || len(cs) != 0 {
		t.Fatalf("ListContainers after removal = %+v, %v", cs, err)
	}
}

func TestStopHonoursSIGTERM(t *testing.T) {
	rt, _ := newRuntime(t)
	ctx := context.Background()
	// The shell says when its trap is in place: a SIGTERM before that
	// is ignored (it is its PID namespace's init), and the stop would end
	// in SIGKILL after the grace period. A fixed wait after Running was
	// too short for a loaded machine.
	s := spec("p2", "main", "sh", "-c", "trap 'exit 0' TERM; echo trapped; while true; do sleep 0.1; done")
	s.LogPath = filepath.Join(t.TempDir(), "main.log")
	id, err := rt.CreateContainer(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	if err := rt.StartContainer(ctx, id); err != nil {
		t.Fatal(err)
	}
	waitState(t, rt, id, runtime.StateRunning)
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if b, _ := os.ReadFile(s.LogPath); strings.Contains(string(b), "trapped\n") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the shell did not install its TERM trap within 20s")
		}
	}
	if err := rt.StopContainer(ctx, id, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	c, err := rt.InspectContainer(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if c.State != runtime.StateExited || c.ExitCode != 0 || c.Reason != runtime.ReasonCompleted {
		t.Fatalf("after graceful stop: %+v", c)
	}
}

func TestCreateValidation(t *testing.T) {
	s := runtime.ContainerSpec{Env: []string{"NOEQUALS"}, WorkingDir: "rel", LogPath: "rel.log",
		Mounts:  []runtime.Mount{{HostPath: "x", ContainerPath: "/y"}},
		Devices: []runtime.Device{{HostPath: "dev/x", ContainerPath: "/dev/x", Permissions: "rw"}}}
	err := s.Validate()
	if !errors.Is(err, runtime.ErrInvalidSpec) {
		t.Fatalf("Validate = %v", err)
	}
	for _, want := range []string{"pod UID", "container name", "image", "env[0]", "workingDir", "mounts[0]", "logPath", "devices[0]"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
}

func TestSubscribeReconnects(t *testing.T) {
	rt, cd := newRuntime(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	events := rt.Subscribe(ctx)
	next := func(want runtime.EventType, id string) runtime.Event {
		t.Helper()
		timeout := time.After(30 * time.Second)
		for {
			select {
			case ev, ok := <-events:
				if !ok {
					t.Fatal("event channel closed")
				}
				if ev.Type == want && (id == "" || ev.ContainerID == id) {
					return ev
				}
				t.Logf("skipping event %+v", ev)
			case <-timeout:
				t.Fatalf("no %s event for %q", want, id)
			}
		}
	}
	next(runtime.EventStreamUp, "")
	id, err := rt.CreateContainer(ctx, spec("p3", "main", "sh", "-c", "exit 7"))
	if err != nil {
		t.Fatal(err)
	}
	next(runtime.EventContainerCreate, id)
	if err := rt.StartContainer(ctx, id); err != nil {
		t.Fatal(err)
	}
	next(runtime.EventTaskStart, id)
	// The exit as containerd reports it, in the event: status, time and
	// the reason an inspection gives.
	ev := next(runtime.EventTaskExit, id)
	c, err := rt.InspectContainer(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if ev.ExitCode != 7 || ev.Reason != runtime.ReasonError || ev.ExitedAt.IsZero() || !ev.ExitedAt.Equal(c.FinishedAt) || c.Reason != ev.Reason {
		t.Fatalf("exit event %+v, inspected %+v", ev, c)
	}
	// The event is delivered before the exit recorder has written the exit
	// into the labels (it no longer waits for that write): containerd is
	// killed only once it is there, or the restart below tests a lost
	// write (containerd 2.x then has neither the task nor the labels).
	waitExitRecorded(t, rt, id, "7")

	cd.Kill()
	if ev := next(runtime.EventStreamDown, ""); ev.Err == nil {
		t.Fatalf("StreamDown without error: %+v", ev)
	}
	if err := cd.Start(); err != nil {
		t.Fatal(err)
	}
	next(runtime.EventStreamUp, "")
	// The exit survives the restart: containerd 1.6 keeps the stopped task,
	// 2.x reaps it while loading shims and the adapter's labels remain.
	if c := waitState(t, rt, id, runtime.StateExited); c.ExitCode != 7 || c.Reason != runtime.ReasonError || c.FinishedAt.IsZero() {
		t.Fatalf("after restart: %+v", c)
	}
	v, err := rt.Version(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := rt.RemoveContainer(ctx, id); err != nil {
		t.Fatal(err)
	}
	if testimage.ExitStatusSurvivesRestart(v.RuntimeVersion) {
		next(runtime.EventTaskDelete, id)
	}
	next(runtime.EventContainerDelete, id)
}

func TestOOMKilled(t *testing.T) {
	rt, _ := newRuntime(t)
	ctx := context.Background()
	s := spec("p4", "hog", "sh", "-c", "x=$(yes | head -c 300000000); echo survived")
	s.Resources.MemoryLimitBytes = 16 << 20
	id, err := rt.CreateContainer(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	if err := rt.StartContainer(ctx, id); err != nil {
		t.Fatal(err)
	}
	c := waitState(t, rt, id, runtime.StateExited)
	// The OOM label is written when containerd's OOM event arrives, which
	// may be a moment after the exit.
	deadline := time.Now().Add(10 * time.Second)
	for c.Reason != runtime.ReasonOOMKilled && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
		c, _ = rt.InspectContainer(ctx, id)
	}
	if c.Reason != runtime.ReasonOOMKilled || c.ExitCode != 137 {
		t.Fatalf("after OOM: reason %q exit %d", c.Reason, c.ExitCode)
	}
}

// An exit status survives a containerd restart whether or not anyone
// subscribes: 1.6 keeps the stopped task, 2.x reaps it and the adapter's
// waitExitRecorded waits until the exit recorder has written container
// id's exit code into its labels.
func waitExitRecorded(t *testing.T, rt *runtime.Runtime, id, code string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := rt.InspectContainer(context.Background(), id)
		if err == nil && c.Labels["io.nodeagent.exit-code"] == code {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("exit status not recorded: %+v (err %v)", c, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// labels (recorded from the TaskExit event) tell the status.
func TestExitSurvivesRestart(t *testing.T) {
	rt, cd := newRuntime(t)
	ctx := context.Background()
	id, err := rt.CreateContainer(ctx, spec("p5", "main", "sh", "-c", "exit 3"))
	if err != nil {
		t.Fatal(err)
	}
	if err := rt.StartContainer(ctx, id); err != nil {
		t.Fatal(err)
	}
	waitState(t, rt, id, runtime.StateExited)
	waitExitRecorded(t, rt, id, "3")
	cd.Kill()
	if err := cd.Start(); err != nil {
		t.Fatal(err)
	}
	c := waitState(t, rt, id, runtime.StateExited)
	if c.ExitCode != 3 || c.Reason != runtime.ReasonError || c.FinishedAt.IsZero() {
		t.Fatalf("after restart: %+v", c)
	}
}
