package runtime

import (
	"context"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/containerd/containerd"
	apievents "github.com/containerd/containerd/api/events"
	containersapi "github.com/containerd/containerd/api/services/containers/v1"
	eventsapi "github.com/containerd/containerd/api/services/events/v1"
	"github.com/containerd/containerd/protobuf"
	"github.com/containerd/typeurl/v2"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"k8s.io/utils/clock"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/nodeagent/nodeagent/internal/testing/backofftest"
)

// fakeEvents is containerd's event service with a stream that stays open
// and silent until the server stops.
type fakeEvents struct {
	eventsapi.UnimplementedEventsServer
}

func (fakeEvents) Subscribe(_ *eventsapi.SubscribeRequest, s eventsapi.Events_SubscribeServer) error {
	<-s.Context().Done()
	return s.Context().Err()
}

// serveEvents serves fakeEvents on the unix socket sock until the returned
// function stops it (breaking every stream).
func serveEvents(t *testing.T, sock string) (stop func()) {
	t.Helper()
	lis, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	eventsapi.RegisterEventsServer(srv, fakeEvents{})
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	return srv.Stop
}

type testLog struct{ t testing.TB }

func (w testLog) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// Both event loops (Subscribe's and the exit recorder's) resubscribe after
// 100ms doubling to 5s on the runtime's clock, and from 100ms again once a
// subscription was accepted.
func TestFollowBackoff(t *testing.T) {
	dir, err := os.MkdirTemp("", "na-ev") // short: a unix socket path
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	sock := filepath.Join(dir, "containerd.sock")
	stop := serveEvents(t, sock)
	client, err := containerd.New(sock, containerd.WithTimeout(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { client.Close() })
	clk := testingclock.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	// Built by hand, without New's exit recorder, so that this loop is the
	// only one waiting on the clock.
	r := &Runtime{opts: Options{Namespace: "test", Clock: clk, Logger: slog.New(slog.NewTextHandler(testLog{t}, nil))}, client: client}
	var ups, downs atomic.Int32
	attempts := func() int { return int(ups.Load() + downs.Load()) }
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		r.follow(ctx, eventStream{
			filters: []string{`topic=="/tasks/exit"`},
			up:      func() { ups.Add(1) },
			event:   func(context.Context, *eventsapi.Envelope) {},
			down:    func(error, time.Duration) { downs.Add(1) },
		})
	}()
	backofftest.WaitFor(t, func() bool { return ups.Load() == 1 }, "the first subscription")

	// containerd goes away: the stream breaks, and every attempt fails.
	stop()
	ms := time.Millisecond
	backofftest.ExpectDelays(t, clk, attempts, 100*ms, 200*ms, 400*ms, 800*ms, 1600*ms, 3200*ms, 5000*ms, 5000*ms)

	// It comes back: an attempt (once gRPC has reconnected) is accepted...
	stop = serveEvents(t, sock)
	for i := 0; ups.Load() < 2; i++ {
		if i == 100 {
			t.Fatal("no subscription after containerd came back")
		}
		backofftest.WaitWaiting(t, clk)
		n := attempts()
		clk.Step(5 * time.Second)
		backofftest.WaitFor(t, func() bool { return attempts() > n }, "an attempt")
		time.Sleep(50 * time.Millisecond) // let gRPC reconnect meanwhile
	}
	// ... and when the stream breaks again the back-off starts over.
	stop()
	backofftest.ExpectDelays(t, clk, attempts, 100*ms, 200*ms)
	cancel()
	<-done
}

// scriptedEvents is containerd's event service with a stream that sends
// what the test puts in envelopes; containers is its container service,
// whose Get hangs (as a busy containerd's may) while hang is set and
// answers NotFound otherwise.
type scriptedEvents struct {
	eventsapi.UnimplementedEventsServer
	envelopes chan *eventsapi.Envelope
}

func (s scriptedEvents) Subscribe(_ *eventsapi.SubscribeRequest, srv eventsapi.Events_SubscribeServer) error {
	for {
		select {
		case env := <-s.envelopes:
			if err := srv.Send(env); err != nil {
				return err
			}
		case <-srv.Context().Done():
			return srv.Context().Err()
		}
	}
}

