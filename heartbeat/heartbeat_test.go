package heartbeat

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/utils/clock"
	testingclock "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
)

const node = "n1"

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// hangingLeases blocks Get/Create/Update until the attempt's context ends
// while hang is set, like a dead connection.
type hangingLeases struct {
	LeaseClient
	hang atomic.Bool
	// slow, when set, delays every answer by this long on clock (a slow
	// API server or link).
	slow  atomic.Int64
	clock *testingclock.FakeClock
}

func (h *hangingLeases) wait(ctx context.Context) error {
	if h.hang.Load() {
		<-ctx.Done()
		return ctx.Err()
	}
	if d := time.Duration(h.slow.Load()); d > 0 {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-h.clock.After(d):
		}
	}
	return nil
}
func (h *hangingLeases) Get(ctx context.Context, n string, o metav1.GetOptions) (*coordinationv1.Lease, error) {
	if err := h.wait(ctx); err != nil {
		return nil, err
	}
	return h.LeaseClient.Get(ctx, n, o)
}
func (h *hangingLeases) Update(ctx context.Context, l *coordinationv1.Lease, o metav1.UpdateOptions) (*coordinationv1.Lease, error) {
	if err := h.wait(ctx); err != nil {
		return nil, err
	}
	return h.LeaseClient.Update(ctx, l, o)
}
func (h *hangingLeases) Patch(ctx context.Context, n string, pt types.PatchType, data []byte, o metav1.PatchOptions, sub ...string) (*coordinationv1.Lease, error) {
	if err := h.wait(ctx); err != nil {
		return nil, err
	}
	return h.LeaseClient.Patch(ctx, n, pt, data, o, sub...)
}

// prependWrites makes fn answer the Lease writes that renew it (update and
// patch) before the tracker does.
func prependWrites(cs *fake.Clientset, fn clienttesting.ReactionFunc) {
	cs.PrependReactor("update", "leases", fn)
	cs.PrependReactor("patch", "leases", fn)
}

type fixture struct {
	cs       *fake.Clientset
	clock    *testingclock.FakeClock
	leases   *hangingLeases
	c        *Controller
	reg      *prometheus.Registry
	failures atomic.Int32
	timers   *timerRecorder
}

// timerRecorder is the fake clock as the controller sees it, noting the
// clock's time at every AfterFunc: each renewal attempt arms one when it
// starts, so these are the attempts' start times on the injected clock,
// whatever the scheduler does before the write reaches the fake client.
type timerRecorder struct {
	*testingclock.FakeClock
	mu sync.Mutex
	at []time.Time
}

func (r *timerRecorder) AfterFunc(d time.Duration, f func()) clock.Timer {
	r.mu.Lock()
	r.at = append(r.at, r.Now())
	r.mu.Unlock()
	return r.FakeClock.AfterFunc(d, f)
}

// since returns the AfterFunc times at or after start, as offsets.
func (r *timerRecorder) since(start time.Time) []time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []time.Duration
	for _, t := range r.at {
		if !t.Before(start) {
			out = append(out, t.Sub(start))
		}
	}
	return out
}

func newFixture(t *testing.T, withNode bool, objs ...runtime.Object) *fixture {
	t.Helper()
	if withNode {
		objs = append(objs, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node, UID: "uid-1"}})
	}
	f := &fixture{cs: fake.NewClientset(objs...), clock: testingclock.NewFakeClock(t0), reg: prometheus.NewRegistry()}
	f.leases = &hangingLeases{LeaseClient: f.cs.CoordinationV1().Leases(Namespace), clock: f.clock}
	f.timers = &timerRecorder{FakeClock: f.clock}
	c, err := New(Options{
		NodeName: node, Leases: f.leases, Nodes: f.cs.CoreV1().Nodes(), Clock: f.timers,
		Metrics: NewMetrics(f.reg), OnRepeatedFailure: func() { f.failures.Add(1) },
	})
	if err != nil {
		t.Fatal(err)
	}
	f.c = c
	return f
}

