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
	eventsapi "github.com/containerd/containerd/api/services/events/v1"
	"google.golang.org/grpc"
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