type hangingContainers struct {
	containersapi.UnimplementedContainersServer
	hang  *atomic.Bool
	calls *atomic.Int32
}

func (h hangingContainers) Get(ctx context.Context, _ *containersapi.GetContainerRequest) (*containersapi.GetContainerResponse, error) {
	h.calls.Add(1)
	if h.hang.Load() {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	return nil, status.Error(codes.NotFound, "container not found")
}

// A TaskExit reaches the subscriber as containerd sent it, with the exit
// status, the exit time and the reason the event decides, without a call
// to containerd on the way: the PLEG takes the exit from it (pleg's
// TestTaskExitIsAppliedFromTheEvent), so a call here would be on the path
// of every exit → Succeeded. Before 2026-11-29 the stream recorded the
// exit in the container's labels first (two calls, one a metadata write);
// with containerd's container service hanging, no TaskExit came through.
func TestTaskExitDeliveredWithoutAskingContainerd(t *testing.T) {
	events := scriptedEvents{envelopes: make(chan *eventsapi.Envelope, 10)}
	var hang atomic.Bool
	var calls atomic.Int32
	client := fakeContainerdClient(t, func(srv *grpc.Server) {
		eventsapi.RegisterEventsServer(srv, events)
		containersapi.RegisterContainersServer(srv, hangingContainers{hang: &hang, calls: &calls})
	})
	// Built by hand, without New's exit recorder (which does call
	// containerd, off the subscribers' path); on cgroup v2.
	r := &Runtime{opts: Options{Namespace: "test", Clock: clock.RealClock{}, CallTimeout: time.Minute,
		Logger: slog.New(slog.NewTextHandler(testLog{t}, nil))}, client: client, unified: true}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	out := r.Subscribe(ctx)
	next := func() Event {
		t.Helper()
		select {
		case ev := <-out:
			return ev
		case <-time.After(10 * time.Second):
			t.Fatalf("no event within 10s (containerd's container service called %d times)", calls.Load())
		}
		return Event{}
	}
	if ev := next(); ev.Type != EventStreamUp {
		t.Fatalf("first event %+v", ev)
	}
	exitedAt := time.Date(2026, 11, 29, 5, 30, 0, 123456789, time.UTC)
	send := func(topic string, v any) {
		a, err := typeurl.MarshalAny(v)
		if err != nil {
			t.Fatal(err)
		}
		events.envelopes <- &eventsapi.Envelope{Timestamp: protobuf.ToTimestamp(time.Now()), Namespace: "test", Topic: topic, Event: protobuf.FromAny(a)}
	}
	// A TaskOOM is still recorded as it passes (the container service
	// answers, quickly, that the container is not there).
	send("/tasks/oom", &apievents.TaskOOM{ContainerID: "oom"})
	if ev := next(); ev.Type != EventTaskOOM || ev.ContainerID != "oom" {
		t.Fatalf("event %+v, want the TaskOOM", ev)
	}
	// From here on, any call to containerd's container service hangs.
	hang.Store(true)
	before := calls.Load()
	for _, tc := range []struct {
		id     string
		code   uint32
		reason string
	}{
		{"oom", 137, ReasonOOMKilled}, // its TaskOOM came first
		{"done", 0, ReasonCompleted},  //
		{"failed", 1, ReasonError},    //
		{"killed", 137, ""},           // cgroup v2: maybe an OOM kill whose TaskOOM was lost
		{"oom", 1, ReasonError},       // a later exit of the same ID: the TaskOOM was forgotten at the first
	} {
		send("/tasks/exit", &apievents.TaskExit{ContainerID: tc.id, ID: tc.id, Pid: 42, ExitStatus: tc.code, ExitedAt: protobuf.ToTimestamp(exitedAt)})
		ev := next()
		if ev.Type != EventTaskExit || ev.ContainerID != tc.id || ev.ExitCode != tc.code || !ev.ExitedAt.Equal(exitedAt) || ev.Reason != tc.reason {
			t.Errorf("event %+v, want TaskExit of %s with code %d, exit time %s, reason %q", ev, tc.id, tc.code, exitedAt, tc.reason)
		}
	}
	if n := calls.Load() - before; n != 0 {
		t.Errorf("the stream called containerd's container service %d times for the exits", n)
	}
}