func (f *fixture) lease(t *testing.T) *coordinationv1.Lease {
	t.Helper()
	l, err := f.cs.CoordinationV1().Leases(Namespace).Get(context.Background(), node, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func TestSyncCreatesLeaseWithOwner(t *testing.T) {
	f := newFixture(t, true)
	if err := f.c.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	l := f.lease(t)
	if *l.Spec.HolderIdentity != node || *l.Spec.LeaseDurationSeconds != 40 || !l.Spec.RenewTime.Time.Equal(t0) {
		t.Errorf("lease spec = %+v", l.Spec)
	}
	want := metav1.OwnerReference{APIVersion: "v1", Kind: "Node", Name: node, UID: "uid-1"}
	if len(l.OwnerReferences) != 1 || l.OwnerReferences[0] != want {
		t.Errorf("owner references = %+v, want %+v", l.OwnerReferences, want)
	}
	if st := f.c.Status(); !st.LastRenew.Equal(t0) || st.LastError != nil {
		t.Errorf("status = %+v", st)
	}
}

func TestOwnerAddedOnceNodeExists(t *testing.T) {
	f := newFixture(t, false)
	if err := f.c.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	if refs := f.lease(t).OwnerReferences; len(refs) != 0 {
		t.Fatalf("owner references without a node: %+v", refs)
	}
	if _, err := f.cs.CoreV1().Nodes().Create(context.Background(), &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node, UID: "uid-2"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	f.clock.Step(10 * time.Second)
	if err := f.c.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	l := f.lease(t)
	if len(l.OwnerReferences) != 1 || l.OwnerReferences[0].UID != "uid-2" {
		t.Errorf("owner references = %+v", l.OwnerReferences)
	}
	if !l.Spec.RenewTime.Time.Equal(t0.Add(10 * time.Second)) {
		t.Errorf("renewTime = %v", l.Spec.RenewTime)
	}
}

func TestSyncRecoversWithinOneRenewal(t *testing.T) {
	gr := schema.GroupResource{Group: "coordination.k8s.io", Resource: "leases"}
	for _, tc := range []struct {
		desc     string
		failures []error // returned by the next updates, in order
		wantErr  bool
		wantGets int // GETs after the initial create
	}{
		{desc: "conflict patches without reading", failures: []error{apierrors.NewConflict(gr, node, errors.New("stale"))}, wantGets: 0},
		{desc: "deleted lease is re-created", failures: []error{apierrors.NewNotFound(gr, node)}, wantGets: 1},
		{desc: "transient error retries with the cached lease", failures: []error{errors.New("connection reset")}, wantGets: 0},
		{desc: "five failures give up", failures: []error{errors.New("e1"), errors.New("e2"), errors.New("e3"), errors.New("e4"), errors.New("e5")}, wantErr: true},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			f := newFixture(t, true)
			if err := f.c.Sync(context.Background()); err != nil {
				t.Fatal(err)
			}
			if tc.desc == "deleted lease is re-created" {
				if err := f.cs.CoordinationV1().Leases(Namespace).Delete(context.Background(), node, metav1.DeleteOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			var mu sync.Mutex
			queue := append([]error(nil), tc.failures...)
			prependWrites(f.cs, func(clienttesting.Action) (bool, runtime.Object, error) {
				mu.Lock()
				defer mu.Unlock()
				if len(queue) == 0 {
					return false, nil, nil
				}
				err := queue[0]
				queue = queue[1:]
				if apierrors.IsNotFound(err) {
					return false, nil, nil // let the tracker answer: the lease is really gone
				}
				return true, nil, err
			})
			f.cs.ClearActions()
			f.clock.Step(10 * time.Second)
			done := make(chan error)
			go func() { done <- f.c.Sync(context.Background()) }()
			err := stepUntil(t, f.clock, done)
			if (err != nil) != tc.wantErr {
				t.Fatalf("Sync() = %v, wantErr %v", err, tc.wantErr)
			}
			gets := 0
			for _, a := range f.cs.Actions() {
				if a.GetVerb() == "get" && a.GetResource().Resource == "leases" {
					gets++
				}
			}
			if gets != tc.wantGets {
				t.Errorf("lease GETs = %d, want %d", gets, tc.wantGets)
			}
			if !tc.wantErr && !f.lease(t).Spec.RenewTime.Time.After(t0) {
				t.Errorf("renewTime not advanced")
			}
			if tc.wantErr {
				if got := testutil.ToFloat64(f.c.metrics.failures); got != 1 {
					t.Errorf("failures metric = %v", got)
				}
				// Transport errors: after every attempt.
				if f.failures.Load() != 5 {
					t.Errorf("OnRepeatedFailure called %d times, want 5 (every unanswered attempt)", f.failures.Load())
				}
			}
		})
	}
}

// stepUntil advances the fake clock whenever something waits on it, until
// done delivers.
func stepUntil(t *testing.T, c *testingclock.FakeClock, done <-chan error) error {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case err := <-done:
			return err
		default:
		}
		// Step only while the code under test waits on the clock, and give
		// it real time to run between steps.
		if c.HasWaiters() {
			c.Step(50 * time.Millisecond)
		}
		time.Sleep(time.Millisecond)
	}
	t.Fatal("Sync did not return")
	return nil
}

func TestHungAPIServerRenewalFitsInInterval(t *testing.T) {
	f := newFixture(t, true)
	if err := f.c.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	f.leases.hang.Store(true)
	start := f.clock.Now()
	done := make(chan error)
	go func() { done <- f.c.Sync(context.Background()) }()
	err := stepUntil(t, f.clock, done)
	if err == nil || !errors.Is(err, errAttemptTimeout) {
		t.Fatalf("Sync() = %v, want attempt timeouts", err)
	}
	if took := f.clock.Since(start); took > RenewInterval(DefaultLeaseDuration)+100*time.Millisecond {
		t.Errorf("a renewal against a hung apiserver took %s, more than the %s renew interval", took, RenewInterval(DefaultLeaseDuration))
	}
	// Two attempts of half an interval each: the second on a fresh
	// connection (OnRepeatedFailure after the first timeout).
	if got := testutil.ToFloat64(f.c.metrics.attempts.WithLabelValues("timeout")); got != 2 {
		t.Errorf("timeout attempts = %v, want 2", got)
	}
	if f.failures.Load() == 0 {
		t.Error("idle connections were never closed")
	}
	st := f.c.Status()
	// One failed renewal must not make the node look dead.
	if err := st.RenewedWithin(f.clock.Now(), DefaultLeaseDuration); err != nil {
		t.Errorf("RenewedWithin: %v (last success was %s ago)", err, f.clock.Since(st.LastRenew))
	}
	if st.LastError == nil {
		t.Error("Status().LastError is nil after a failed renewal")
	}
	if err := st.LoopAlive(f.clock.Now(), time.Second); err != nil {
		t.Errorf("LoopAlive: %v", err)
	}
	// The apiserver comes back: the next renewal succeeds.
	f.leases.hang.Store(false)
	if err := f.c.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
}

func TestRunCadenceAndLiveDurationChange(t *testing.T) {
	f := newFixture(t, true)
	f.c.jitter = 0
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	renewals := make(chan time.Time, 100)
	f.cs.PrependReactor("*", "leases", func(a clienttesting.Action) (bool, runtime.Object, error) {
		if a.GetVerb() == "update" || a.GetVerb() == "create" {
			renewals <- f.clock.Now()
		}
		return false, nil, nil
	})
	go f.c.Run(ctx)
	next := func() time.Time {
		t.Helper()
		select {
		case ts := <-renewals:
			// Wait for the renewal to finish, so that the clock's next waiter
			// is Run's timer and not the attempt's timeout.
			for !f.c.Status().LastAttempt.Equal(ts) {
				time.Sleep(time.Millisecond)
			}
			return ts
		case <-time.After(5 * time.Second):
			t.Fatal("no renewal")
		}
		return time.Time{}
	}
	waitTimer := func() {
		for !f.clock.HasWaiters() {
			time.Sleep(time.Millisecond)
		}
	}
	if got := next(); !got.Equal(t0) {
		t.Fatalf("first renewal at %v, want at start", got)
	}
	for i := 1; i <= 3; i++ {
		waitTimer()
		f.clock.Step(10 * time.Second)
		if got := next(); got.Sub(t0) != time.Duration(i)*10*time.Second {
			t.Fatalf("renewal %d at +%s, want +%ds", i, got.Sub(t0), i*10)
		}
	}
	waitTimer()
	// Change the duration 1s into an interval, so that the renewal it
	// triggers is told apart from the previous one by its time.
	f.clock.Step(time.Second)
	f.c.SetLeaseDuration(60 * time.Second)
	changedAt := next() // renewed at once with the new duration
	if changedAt.Sub(t0) != 31*time.Second {
		t.Fatalf("renewal after change at +%s", changedAt.Sub(t0))
	}
	waitTimer()
	f.clock.Step(10 * time.Second)
	select {
	case ts := <-renewals:
		t.Fatalf("renewed at +%s, 10s after a change to a 15s interval", ts.Sub(t0))
	case <-time.After(50 * time.Millisecond):
	}
	f.clock.Step(5 * time.Second)
	if got := next(); got.Sub(changedAt) != 15*time.Second {
		t.Fatalf("renewal %s after the change, want 15s", got.Sub(changedAt))
	}
	if d := *f.lease(t).Spec.LeaseDurationSeconds; d != 60 {
		t.Errorf("leaseDurationSeconds = %d, want 60", d)
	}
}

func TestNextWait(t *testing.T) {
	for _, tc := range []struct {
		desc     string
		took     time.Duration
		interval time.Duration
		jitter   float64
		want     time.Duration
	}{
		{"fast renewal", 5 * time.Millisecond, 10 * time.Second, 0, 10*time.Second - 5*time.Millisecond},
		{"jitter stretches", 0, 10 * time.Second, 0.04, 10*time.Second + 400*time.Millisecond},
		{"slow renewal does not drift", 3 * time.Second, 10 * time.Second, 0, 7 * time.Second},
		{"overrun renews at once", 12 * time.Second, 10 * time.Second, 0, 0},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			if got := NextWait(t0, t0.Add(tc.took), tc.interval, tc.jitter); got != tc.want {
				t.Errorf("NextWait = %s, want %s", got, tc.want)
			}
		})
	}
}

