package pleg

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"reflect"
	goruntime "runtime"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/nodeagent/nodeagent/runtime"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/nodeagent/nodeagent/internal/testing/backofftest"
)

func TestTransition(t *testing.T) {
	const (
		none    = runtime.State("")
		created = runtime.StateCreated
		running = runtime.StateRunning
		exited  = runtime.StateExited
		unknown = runtime.StateUnknown
	)
	tests := []struct {
		old, new runtime.State
		want     []EventType
	}{
		{none, running, []EventType{ContainerStarted}},
		{none, created, []EventType{ContainerChanged}},
		{none, exited, []EventType{ContainerDied}},
		{created, running, []EventType{ContainerStarted}},
		{running, running, nil},
		{running, exited, []EventType{ContainerDied}},
		{running, unknown, []EventType{ContainerChanged}},
		{running, none, []EventType{ContainerDied, ContainerRemoved}},
		{created, none, []EventType{ContainerDied, ContainerRemoved}},
		{exited, none, []EventType{ContainerRemoved}},
		{exited, exited, nil},
	}
	for _, tc := range tests {
		if got := transition(tc.old, tc.new); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("transition(%q, %q) = %v, want %v", tc.old, tc.new, got, tc.want)
		}
	}
}

// runPLEG makes a test PLEG over rt and runs it until stop, which waits
// for Run to return.
func runPLEG(t *testing.T, rt *fakeRuntime, o Options) (p *PLEG, stop func()) {
	t.Helper()
	p = newTestPLEG(t, rt, o)
	ctx, cancel := context.WithCancel(context.Background())
	runDone := make(chan struct{})
	go func() { defer close(runDone); p.Run(ctx) }()
	return p, func() { cancel(); <-runDone }
}

