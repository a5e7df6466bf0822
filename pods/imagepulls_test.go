package pods

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodeagent/nodeagent/internal/testing/testlog"
	"github.com/nodeagent/nodeagent/kubetypes"
	"github.com/nodeagent/nodeagent/pods/status"
)

// pullGate holds each pull of the fake runtime until the test releases its
// image, and counts the pulls in progress.
type pullGate struct {
	t       *testing.T
	mu      sync.Mutex
	active  int
	most    int
	entered chan string
	release map[string]chan struct{}
}

func newPullGate(t *testing.T, rt *fakeRuntime, images ...string) *pullGate {
	g := &pullGate{t: t, entered: make(chan string, len(images)), release: map[string]chan struct{}{}}
	for _, img := range images {
		g.release[img] = make(chan struct{})
	}
	rt.pullHook = g.hook
	t.Cleanup(func() {
		for _, ch := range g.release {
			select {
			case <-ch:
			default:
				close(ch)
			}
		}
	})
	return g
}

func (g *pullGate) hook(_ context.Context, ref string) {
	g.mu.Lock()
	g.active++
	g.most = max(g.most, g.active)
	ch := g.release[ref]
	g.mu.Unlock()
	g.entered <- ref
	<-ch
	g.mu.Lock()
	g.active--
	g.mu.Unlock()
}

// next waits (at most 10s) for a pull to reach the runtime and returns its image.
func (g *pullGate) next() string {
	g.t.Helper()
	select {
	case ref := <-g.entered:
		return ref
	case <-time.After(10 * time.Second):
		g.t.Fatal("no pull reached the runtime within 10s")
		return ""
	}
}

// none checks that no pull reaches the runtime for a while (200ms).
func (g *pullGate) none() {
	g.t.Helper()
	select {
	case ref := <-g.entered:
		g.t.Fatalf("the pull of %s started while it should wait", ref)
	case <-time.After(200 * time.Millisecond):
	}
}

func (g *pullGate) open(ref string) { close(g.release[ref]) }

func (g *pullGate) mostAtOnce() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.most
}

// pullResult is what one pod's ensure returned.
type pullResult struct {
	ref, reason string
	err         error
}

// ensureAsync runs a pod's image ensure (its pod worker's) in a goroutine
// and returns where its result will come; pulled pods share e.deps, so
// their pulls share the node's puller.
func ensureAsync(ctx context.Context, e *workerEnv, name, image string) <-chan pullResult {
	c := ctr("app")
	c.Image = image
	pod := testPod(name, v1.RestartPolicyAlways, c)
	im := newPodImages(e.deps, types.UID("uid-"+name), kubetypes.SourceAPI, testlog.New(e.t))
	out := make(chan pullResult, 1)
	go func() {
		ref, reason, err := im.ensure(ctx, pod, &pod.Spec.Containers[0])
		out <- pullResult{ref, reason, err}
	}()
	return out
}

func waitResult(t *testing.T, ch <-chan pullResult) pullResult {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(10 * time.Second):
		t.Fatal("ensure did not return within 10s")
		return pullResult{}
	}
}