func TestAttemptTimeout(t *testing.T) {
	for _, tc := range []struct {
		interval time.Duration
		want     time.Duration
	}{
		{10 * time.Second, 5 * time.Second},
		{15 * time.Second, 7500 * time.Millisecond},
		{time.Second, 500 * time.Millisecond},
	} {
		if got := AttemptTimeout(tc.interval); got != tc.want {
			t.Errorf("AttemptTimeout(%s) = %s, want %s", tc.interval, got, tc.want)
		}
	}
}

func TestStatusChecks(t *testing.T) {
	now := t0.Add(time.Minute)
	for _, tc := range []struct {
		desc      string
		st        Status
		renewedOK bool
		aliveOK   bool
	}{
		{"never ran", Status{}, false, true},
		{"fresh", Status{LastRenew: now.Add(-5 * time.Second), LastAttempt: now.Add(-5 * time.Second)}, true, true},
		{"failing but looping", Status{LastRenew: now.Add(-50 * time.Second), LastAttempt: now.Add(-2 * time.Second), LastError: fmt.Errorf("refused")}, false, true},
		{"wedged", Status{LastRenew: now.Add(-50 * time.Second), LastAttempt: now.Add(-50 * time.Second)}, false, false},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			if err := tc.st.RenewedWithin(now, 40*time.Second); (err == nil) != tc.renewedOK {
				t.Errorf("RenewedWithin = %v", err)
			}
			if err := tc.st.LoopAlive(now, 30*time.Second); (err == nil) != tc.aliveOK {
				t.Errorf("LoopAlive = %v", err)
			}
		})
	}
}