func newTestPLEG(t *testing.T, rt Runtime, opts Options) *PLEG {
	t.Helper()
	if opts.Logger == nil {
		opts.Logger = testLogger(t)
	}
	p, err := New(rt, opts)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestRelistEventSequence(t *testing.T) {
	clk := testingclock.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	rt := newFakeRuntime()
	p := newTestPLEG(t, rt, Options{Clock: clk})
	ctx := context.Background()
	steps := []struct {
		name   string
		change func()
		want   []string
	}{
		{"created", func() { rt.set("a", "p", runtime.StateCreated, 0) }, []string{"ContainerChanged/a"}},
		{"started", func() { rt.set("a", "p", runtime.StateRunning, 0) }, []string{"ContainerStarted/a"}},
		{"no change", func() {}, nil},
		{"exited", func() { rt.set("a", "p", runtime.StateExited, 2) }, []string{"ContainerDied/a"}},
		{"restart: new attempt", func() { rt.set("b", "p", runtime.StateRunning, 0) }, []string{"ContainerStarted/b"}},
		{"old attempt removed", func() { rt.remove("a") }, []string{"ContainerRemoved/a"}},
		{"running container vanishes", func() { rt.remove("b") }, []string{"ContainerDied/b", "ContainerRemoved/b"}},
	}
	for _, s := range steps {
		s.change()
		clk.Step(time.Second)
		if err := p.Relist(ctx); err != nil {
			t.Fatal(err)
		}
		if got := drain(p.Watch()); !reflect.DeepEqual(got, s.want) {
			t.Errorf("%s: events %v, want %v", s.name, got, s.want)
		}
	}
}

func TestRelistDiedCarriesExitCodeAndCache(t *testing.T) {
	synctest.Test(t, testRelistDiedCarriesExitCodeAndCache)
}

func testRelistDiedCarriesExitCodeAndCache(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clk := testingclock.NewFakeClock(t0)
	rt := newFakeRuntime()
	p := newTestPLEG(t, rt, Options{Clock: clk})
	rt.set("a", "p", runtime.StateExited, 42)
	if err := p.Relist(context.Background()); err != nil {
		t.Fatal(err)
	}
	ev := <-p.Watch()
	if ev.Type != ContainerDied || ev.ExitCode == nil || *ev.ExitCode != 42 || ev.Pod != "ns/p" || ev.Container != "c-a" || ev.Source != SourceRelist {
		t.Fatalf("event %+v", ev)
	}
	s, ok := p.Cache().Get("uid-p")
	if !ok || len(s.Containers) != 1 || !s.Timestamp.Equal(t0) {
		t.Fatalf("cache %+v %v", s, ok)
	}
	// GetNewerThan blocks until a newer relist.
	done := make(chan PodStatus, 1)
	go func() {
		s, err := p.Cache().GetNewerThan(context.Background(), "uid-p", t0)
		if err != nil {
			t.Error(err)
		}
		done <- s
	}()
	synctest.Wait() // GetNewerThan waits, or has returned
	select {
	case <-done:
		t.Fatal("GetNewerThan returned a status that is not newer")
	default:
	}
	clk.Step(time.Second)
	rt.remove("a")
	if err := p.Relist(context.Background()); err != nil {
		t.Fatal(err)
	}
	if s := <-done; len(s.Containers) != 0 || !s.Timestamp.Equal(t0.Add(time.Second)) {
		t.Fatalf("newer status %+v", s)
	}
}

func TestExpectationsThroughPLEG(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clk := testingclock.NewFakeClock(t0)
	rt := newFakeRuntime()
	reg := prometheus.NewRegistry()
	p := newTestPLEG(t, rt, Options{Clock: clk, Registerer: reg})
	ctx := context.Background()
	rt.set("B", "p", runtime.StateRunning, 0)
	_ = p.Relist(ctx)
	if got := drain(p.Watch()); !reflect.DeepEqual(got, []string{"ContainerStarted/B"}) {
		t.Fatalf("setup: %v", got)
	}

	// The proposal's example: the worker creates A and expects its start;
	// B dies first; B's death is delivered only after A's start is seen.
	p.ExpectWithin("uid-p", "A", ContainerStarted, time.Minute)
	rt.set("B", "p", runtime.StateExited, 1)
	clk.Step(time.Second)
	_ = p.Relist(ctx)
	if got := drain(p.Watch()); got != nil {
		t.Fatalf("B's death delivered before A's start: %v", got)
	}
	rt.set("A", "p", runtime.StateRunning, 0)
	clk.Step(time.Second)
	_ = p.Relist(ctx)
	if got := drain(p.Watch()); !reflect.DeepEqual(got, []string{"ContainerDied/B"}) {
		t.Fatalf("after A started: %v, want only B's death", got)
	}
	if v := testutil.ToFloat64(p.m.expectations.WithLabelValues("met")); v != 1 {
		t.Fatalf("met = %v", v)
	}

	// An expectation that never comes true expires and releases held events.
	p.ExpectWithin("uid-p", "C", ContainerStarted, 10*time.Second)
	rt.set("A", "p", runtime.StateExited, 0)
	clk.Step(time.Second)
	_ = p.Relist(ctx)
	if got := drain(p.Watch()); got != nil {
		t.Fatalf("held: %v", got)
	}
	clk.Step(10 * time.Second)
	p.tick(ctx)
	if got := drain(p.Watch()); !reflect.DeepEqual(got, []string{"ContainerDied/A"}) {
		t.Fatalf("after expiry: %v", got)
	}
	if v := testutil.ToFloat64(p.m.expectations.WithLabelValues("expired")); v != 1 {
		t.Fatalf("expired = %v", v)
	}
}

func TestHealthy(t *testing.T) { synctest.Test(t, testHealthy) }

func testHealthy(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clk := testingclock.NewFakeClock(t0)
	rt := newFakeRuntime()
	p := newTestPLEG(t, rt, Options{Clock: clk})
	ctx := context.Background()
	if ok, _ := p.Healthy(); !ok {
		t.Fatal("unhealthy at start")
	}
	clk.Step(3*time.Minute + time.Second)
	if ok, _ := p.Healthy(); ok {
		t.Fatal("healthy without ever relisting")
	}
	if err := p.Relist(ctx); err != nil {
		t.Fatal(err)
	}
	if ok, err := p.Healthy(); !ok {
		t.Fatal(err)
	}

	// Failing relists: healthy until the threshold passes.
	rt.listErr = errors.New("containerd down")
	_ = p.Relist(ctx)
	clk.Step(2 * time.Minute)
	_ = p.Relist(ctx)
	if ok, _ := p.Healthy(); !ok {
		t.Fatal("unhealthy before the threshold")
	}
	clk.Step(time.Minute + time.Second)
	if ok, _ := p.Healthy(); ok {
		t.Fatal("healthy after relists failed for longer than the threshold")
	}
	rt.listErr = nil
	_ = p.Relist(ctx)
	if ok, err := p.Healthy(); !ok {
		t.Fatal(err)
	}

	// A hung relist.
	rt.mu.Lock()
	rt.listBlock = make(chan struct{})
	rt.mu.Unlock()
	done := make(chan struct{})
	go func() { _ = p.Relist(ctx); close(done) }()
	synctest.Wait() // the relist waits in ListContainers
	clk.Step(2 * time.Minute)
	if ok, _ := p.Healthy(); !ok {
		t.Fatal("unhealthy before the threshold")
	}
	clk.Step(time.Minute + time.Second)
	if ok, _ := p.Healthy(); ok {
		t.Fatal("healthy while a relist hangs beyond the threshold")
	}
	close(rt.listBlock)
	<-done
	if ok, err := p.Healthy(); !ok {
		t.Fatal(err)
	}
}

func TestHungInspectionDoesNotStallOthers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := newFakeRuntime()
		p := newTestPLEG(t, rt, Options{InspectTimeout: time.Hour})
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		rt.set("slow", "p", runtime.StateRunning, 0)
		rt.set("fast", "q", runtime.StateRunning, 0)
		if err := p.Relist(ctx); err != nil {
			t.Fatal(err)
		}
		drain(p.Watch())
		rt.hang["slow"] = true
		rt.set("slow", "p", runtime.StateExited, 0)
		rt.set("fast", "q", runtime.StateExited, 0)
		p.trigger(ctx, "slow", SourceContainerd, time.Now(), "")
		p.trigger(ctx, "slow", SourceCgroups, time.Now(), "") // coalesced, not a second call
		p.trigger(ctx, "fast", SourceContainerd, time.Now(), "")
		synctest.Wait() // all that can happen without the slow one's answer has happened
		if got := drain(p.Watch()); !reflect.DeepEqual(got, []string{"ContainerDied/fast"}) {
			t.Fatalf("events %v, want the fast container's death despite the hung one", got)
		}
		if ok, err := p.Healthy(); !ok {
			t.Fatal(err)
		}
		if n := rt.inspectCount("slow"); n != 1 {
			t.Fatalf("slow container inspected %d times, want 1 in flight", n)
		}
	})
}

