package runtime

import (
	"context"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/containerd/containerd"
	containersapi "github.com/containerd/containerd/api/services/containers/v1"
	tasksapi "github.com/containerd/containerd/api/services/tasks/v1"
	tasktypes "github.com/containerd/containerd/api/types/task"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// fakeTasks is containerd's task service as containerd 2.x answers while
// a shim is busy starting its task: the task list leaves out the tasks in
// hidden (their state query timed out), Get answers from gets (one
// answer per call, in order; the last one repeats).
type fakeTasks struct {
	tasksapi.UnimplementedTasksServer
	mu     sync.Mutex
	tasks  map[string]*tasktypes.Process
	hidden map[string]bool
	gets   map[string][]error // nil error: the task in tasks (or NotFound without one)
	calls  map[string]int
}

func (f *fakeTasks) List(context.Context, *tasksapi.ListTasksRequest) (*tasksapi.ListTasksResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	resp := &tasksapi.ListTasksResponse{}
	for id, t := range f.tasks {
		if !f.hidden[id] {
			resp.Tasks = append(resp.Tasks, t)
		}
	}
	return resp, nil
}

func (f *fakeTasks) Get(_ context.Context, r *tasksapi.GetRequest) (*tasksapi.GetResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls[r.ContainerID]++
	if errs := f.gets[r.ContainerID]; len(errs) > 0 {
		err := errs[0]
		if len(errs) > 1 {
			f.gets[r.ContainerID] = errs[1:]
		}
		if err != nil {
			return nil, err
		}
	}
	t := f.tasks[r.ContainerID]
	if t == nil {
		return nil, status.Errorf(codes.NotFound, "task %s not found", r.ContainerID)
	}
	return &tasksapi.GetResponse{Process: t}, nil
}

// fakeContainers is containerd's container service over labels; a Get
// may first apply a change (an exit recorded meanwhile).
type fakeContainers struct {
	containersapi.UnimplementedContainersServer
	mu     sync.Mutex
	labels map[string]map[string]string
	onGet  map[string]func(map[string]string)
}

func (f *fakeContainers) proto(id string) *containersapi.Container {
	l := map[string]string{}
	for k, v := range f.labels[id] {
		l[k] = v
	}
	return &containersapi.Container{ID: id, Labels: l, Image: "img"}
}

func (f *fakeContainers) List(context.Context, *containersapi.ListContainersRequest) (*containersapi.ListContainersResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	resp := &containersapi.ListContainersResponse{}
	for id := range f.labels {
		resp.Containers = append(resp.Containers, f.proto(id))
	}
	return resp, nil
}

func (f *fakeContainers) Get(_ context.Context, r *containersapi.GetContainerRequest) (*containersapi.GetContainerResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if fn := f.onGet[r.ID]; fn != nil && f.labels[r.ID] != nil {
		fn(f.labels[r.ID])
		delete(f.onGet, r.ID)
	}
	if f.labels[r.ID] == nil {
		return nil, status.Errorf(codes.NotFound, "container %q not found", r.ID)
	}
	return &containersapi.GetContainerResponse{Container: f.proto(r.ID)}, nil
}

// serveFakeContainerd serves tasks and containers on a unix socket and
// returns a Runtime over it (built by hand: no exit recorder).
func serveFakeContainerd(t *testing.T, tasks *fakeTasks, ctrs *fakeContainers) *Runtime {
	t.Helper()
	client := fakeContainerdClient(t, func(srv *grpc.Server) {
		tasksapi.RegisterTasksServer(srv, tasks)
		containersapi.RegisterContainersServer(srv, ctrs)
	})
	return &Runtime{opts: Options{Namespace: "test", CallTimeout: 10 * time.Second, Logger: slog.New(slog.NewTextHandler(testLog{t}, nil))}, client: client}
}

// A started container whose task a listing leaves out, and whose exit no
// recorder labelled, has not exited: containerd 2.x leaves out of its task
// list a task whose shim is busy (starting it) past the state timeout,
// and a task created between the listing's two reads is in neither.
// ListContainers and InspectContainer ask for the task again and report
// what the runtime says; a container whose task cannot be asked now is
// Undetermined, not exited; only a task gone without any record is an
// unknown exit (-1). Before, all of these were exits with code -1, and a
// restartPolicy Never pod whose container exited 0 ended Failed.
func TestTasklessStartedContainer(t *testing.T) {
	started := formatTime(time.Date(2026, 11, 29, 3, 23, 32, 0, time.UTC))
	exited := formatTime(time.Date(2026, 11, 29, 3, 23, 33, 0, time.UTC))
	labels := func(extra ...string) map[string]string {
		l := map[string]string{LabelPodUID: "uid", LabelPodName: "p", LabelPodNamespace: "ns", LabelContainerName: "c", labelStartedAt: started}
		for i := 0; i+1 < len(extra); i += 2 {
			l[extra[i]] = extra[i+1]
		}
		return l
	}
	tasks := &fakeTasks{
		tasks: map[string]*tasktypes.Process{
			"running": {ID: "running", Status: tasktypes.Status_RUNNING, Pid: 42},
			"exited0": {ID: "exited0", Status: tasktypes.Status_STOPPED, ExitStatus: 0},
			"busy":    {ID: "busy", Status: tasktypes.Status_RUNNING, Pid: 43},
		},
		// All three are left out of the task list, as containerd 2.x
		// leaves out the task of a shim that did not answer in time.
		hidden: map[string]bool{"running": true, "exited0": true, "busy": true},
		gets: map[string][]error{
			// Still busy when asked again: containerd's state timeout.
			"busy": {status.Error(codes.DeadlineExceeded, "context deadline exceeded")},
		},
		calls: map[string]int{},
	}
	ctrs := &fakeContainers{
		labels: map[string]map[string]string{
			"running":  labels(),
			"exited0":  labels(),
			"busy":     labels(),
			"recorded": labels(), // task deleted: its exit is recorded meanwhile
			"lost":     labels(), // task gone without any record
		},
		onGet: map[string]func(map[string]string){
			"recorded": func(l map[string]string) {
				l[labelExitCode], l[labelFinishedAt], l[labelReason] = "0", exited, ReasonCompleted
			},
		},
	}
	r := serveFakeContainerd(t, tasks, ctrs)
	ctx := context.Background()

	cs, err := r.ListContainers(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]Container{}
	for _, c := range cs {
		got[c.ID] = c
	}
	for _, want := range []struct {
		id           string
		state        State
		code         int32
		undetermined bool
	}{
		{"running", StateRunning, 0, false},
		{"exited0", StateExited, 0, false},
		{"busy", StateUnknown, 0, true},
		{"recorded", StateExited, 0, false},
		{"lost", StateExited, -1, false},
	} {
		c, ok := got[want.id]
		if !ok {
			t.Errorf("%s: not listed", want.id)
			continue
		}
		if c.State != want.state || c.ExitCode != want.code || c.Undetermined != want.undetermined {
			t.Errorf("%s: listed %s (exit code %d, undetermined %v), want %s (exit code %d, undetermined %v)",
				want.id, c.State, c.ExitCode, c.Undetermined, want.state, want.code, want.undetermined)
		}
	}

	// A task whose status containerd answers UNKNOWN (it could not ask
	// the shim: containerd 1.6 on a busy shim) is not in a state either.
	tasks.mu.Lock()
	tasks.tasks["unknown"] = &tasktypes.Process{ID: "unknown", Status: tasktypes.Status_UNKNOWN}
	tasks.mu.Unlock()
	ctrs.mu.Lock()
	ctrs.labels["unknown"] = labels()
	ctrs.mu.Unlock()
	cs, err = r.ListContainers(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cs {
		if c.ID == "unknown" && (c.State != StateUnknown || !c.Undetermined) {
			t.Errorf("a task containerd says UNKNOWN: listed %s, undetermined %v; want unknown, undetermined", c.State, c.Undetermined)
		}
	}
	if c, err := r.InspectContainer(ctx, "unknown"); err == nil {
		t.Errorf("inspecting a task containerd says UNKNOWN: %+v, no error; want an error", c)
	}

	// An inspection that finds no task first (not created yet when asked)
	// and the start recorded in the labels read after it asks again.
	tasks.mu.Lock()
	tasks.gets["late"] = []error{status.Error(codes.NotFound, "task late not found"), nil}
	tasks.tasks["late"] = &tasktypes.Process{ID: "late", Status: tasktypes.Status_RUNNING, Pid: 44}
	tasks.mu.Unlock()
	ctrs.mu.Lock()
	ctrs.labels["late"] = labels()
	ctrs.mu.Unlock()
	if c, err := r.InspectContainer(ctx, "late"); err != nil || c.State != StateRunning {
		t.Errorf("inspecting a container whose task appeared after the first ask: %+v, %v; want running", c, err)
	}
	// One whose task cannot be asked now is an error (asked again
	// later), not an exit.
	tasks.mu.Lock()
	tasks.gets["busy"] = []error{status.Error(codes.NotFound, "task busy not found"), status.Error(codes.DeadlineExceeded, "context deadline exceeded")}
	tasks.mu.Unlock()
	if c, err := r.InspectContainer(ctx, "busy"); err == nil {
		t.Errorf("inspecting a container whose task cannot be asked: %+v, no error; want an error", c)
	}
}

// fakeContainerdClient serves the services register adds on a unix socket
// in a short temporary directory (a socket path has a length limit) and
// returns a containerd client of it; both end with the test.
func fakeContainerdClient(t *testing.T, register func(*grpc.Server)) *containerd.Client {
	t.Helper()
	dir, err := os.MkdirTemp("", "na-ctrd")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	sock := filepath.Join(dir, "containerd.sock")
	lis, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	register(srv)
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	client, err := containerd.New(sock, containerd.WithTimeout(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { client.Close() })
	return client
}