// Live: with a 40s lease (10s interval) the loop is wedged after 31s
// without a finished attempt, and never came up after 21s without a first.
func TestStatusLive(t *testing.T) {
	started := t0
	const d = 40 * time.Second
	for _, tc := range []struct {
		desc  string
		st    Status
		after time.Duration // since started
		ok    bool
	}{
		{"starting", Status{LeaseDuration: d}, 20 * time.Second, true},
		{"first renewal overdue", Status{LeaseDuration: d}, 22 * time.Second, false},
		{"failing but looping", Status{LeaseDuration: d, LastAttempt: t0.Add(time.Minute), LastError: fmt.Errorf("refused")}, time.Minute + 30*time.Second, true},
		{"wedged", Status{LeaseDuration: d, LastRenew: t0.Add(time.Minute), LastAttempt: t0.Add(time.Minute)}, time.Minute + 32*time.Second, false},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			if err := tc.st.Live(started.Add(tc.after), started); (err == nil) != tc.ok {
				t.Errorf("Live = %v, want ok %v", err, tc.ok)
			}
		})
	}
}

// A registration renews at once only a Lease that still lacks its owner:
// one created with its owner (the first renewal came after the Node) keeps
// its cadence.
func TestNodeRegisteredRenewsOnlyAnOwnerlessLease(t *testing.T) {
	for _, tc := range []struct {
		name      string
		nodeFirst bool // the Node exists before the first renewal
		wantNow   bool // NodeRegistered renews at once
	}{
		{"lease created before the node", false, true},
		{"lease created with its owner", true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, tc.nodeFirst)
			f.c.jitter = 0
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			renewals := make(chan time.Time, 100)
			f.cs.PrependReactor("*", "leases", func(a clienttesting.Action) (bool, runtime.Object, error) {
				if a.GetVerb() == "update" || a.GetVerb() == "create" {
					renewals <- f.clock.Now()
				}
				return false, nil, nil
			})
			done := make(chan struct{})
			go func() { defer close(done); f.c.Run(ctx) }()
			select {
			case <-renewals:
			case <-time.After(5 * time.Second):
				t.Fatal("no first renewal")
			}
			for !f.clock.HasWaiters() {
				time.Sleep(time.Millisecond)
			}
			if !tc.nodeFirst {
				if _, err := f.cs.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node, UID: "uid-3"}}, metav1.CreateOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			f.c.NodeRegistered()
			select {
			case <-renewals:
				if !tc.wantNow {
					t.Fatal("an owned Lease was renewed off its cadence")
				}
				cancel()
				<-done
				if refs := f.lease(t).OwnerReferences; len(refs) != 1 || refs[0].UID != "uid-3" {
					t.Errorf("owner references = %+v", refs)
				}
			case <-time.After(200 * time.Millisecond):
				if tc.wantNow {
					t.Fatal("an ownerless Lease was not renewed at the registration")
				}
			}
		})
	}
}