// A failing inspection is retried after 1s, 2s, 4s, 8s, 16s and then left to
// the next relist; a success in between starts the back-off over.
func TestInspectRetryBackoff(t *testing.T) {
	clk := testingclock.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	rt := newFakeRuntime()
	reg := prometheus.NewRegistry()
	p := newTestPLEG(t, rt, Options{Clock: clk, Registerer: reg})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	rt.set("a", "p", runtime.StateRunning, 0)
	boom := errors.New("containerd: deadline exceeded")
	inspected := func() int { return rt.inspectCount("a") }
	inflight := func() bool {
		p.mu.Lock()
		defer p.mu.Unlock()
		return p.inflight["a"] != nil
	}

	rt.inspectErrs["a"] = []error{boom, boom, boom, boom, boom, boom}
	p.trigger(ctx, "a", SourceContainerd, clk.Now(), "")
	s := time.Second
	backofftest.ExpectDelays(t, clk, inspected, 1*s, 2*s, 4*s, 8*s, 16*s)
	backofftest.WaitFor(t, func() bool { return !inflight() }, "the inspection to be given up")
	if n := testutil.ToFloat64(p.m.inspections.WithLabelValues("error")); n != 6 {
		t.Fatalf("%v failed inspections, want 6", n)
	}

	// A success (the runtime still says running while the signal said it
	// exited: recheck in 5ms) resets it.
	rt.inspectErrs["a"] = []error{boom, nil, boom, boom, boom}
	p.trigger(ctx, "a", SourceCgroups, clk.Now(), runtime.StateExited)
	backofftest.ExpectDelays(t, clk, inspected, 1*s, recheckDelay, 1*s, 2*s)
}

func TestFallbackAndRecovery(t *testing.T) { synctest.Test(t, testFallbackAndRecovery) }