// waitEvent waits (at most 10s) until rec has an event containing want.
func waitEvent(t *testing.T, rec *pullRecorder, want string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		rec.mu.Lock()
		evs := strings.Join(rec.evs, "\n")
		rec.mu.Unlock()
		if strings.Contains(evs, want) {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("no event %q within 10s", want)
}

func pullEnv(t *testing.T, l ImagePullLimits) (*workerEnv, *pullRecorder) {
	e := newWorkerEnv(t)
	rec := &pullRecorder{}
	e.deps.rec = rec
	e.rt.images = map[string]bool{} // nothing present: every image is pulled
	e.deps.puller = newImagePuller(l, e.clk)
	return e, rec
}

// serializeImagePulls: a pull waits for the one in progress, in the order
// they were asked for; the Pulled event gives the pull's own time and the
// time including the wait, as kubelet's does.
func TestImagePullsSerialized(t *testing.T) {
	e, rec := pullEnv(t, ImagePullLimits{Serialize: true, QPS: 0})
	a, b, c := "registry.example.com/a:v1", "registry.example.com/b:v1", "registry.example.com/c:v1"
	g := newPullGate(t, e.rt, a, b, c)
	ctx := context.Background()

	ra := ensureAsync(ctx, e, "a", a)
	if got := g.next(); got != a {
		t.Fatalf("first pull %s, want %s", got, a)
	}
	rb := ensureAsync(ctx, e, "b", b)
	waitEvent(t, rec, fmt.Sprintf("Pulling: Pulling image %q", b))
	rc := ensureAsync(ctx, e, "c", c)
	waitEvent(t, rec, fmt.Sprintf("Pulling: Pulling image %q", c))
	g.none() // b and c wait for a

	e.clk.Step(5 * time.Second)
	g.open(a)
	if r := waitResult(t, ra); r.err != nil {
		t.Fatalf("pull of a: %+v", r)
	}
	if got := g.next(); got != b {
		t.Fatalf("second pull %s, want %s (in the order asked)", got, b)
	}
	g.none() // c waits for b
	e.clk.Step(2 * time.Second)
	g.open(b)
	if r := waitResult(t, rb); r.err != nil {
		t.Fatalf("pull of b: %+v", r)
	}
	if got := g.next(); got != c {
		t.Fatalf("third pull %s, want %s", got, c)
	}
	g.open(c)
	if r := waitResult(t, rc); r.err != nil {
		t.Fatalf("pull of c: %+v", r)
	}
	if n := g.mostAtOnce(); n != 1 {
		t.Errorf("%d pulls at once, want 1", n)
	}
	evs := strings.Join(rec.take(), "\n")
	for _, want := range []string{
		fmt.Sprintf("Pulled: Successfully pulled image %q in 5s (5s including waiting). Image size: 0 bytes.", a),
		fmt.Sprintf("Pulled: Successfully pulled image %q in 2s (7s including waiting). Image size: 0 bytes.", b),
		fmt.Sprintf("Pulled: Successfully pulled image %q in 0s (7s including waiting). Image size: 0 bytes.", c),
	} {
		if !strings.Contains(evs, want) {
			t.Errorf("events lack %q:\n%s", want, evs)
		}
	}
}

// A pull whose pod goes away (its context ends) while it waits for its
// turn is not made.
func TestImagePullWaitCancelled(t *testing.T) {
	e, _ := pullEnv(t, ImagePullLimits{Serialize: true})
	a, b := "registry.example.com/a:v1", "registry.example.com/b:v1"
	g := newPullGate(t, e.rt, a, b)
	ra := ensureAsync(context.Background(), e, "a", a)
	g.next()
	ctx, cancel := context.WithCancel(context.Background())
	rb := ensureAsync(ctx, e, "b", b)
	cancel()
	if r := waitResult(t, rb); !errors.Is(r.err, context.Canceled) || r.reason != status.ReasonErrImagePull {
		t.Fatalf("cancelled waiting pull: %+v, want context canceled, ErrImagePull", r)
	}
	g.open(a)
	waitResult(t, ra)
	g.none()
	if e.rt.pulls != 1 {
		t.Errorf("%d pulls, want 1 (the cancelled one not made)", e.rt.pulls)
	}
}

// maxParallelImagePulls 2: at most two pulls at once; a third starts when
// one ends. Without a bound, all three run at once.
func TestImagePullsParallel(t *testing.T) {
	for _, tc := range []struct {
		limits ImagePullLimits
		most   int
	}{
		{ImagePullLimits{MaxParallel: 2}, 2},
		{ImagePullLimits{}, 3},
	} {
		t.Run(fmt.Sprintf("maxParallel %d", tc.limits.MaxParallel), func(t *testing.T) {
			e, _ := pullEnv(t, tc.limits)
			imgs := []string{"registry.example.com/a:v1", "registry.example.com/b:v1", "registry.example.com/c:v1"}
			g := newPullGate(t, e.rt, imgs...)
			var results []<-chan pullResult
			started := map[string]bool{}
			for i, img := range imgs {
				results = append(results, ensureAsync(context.Background(), e, fmt.Sprintf("p%d", i), img))
			}
			for range tc.most {
				started[g.next()] = true
			}
			g.none() // with a bound of 2, the third waits
			var first string
			for _, img := range imgs {
				if started[img] {
					first = img
					break
				}
			}
			g.open(first)
			if tc.most == 2 {
				started[g.next()] = true // the third, now that one ended
			}
			if len(started) != 3 {
				t.Fatalf("started %v, want all three", started)
			}
			for _, img := range imgs {
				if img != first {
					g.open(img)
				}
			}
			for _, ch := range results {
				if r := waitResult(t, ch); r.err != nil {
					t.Errorf("pull: %+v", r)
				}
			}
			if n := g.mostAtOnce(); n != tc.most {
				t.Errorf("%d pulls at once, want %d", n, tc.most)
			}
		})
	}
}

// registryPullQPS 1, registryBurst 1: a second pull right after the first
// fails at once with kubelet's error, and its pod waits with ErrImagePull,
// then ImagePullBackOff; after the back-off the refilled bucket lets it
// through.
func TestImagePullQPSExceeded(t *testing.T) {
	e, rec := pullEnv(t, ImagePullLimits{Serialize: true, QPS: 1, Burst: 1})
	ca, cb := ctr("a"), ctr("b")
	ca.Image, cb.Image = "registry.example.com/a:v1", "registry.example.com/b:v1"
	pa, pb := testPod("qps-a", v1.RestartPolicyAlways, ca), testPod("qps-b", v1.RestartPolicyAlways, cb)
	wa, wb := e.worker(pa, kubetypes.SourceAPI), e.worker(pb, kubetypes.SourceAPI)
	e.settle(wa)
	if e.rt.pulls != 1 || len(e.rt.running()) != 1 {
		t.Fatalf("first pod: %d pulls, running %v", e.rt.pulls, e.rt.running())
	}
	rec.take()
	waiting := func() *v1.ContainerStateWaiting {
		t.Helper()
		cs := e.lastStatus(pb.UID).ContainerStatuses
		if len(cs) != 1 || cs[0].State.Waiting == nil {
			t.Fatalf("statuses %+v", cs)
		}
		return cs[0].State.Waiting
	}
	e.sync(wb)
	if e.rt.pulls != 1 {
		t.Fatalf("%d pulls; the second should not reach the runtime", e.rt.pulls)
	}
	if wt := waiting(); wt.Reason != status.ReasonErrImagePull || wt.Message != "pull QPS exceeded" {
		t.Fatalf("waiting %+v, want ErrImagePull: pull QPS exceeded", wt)
	}
	evs := strings.Join(rec.take(), "\n")
	for _, want := range []string{
		`Pulling: Pulling image "registry.example.com/b:v1"`,
		`Failed: Failed to pull image "registry.example.com/b:v1": pull QPS exceeded`,
		"Failed: Error: ErrImagePull",
	} {
		if !strings.Contains(evs, want) {
			t.Errorf("events lack %q:\n%s", want, evs)
		}
	}
	e.clk.Step(time.Second)
	e.sync(wb)
	want := `Back-off pulling image "registry.example.com/b:v1": ErrImagePull: pull QPS exceeded`
	if wt := waiting(); wt.Reason != status.ReasonImagePullBackOff || wt.Message != want {
		t.Fatalf("waiting %+v, want ImagePullBackOff %q", wt, want)
	}
	e.clk.Step(9 * time.Second) // the 10s back-off is over
	e.settle(wb)
	if e.rt.pulls != 2 || len(e.rt.running()) != 2 {
		t.Fatalf("after the back-off: %d pulls, running %v", e.rt.pulls, e.rt.running())
	}
}