func TestRetriesAreSpreadOverTheInterval(t *testing.T) {
	gr := schema.GroupResource{Group: "coordination.k8s.io", Resource: "leases"}
	refused := errors.New("connect: connection refused")
	for _, tc := range []struct {
		desc     string
		failures []error
		// want is when each write attempt starts, after the renewal's start.
		want []time.Duration
	}{
		{desc: "refused while the API server is down: one attempt per 2s slot",
			failures: []error{refused, refused, refused, refused, refused},
			want:     []time.Duration{0, 2 * time.Second, 4 * time.Second, 6 * time.Second, 8 * time.Second}},
		{desc: "API server back after 5s: renewed in the next slot",
			failures: []error{refused, refused, refused},
			want:     []time.Duration{0, 2 * time.Second, 4 * time.Second, 6 * time.Second}},
		{desc: "a conflict is retried at once",
			failures: []error{apierrors.NewConflict(gr, node, errors.New("stale"))},
			want:     []time.Duration{0, 100 * time.Millisecond}},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			f := newFixture(t, true)
			if err := f.c.Sync(context.Background()); err != nil {
				t.Fatal(err)
			}
			f.clock.Step(10 * time.Second)
			start := f.clock.Now()
			var mu sync.Mutex
			queue := append([]error(nil), tc.failures...)
			prependWrites(f.cs, func(clienttesting.Action) (bool, runtime.Object, error) {
				mu.Lock()
				defer mu.Unlock()
				if len(queue) == 0 {
					return false, nil, nil
				}
				err := queue[0]
				queue = queue[1:]
				return true, nil, err
			})
			done := make(chan error)
			go func() { done <- f.c.Sync(context.Background()) }()
			_ = stepUntil(t, f.clock, done)
			// The Node's UID is known from the first Sync, so every
			// AfterFunc of this one is an attempt's timer.
			at := f.timers.since(start)
			if len(at) != len(tc.want) {
				t.Fatalf("write attempts at %v, want %v", at, tc.want)
			}
			for i := range at {
				// stepUntil advances the clock 50ms at a time.
				if at[i] < tc.want[i] || at[i] > tc.want[i]+50*time.Millisecond {
					t.Errorf("attempt %d at +%s, want +%s (all: %v)", i+1, at[i], tc.want[i], at)
				}
			}
		})
	}
}