func testFallbackAndRecovery(t *testing.T) {
	rt := newFakeRuntime()
	reg := prometheus.NewRegistry()
	p := newTestPLEG(t, rt, Options{Sources: []Source{SourceContainerd}, RelistPeriod: time.Hour,
		FallbackRelistPeriod: 20 * time.Millisecond, Registerer: reg})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go p.Run(ctx)
	rt.events <- runtime.Event{Type: runtime.EventStreamUp}
	synctest.Wait()
	// Five fallback periods: no relist but the one at start and the one
	// after the stream came up.
	time.Sleep(100 * time.Millisecond)
	if n := rt.listCount(); n != 2 || !p.EventMode() {
		t.Fatalf("event mode: %d relists, eventMode %v", n, p.EventMode())
	}
	// A container event triggers an inspection, not a relist.
	rt.set("a", "p", runtime.StateRunning, 0)
	rt.events <- runtime.Event{Type: runtime.EventTaskStart, ContainerID: "a"}
	if ev := <-p.Watch(); ev.Type != ContainerStarted || ev.Source != SourceContainerd {
		t.Fatalf("event %+v", ev)
	}
	if n := rt.listCount(); n != 2 {
		t.Fatalf("%d relists, want none for the event", n)
	}

	rt.events <- runtime.Event{Type: runtime.EventStreamDown, Err: errors.New("broken")}
	synctest.Wait()
	if p.EventMode() {
		t.Fatal("still in event mode after the stream broke")
	}
	n := rt.listCount()
	rt.set("a", "p", runtime.StateExited, 0) // no event: only a relist can see it
	if ev := <-p.Watch(); ev.Type != ContainerDied || ev.Source != SourceRelist {
		t.Fatalf("event %+v", ev)
	}
	time.Sleep(60 * time.Millisecond)
	synctest.Wait()
	if m := rt.listCount(); m < n+3 {
		t.Fatalf("%d relists in 3 fallback periods, want 3", m-n)
	}
	if v := testutil.ToFloat64(p.m.fallbackActive); v != 1 {
		t.Fatalf("fallback_active = %v", v)
	}
	rt.events <- runtime.Event{Type: runtime.EventStreamUp}
	synctest.Wait()
	if !p.EventMode() {
		t.Fatal("not back in event mode after the stream came up")
	}
	if v := testutil.ToFloat64(p.m.fallbacks.WithLabelValues("containerd")); v != 1 {
		t.Fatalf("fallbacks_total = %v", v)
	}
	synctest.Wait()
	n = rt.listCount()
	time.Sleep(time.Minute)
	if m := rt.listCount(); m != n {
		t.Fatalf("still relisting fast after recovery: %d relists in a minute", m-n)
	}
}

func TestEventsHandler(t *testing.T) {
	rt := newFakeRuntime()
	p := newTestPLEG(t, rt, Options{})
	srv := httptest.NewServer(EventsHandler(p))
	defer srv.Close()
	resp, err := http.Get(srv.URL + "?pod=ns/p")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "application/x-ndjson" {
		t.Fatalf("content type %q", ct)
	}
	rt.set("x", "other", runtime.StateRunning, 0)
	rt.set("a", "p", runtime.StateExited, 3)
	if err := p.Relist(context.Background()); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(resp.Body).ReadBytes('\n')
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := json.Unmarshal(line, &got); err != nil {
		t.Fatal(err)
	}
	for k, want := range map[string]any{"pod": "ns/p", "container": "c-a", "containerID": "a", "type": "ContainerDied", "source": "relist", "exitCode": 3.0} {
		if got[k] != want {
			t.Errorf("%s = %v, want %v (line %s)", k, got[k], want, line)
		}
	}
	if _, err := time.Parse(time.RFC3339Nano, got["time"].(string)); err != nil {
		t.Errorf("time: %v", err)
	}
	post, _ := http.Post(srv.URL, "text/plain", nil)
	if post.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("POST: %d", post.StatusCode)
	}
}