// An API server that takes 3s per answer (issue 15's latency fault: 2s per
// response, plus a new connection's handshake) still gets the Lease renewed,
// at the first attempt.
func TestSlowAPIServerStillRenews(t *testing.T) {
	f := newFixture(t, true)
	if err := f.c.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	f.leases.slow.Store(int64(3 * time.Second))
	f.clock.Step(10 * time.Second)
	start := f.clock.Now()
	done := make(chan error)
	go func() { done <- f.c.Sync(context.Background()) }()
	if err := stepUntil(t, f.clock, done); err != nil {
		t.Fatalf("Sync against a 3s API server: %v", err)
	}
	if got := f.lease(t).Spec.RenewTime.Time; got.Before(start) {
		t.Errorf("renewTime %v not advanced", got)
	}
	if got := testutil.ToFloat64(f.c.metrics.attempts.WithLabelValues("timeout")); got != 0 {
		t.Errorf("%v attempts timed out, want 0", got)
	}
}

func TestOnRepeatedFailure(t *testing.T) {
	gr := schema.GroupResource{Group: "coordination.k8s.io", Resource: "leases"}
	for _, tc := range []struct {
		desc     string
		failures []error
		want     int32
	}{
		{"a lost connection closes connections at once", []error{errors.New("http2: client connection lost")}, 1},
		{"one API error does not", []error{apierrors.NewInternalError(errors.New("etcd"))}, 0},
		{"a second API error does", []error{apierrors.NewInternalError(errors.New("etcd")), apierrors.NewServiceUnavailable("x")}, 1},
		{"a conflict is answered, not a connection problem", []error{apierrors.NewConflict(gr, node, errors.New("stale"))}, 0},
		{"two conflicts in a row are not either", []error{apierrors.NewConflict(gr, node, errors.New("stale")), apierrors.NewConflict(gr, node, errors.New("stale"))}, 0},
		{"a timeout then AlreadyExists closes once", []error{errors.New("context deadline exceeded"), apierrors.NewAlreadyExists(gr, node)}, 1},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			f := newFixture(t, true)
			if err := f.c.Sync(context.Background()); err != nil {
				t.Fatal(err)
			}
			var mu sync.Mutex
			queue := append([]error(nil), tc.failures...)
			prependWrites(f.cs, func(clienttesting.Action) (bool, runtime.Object, error) {
				mu.Lock()
				defer mu.Unlock()
				if len(queue) == 0 {
					return false, nil, nil
				}
				err := queue[0]
				queue = queue[1:]
				return true, nil, err
			})
			f.clock.Step(10 * time.Second)
			done := make(chan error)
			go func() { done <- f.c.Sync(context.Background()) }()
			if err := stepUntil(t, f.clock, done); err != nil {
				t.Fatal(err)
			}
			if got := f.failures.Load(); got != tc.want {
				t.Errorf("OnRepeatedFailure called %d times, want %d", got, tc.want)
			}
		})
	}
}

// slowCreate makes the first Create of a Lease fail as a slow API server
// makes it fail: it hangs until the attempt times out (lost: the Lease is
// not created), or it creates the Lease and then loses the answer (written:
// the Lease exists, the client saw a timeout).
type slowCreate struct {
	LeaseClient
	written bool
	calls   atomic.Int32
}

func (s *slowCreate) Create(ctx context.Context, l *coordinationv1.Lease, o metav1.CreateOptions) (*coordinationv1.Lease, error) {
	if s.calls.Add(1) > 1 {
		return s.LeaseClient.Create(ctx, l, o)
	}
	if s.written {
		if _, err := s.LeaseClient.Create(ctx, l, o); err != nil {
			return nil, err
		}
	}
	<-ctx.Done()
	return nil, ctx.Err()
}

// Creating the Lease takes three requests (read the Lease, read the Node,
// create). Against a slow API server they may not fit into one attempt; the
// next attempt must resume with the create, not start over, or a node under
// load never gets its Lease.
func TestLeaseCreationResumesAfterATimeout(t *testing.T) {
	for _, tc := range []struct {
		desc        string
		written     bool // the timed-out create was carried out
		wantCreates int32
		wantGets    int // of the Lease
	}{
		{"create lost", false, 2, 1},
		{"create carried out, answer lost", true, 2, 2}, // AlreadyExists, then read and update
	} {
		t.Run(tc.desc, func(t *testing.T) {
			f := newFixture(t, true)
			sc := &slowCreate{LeaseClient: f.cs.CoordinationV1().Leases(Namespace), written: tc.written}
			c, err := New(Options{NodeName: node, Leases: sc, Nodes: f.cs.CoreV1().Nodes(), Clock: f.clock})
			if err != nil {
				t.Fatal(err)
			}
			done := make(chan error)
			go func() { done <- c.Sync(context.Background()) }()
			if err := stepUntil(t, f.clock, done); err != nil {
				t.Fatalf("Sync() = %v", err)
			}
			if got := sc.calls.Load(); got != tc.wantCreates {
				t.Errorf("creates = %d, want %d", got, tc.wantCreates)
			}
			var leaseGets, nodeGets int
			for _, a := range f.cs.Actions() {
				if a.GetVerb() == "get" && a.GetResource().Resource == "leases" {
					leaseGets++
				}
				if a.GetVerb() == "get" && a.GetResource().Resource == "nodes" {
					nodeGets++
				}
			}
			if leaseGets != tc.wantGets {
				t.Errorf("lease GETs = %d, want %d", leaseGets, tc.wantGets)
			}
			if nodeGets != 1 {
				t.Errorf("node GETs = %d, want 1 (its UID is kept between attempts)", nodeGets)
			}
			l := f.lease(t)
			if len(l.OwnerReferences) != 1 || l.OwnerReferences[0].UID != "uid-1" {
				t.Errorf("owner references = %+v", l.OwnerReferences)
			}
			if !c.Status().LastRenew.After(t0) {
				t.Errorf("renewal not recorded: %+v", c.Status())
			}
		})
	}
}

// A deleted Lease (the garbage collector deletes a deleted Node's Lease) is
// re-created with the owner read again, not with a remembered UID.
func TestRecreatedLeaseRereadsTheNode(t *testing.T) {
	f := newFixture(t, true)
	ctx := context.Background()
	if err := f.c.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if err := f.cs.CoreV1().Nodes().Delete(ctx, node, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.cs.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node, UID: "uid-new"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := f.cs.CoordinationV1().Leases(Namespace).Delete(ctx, node, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	f.clock.Step(10 * time.Second)
	// The first attempt's update finds the Lease gone; the next re-creates it.
	done := make(chan error)
	go func() { done <- f.c.Sync(ctx) }()
	if err := stepUntil(t, f.clock, done); err != nil {
		t.Fatal(err)
	}
	if refs := f.lease(t).OwnerReferences; len(refs) != 1 || refs[0].UID != "uid-new" {
		t.Errorf("owner references = %+v, want the new Node's UID", refs)
	}
}

// hangingNodes never answers a Node read before its context ends.
type hangingNodes struct{ calls atomic.Int32 }

func (h *hangingNodes) Get(ctx context.Context, _ string, _ metav1.GetOptions) (*corev1.Node, error) {
	h.calls.Add(1)
	<-ctx.Done()
	return nil, ctx.Err()
}

// The owner reference is best effort; the renewal is not. A Node read the
// API server does not answer (found by the fleet benchmark: 1,000 nodes on
// 2 cores) must not use up the attempt: the Lease is created or renewed
// without the reference, within a fifth of an attempt of waiting.
func TestSlowNodeReadDoesNotCostTheRenewal(t *testing.T) {
	ownerless := &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: node, Namespace: Namespace},
		Spec:       coordinationv1.LeaseSpec{HolderIdentity: ptr.To(node)},
	}
	for _, tc := range []struct {
		desc string
		objs []runtime.Object
	}{
		{"creating the lease", nil},
		{"renewing an ownerless lease", []runtime.Object{ownerless}},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			f := newFixture(t, false, tc.objs...)
			nodes := &hangingNodes{}
			c, err := New(Options{NodeName: node, Leases: f.leases, Nodes: nodes, Clock: f.clock})
			if err != nil {
				t.Fatal(err)
			}
			start := f.clock.Now()
			done := make(chan error)
			go func() { done <- c.Sync(context.Background()) }()
			if err := stepUntil(t, f.clock, done); err != nil {
				t.Fatalf("Sync() = %v, want the renewal written without the owner reference", err)
			}
			// The fake clock moves in 50 ms steps while anything waits on
			// it, so a loaded machine adds steps before the code reacts:
			// twice the lookup's share, still well under the whole attempt
			// (5s) the bug used up.
			if took, limit := f.clock.Since(start), 2*AttemptTimeout(RenewInterval(DefaultLeaseDuration))/ownerLookupShare; took > limit {
				t.Errorf("renewal took %v waiting for the Node, want at most %v", took, limit)
			}
			l := f.lease(t)
			if !l.Spec.RenewTime.Time.After(t0) || len(l.OwnerReferences) != 0 {
				t.Errorf("lease renewTime %v, owner references %+v; want renewed, none", l.Spec.RenewTime, l.OwnerReferences)
			}
			if nodes.calls.Load() != 1 {
				t.Errorf("node reads = %d, want 1", nodes.calls.Load())
			}
		})
	}
}