func TestOptionsValidate(t *testing.T) {
	err := Options{RelistPeriod: -1, Sources: []Source{"bogus", SourceCgroups, SourceCgroups}}.Validate()
	if err == nil {
		t.Fatal("no error")
	}
	for _, want := range []string{"relistPeriod", "sources[0]", "sources[2]"} {
		if !contains(err.Error(), want) {
			t.Errorf("%q does not mention %s", err, want)
		}
	}
	if _, err := New(newFakeRuntime(), Options{Sources: []Source{"x"}}); err == nil {
		t.Fatal("New accepted invalid options")
	}
}

func contains(s, sub string) bool { return strings.Contains(s, sub) }

func TestCacheLiveInEventMode(t *testing.T) { synctest.Test(t, testCacheLiveInEventMode) }

func testCacheLiveInEventMode(t *testing.T) {
	rt := newFakeRuntime()
	p := newTestPLEG(t, rt, Options{Sources: []Source{SourceContainerd}, RelistPeriod: time.Hour})
	rt.set("a", "p", runtime.StateRunning, 0)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go p.Run(ctx)
	rt.events <- runtime.Event{Type: runtime.EventStreamUp}
	synctest.Wait()
	// No relist is due for an hour, yet the status is current: event mode.
	wctx, wcancel := context.WithTimeout(ctx, 5*time.Second)
	defer wcancel()
	for i := 0; i < 3; i++ {
		min := time.Now()
		s, err := p.Cache().GetNewerThan(wctx, "uid-p", min)
		if err != nil || len(s.Containers) != 1 || !s.Timestamp.After(min) {
			t.Fatalf("GetNewerThan in event mode: %+v, %v", s, err)
		}
	}
	// In fallback mode only a relist makes it newer.
	rt.events <- runtime.Event{Type: runtime.EventStreamDown, Err: errors.New("x")}
	synctest.Wait()
	if p.EventMode() {
		t.Fatal("still in event mode after the stream broke")
	}
	n := rt.listCount()
	if _, err := p.Cache().GetNewerThan(wctx, "uid-p", time.Now()); err != nil {
		t.Fatal(err)
	}
	if rt.listCount() == n {
		t.Fatal("status newer than now without a relist in fallback mode")
	}
}

// A worker waits for its own actions' expected events; WaitExpected returns
// once they are met, with the observation already in the cache.
func TestWaitExpected(t *testing.T) { synctest.Test(t, testWaitExpected) }

func testWaitExpected(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clk := testingclock.NewFakeClock(t0)
	rt := newFakeRuntime()
	p := newTestPLEG(t, rt, Options{Clock: clk, Registerer: prometheus.NewRegistry()})
	ctx := context.Background()
	if err := p.WaitExpected(ctx, "uid-p"); err != nil {
		t.Fatalf("no expectations: %v", err)
	}
	p.ExpectWithin("uid-p", "A", ContainerStarted, time.Minute)
	done := make(chan error, 1)
	go func() { done <- p.WaitExpected(ctx, "uid-p") }()
	synctest.Wait()
	select {
	case err := <-done:
		t.Fatalf("returned before the event: %v", err)
	default:
	}
	rt.set("A", "p", runtime.StateRunning, 0)
	clk.Step(time.Second)
	_ = p.Relist(ctx)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if s, ok := p.Cache().Get("uid-p"); !ok || len(s.Containers) != 1 || s.Containers[0].State != runtime.StateRunning {
		t.Fatalf("cache after WaitExpected: %+v", s)
	}

	// Cancelled while waiting.
	p.ExpectWithin("uid-p", "B", ContainerStarted, time.Minute)
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if err := p.WaitExpected(cctx, "uid-p"); err == nil {
		t.Fatal("want ctx error")
	}
}