// lostAnswer applies the next Update and then loses its answer (the
// attempt times out), as an overloaded API server does.
type lostAnswer struct {
	LeaseClient
	armed atomic.Bool
}

func (l *lostAnswer) Update(ctx context.Context, lease *coordinationv1.Lease, o metav1.UpdateOptions) (*coordinationv1.Lease, error) {
	if !l.armed.CompareAndSwap(true, false) {
		return l.LeaseClient.Update(ctx, lease, o)
	}
	if _, err := l.LeaseClient.Update(ctx, lease, o); err != nil {
		return nil, err
	}
	<-ctx.Done()
	return nil, ctx.Err()
}

// A renewal whose update was applied but not answered, or that met a
// conflict, costs one more request (a patch without resourceVersion), not
// three (a 409, a read, an update); the renewal after it is an update again
// and does not conflict.
func TestRenewalInDoubtIsPatched(t *testing.T) {
	gr := schema.GroupResource{Group: "coordination.k8s.io", Resource: "leases"}
	for _, tc := range []struct {
		desc     string
		lost     bool  // the update is applied and its answer lost
		conflict error // or the update is refused with this
	}{
		{desc: "update applied, answer lost", lost: true},
		{desc: "update conflicts", conflict: apierrors.NewConflict(gr, node, errors.New("stale"))},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			f := newFixture(t, true)
			la := &lostAnswer{LeaseClient: f.cs.CoordinationV1().Leases(Namespace)}
			c, err := New(Options{NodeName: node, Leases: la, Nodes: f.cs.CoreV1().Nodes(), Clock: f.clock})
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			if err := c.Sync(ctx); err != nil { // creates the Lease
				t.Fatal(err)
			}
			la.armed.Store(tc.lost)
			if tc.conflict != nil {
				var once atomic.Bool
				f.cs.PrependReactor("update", "leases", func(clienttesting.Action) (bool, runtime.Object, error) {
					if once.CompareAndSwap(false, true) {
						return true, nil, tc.conflict
					}
					return false, nil, nil
				})
			}
			f.cs.ClearActions()
			f.clock.Step(10 * time.Second)
			start := f.clock.Now()
			done := make(chan error)
			go func() { done <- c.Sync(ctx) }()
			if err := stepUntil(t, f.clock, done); err != nil {
				t.Fatalf("Sync() = %v", err)
			}
			var verbs []string
			for _, a := range f.cs.Actions() {
				if a.GetResource().Resource == "leases" {
					verbs = append(verbs, a.GetVerb())
				}
			}
			if want := []string{"update", "patch"}; fmt.Sprint(verbs) != fmt.Sprint(want) {
				t.Errorf("Lease requests = %v, want %v", verbs, want)
			}
			l := f.lease(t)
			if l.Spec.RenewTime.Time.Before(start) || *l.Spec.HolderIdentity != node || *l.Spec.LeaseDurationSeconds != 40 {
				t.Errorf("patched Lease spec = %+v", l.Spec)
			}
			if len(l.OwnerReferences) != 1 {
				t.Errorf("owner references = %+v, want the Node's", l.OwnerReferences)
			}
			// The patch's answer carries the resourceVersion: the next
			// renewal is a plain update that does not conflict.
			f.cs.ClearActions()
			f.clock.Step(10 * time.Second)
			if err := c.Sync(ctx); err != nil {
				t.Fatal(err)
			}
			verbs = verbs[:0]
			for _, a := range f.cs.Actions() {
				if a.GetResource().Resource == "leases" {
					verbs = append(verbs, a.GetVerb())
				}
			}
			if fmt.Sprint(verbs) != "[update]" {
				t.Errorf("the renewal after the patch made %v, want [update]", verbs)
			}
		})
	}
}