// Run returns only after every goroutine it started has ended: the agent
// closes the runtime after Run, and a PLEG goroutine still inspecting (or
// waiting to retry) would use a closed runtime. Runtime calls are bounded by
// Run's context, not only by their own timeouts.
func TestRunStopsItsGoroutines(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		before := plegGoroutines(nil) // other tests' PLEGs still stopping
		rt := newFakeRuntime()
		p := newTestPLEG(t, rt, Options{Sources: []Source{SourceContainerd}, RelistPeriod: time.Hour, InspectTimeout: time.Hour})
		ctx, cancel := context.WithCancel(context.Background())
		runDone := make(chan struct{})
		go func() { defer close(runDone); p.Run(ctx) }()
		rt.events <- runtime.Event{Type: runtime.EventStreamUp}
		// One inspection hangs, one waits to be retried, one is busy for
		// 10ms whatever its context says.
		rt.set("hung", "p", runtime.StateRunning, 0)
		rt.set("failing", "p", runtime.StateRunning, 0)
		rt.set("busy", "p", runtime.StateRunning, 0)
		rt.hang["hung"] = true
		rt.inspectErrs["failing"] = []error{errors.New("boom")}
		for _, id := range []string{"hung", "failing"} {
			rt.events <- runtime.Event{Type: runtime.EventTaskExit, ContainerID: id}
		}
		synctest.Wait()
		if rt.inspectCount("hung") != 1 || rt.inspectCount("failing") != 1 {
			t.Fatalf("inspections: %v", rt.inspects)
		}
		rt.busy["busy"] = 10 * time.Millisecond
		rt.events <- runtime.Event{Type: runtime.EventTaskExit, ContainerID: "busy"}
		time.Sleep(time.Millisecond) // the inspection is under way

		stopping := time.Now()
		cancel()
		<-runDone
		// It waited for the busy inspection, and for nothing else: the hung
		// one and the retry wait ended with ctx, not after their timeouts.
		if d := time.Since(stopping); d != 9*time.Millisecond {
			t.Errorf("Run took %s to stop, want 9ms (the rest of the busy inspection)", d)
		}
		if left := plegGoroutines(before); len(left) > 0 {
			t.Fatalf("Run returned while %d of its goroutines still run:\n%s", len(left), left)
		}
		// Nothing runs on after Run: no inspection starts any more.
		p.trigger(ctx, "failing", SourceContainerd, time.Now(), "")
		if left := plegGoroutines(before); len(left) > 0 {
			t.Fatalf("inspection started after Run returned:\n%s", left)
		}
	})
}

// plegGoroutines returns the stacks of the goroutines running the PLEG's
// code (not the test's, nor the fake runtime's), by goroutine header,
// leaving out those in except.
func plegGoroutines(except map[string]string) map[string]string {
	buf := make([]byte, 1<<20)
	buf = buf[:goruntime.Stack(buf, true)]
	out := map[string]string{}
	for _, g := range strings.Split(string(buf), "\n\n") {
		id, _, _ := strings.Cut(g, " [") // "goroutine 42"
		if _, old := except[id]; old || strings.Contains(g, "nodeagent/pleg.Test") {
			continue
		}
		if strings.Contains(g, "nodeagent/pleg.(*PLEG)") || strings.Contains(g, "nodeagent/pleg.(*cgroupWatcher)") {
			out[id] = g
		}
	}
	return out
}

// An expected event that does not come (its signal lost) makes the PLEG
// inspect that container again at the expiry instead of keeping a stale
// view until the next relist: a removed container is reported removed.
func TestExpiredExpectationReinspects(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := newFakeRuntime()
		p, stop := runPLEG(t, rt, Options{Sources: []Source{SourceContainerd}, RelistPeriod: time.Hour, Registerer: prometheus.NewRegistry()})
		defer stop()
		rt.set("old", "p", runtime.StateExited, 1)
		rt.events <- runtime.Event{Type: runtime.EventStreamUp}
		synctest.Wait()
		if s, _ := p.Cache().Get("uid-p"); len(s.Containers) != 1 {
			t.Fatalf("cache before: %+v", s)
		}
		// Removed without any event reaching the PLEG.
		p.ExpectWithin("uid-p", "old", ContainerRemoved, 10*time.Second)
		rt.remove("old")
		time.Sleep(11 * time.Second)
		synctest.Wait()
		if s, _ := p.Cache().Get("uid-p"); len(s.Containers) != 0 {
			t.Fatalf("the removed container is still in the cache after its expectation expired: %+v", s.Containers)
		}
	})
}

// A TaskOOM that arrives after the TaskExit changes only the exited
// container's reason (Error → OOMKilled); the pod must hear of it, or its
// status keeps the first reason.
func TestLateOOMReasonIsAChange(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := newFakeRuntime()
		p, stop := runPLEG(t, rt, Options{Sources: []Source{SourceContainerd}, RelistPeriod: time.Hour, Registerer: prometheus.NewRegistry()})
		defer stop()
		rt.events <- runtime.Event{Type: runtime.EventStreamUp}
		synctest.Wait()
		setReason := func(reason string) {
			rt.mu.Lock()
			c := rt.containers["a"]
			c.Reason = reason
			rt.containers["a"] = c
			rt.mu.Unlock()
		}
		rt.set("a", "p", runtime.StateExited, 137)
		setReason(runtime.ReasonError)
		rt.events <- runtime.Event{Type: runtime.EventTaskExit, ContainerID: "a"}
		synctest.Wait()
		if ev := <-p.Watch(); ev.Type != ContainerDied {
			t.Fatalf("first event %+v", ev)
		}
		// The same observation again: no event.
		rt.events <- runtime.Event{Type: runtime.EventTaskDelete, ContainerID: "a"}
		synctest.Wait()
		select {
		case ev := <-p.Watch():
			t.Fatalf("an unchanged exited container made an event: %+v", ev)
		default:
		}
		setReason(runtime.ReasonOOMKilled)
		rt.events <- runtime.Event{Type: runtime.EventTaskOOM, ContainerID: "a"}
		synctest.Wait()
		select {
		case ev := <-p.Watch():
			if ev.Type != ContainerChanged || ev.ContainerID != "a" {
				t.Fatalf("event after the late OOM: %+v", ev)
			}
		default:
			t.Fatal("no event after the exited container's reason became OOMKilled")
		}
		if s, _ := p.Cache().Get("uid-p"); len(s.Containers) != 1 || s.Containers[0].Reason != runtime.ReasonOOMKilled {
			t.Fatalf("cache after the late OOM: %+v", s.Containers)
		}
	})
}

// A relist that could not tell a container's state (the runtime lists it
// Undetermined: its shim was busy) changes nothing: the running container
// is neither died nor changed, and it is inspected on its own at once, so
// that its real end (exit 0 here) is what the pod hears. Before, the
// relist's guess became the container's state.
func TestRelistUndeterminedKeepsLastObservation(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := newFakeRuntime()
		p, stop := runPLEG(t, rt, Options{Sources: []Source{SourceContainerd}, RelistPeriod: time.Hour, Registerer: prometheus.NewRegistry()})
		defer stop()
		rt.set("a", "p", runtime.StateRunning, 0)
		rt.events <- runtime.Event{Type: runtime.EventStreamUp}
		synctest.Wait()
		if got := drain(p.Watch()); !reflect.DeepEqual(got, []string{"ContainerStarted/a"}) {
			t.Fatalf("events of the first relist: %v", got)
		}
		// The shim is busy: the listing cannot tell, and so far
		// neither can an inspection.
		rt.mu.Lock()
		rt.undetermined["a"] = true
		rt.inspectErrs["a"] = []error{errors.New("runtime: inspect task a: context deadline exceeded")}
		rt.mu.Unlock()
		before := rt.inspectCount("a")
		rt.events <- runtime.Event{Type: runtime.EventStreamUp} // a relist
		synctest.Wait()
		if got := drain(p.Watch()); len(got) != 0 {
			t.Errorf("events of a relist that could not tell the container's state: %v, want none", got)
		}
		if s, _ := p.Cache().Get("uid-p"); len(s.Containers) != 1 || s.Containers[0].State != runtime.StateRunning {
			t.Errorf("cache after the relist: %+v, want the container still running", s.Containers)
		}
		if rt.inspectCount("a") == before {
			t.Fatal("the container the relist could not tell was not inspected")
		}
		// It exited 0 meanwhile; the inspection's retry (after 1s) says so.
		rt.set("a", "p", runtime.StateExited, 0)
		time.Sleep(2 * time.Second)
		synctest.Wait()
		var died []int32
		for {
			select {
			case ev := <-p.Watch():
				if ev.Type != ContainerDied || ev.ExitCode == nil {
					t.Fatalf("event %+v, want ContainerDied with an exit code", ev)
				}
				died = append(died, *ev.ExitCode)
				continue
			default:
			}
			break
		}
		if !reflect.DeepEqual(died, []int32{0}) {
			t.Errorf("exit codes reported: %v, want [0]", died)
		}
	})
}
