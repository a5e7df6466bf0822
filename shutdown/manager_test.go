package shutdown

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodeagent/nodeagent/internal/testing/testlog"
)

// fakeLogind is logind as the manager sees it; its delay becomes what the
// drop-in says once reloaded (unless stuck).
type fakeLogind struct {
	mu      sync.Mutex
	delay   time.Duration
	dropIns string // the drop-in directory to read on reload
	stuck   bool   // the reload does not change the delay
	reloads int
	locks   []*fakeLock
	events  chan bool
	closed  bool
}

type fakeLock struct {
	mu     sync.Mutex
	what   []string
	closed bool
}

func (l *fakeLock) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.closed = true
	return nil
}

func (f *fakeLogind) InhibitDelayMax() (time.Duration, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.delay, nil
}

func (f *fakeLogind) Inhibit(what, who, why, mode string) (io.Closer, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	l := &fakeLock{what: []string{what, who, why, mode}}
	f.locks = append(f.locks, l)
	return l, nil
}

func (f *fakeLogind) ReloadLogind() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reloads++
	if f.stuck {
		return nil
	}
	b, err := os.ReadFile(filepath.Join(f.dropIns, dropInName))
	if err != nil {
		return err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "InhibitDelayMaxSec="); ok {
			d, err := time.ParseDuration(v + "s")
			if err != nil {
				return err
			}
			f.delay = d
		}
	}
	return nil
}

func (f *fakeLogind) PrepareForShutdown() (<-chan bool, error) { return f.events, nil }

func (f *fakeLogind) Close() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.closed = true
	return nil
}

// held reports how many locks were taken and whether the last is held.
func (f *fakeLogind) held() (int, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.locks) == 0 {
		return 0, false
	}
	l := f.locks[len(f.locks)-1]
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(f.locks), !l.closed
}

// fakePods stops a pod after its own stop time (ignoring the grace it is
// given, as a pod whose stop hangs) and records each call.
type fakePods struct {
	mu     sync.Mutex
	pods   []*v1.Pod
	takes  map[types.UID]time.Duration // how long a pod takes to stop; missing: at once
	calls  []stopCall
	locked func() bool // whether the inhibitor lock is held, sampled per call
}

type stopCall struct {
	at       time.Time
	uids     []types.UID
	grace    time.Duration
	returned time.Time
	err      error
	locked   bool
}

func (p *fakePods) ActivePods() []*v1.Pod {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.pods
}

func (p *fakePods) StopPods(ctx context.Context, uids []types.UID, grace time.Duration) error {
	c := stopCall{at: time.Now(), uids: uids, grace: grace, locked: p.locked()}
	var longest time.Duration
	for _, u := range uids {
		longest = max(longest, p.takes[u])
	}
	select {
	case <-time.After(longest):
	case <-ctx.Done():
		c.err = ctx.Err()
	}
	c.returned = time.Now()
	p.mu.Lock()
	p.calls = append(p.calls, c)
	p.mu.Unlock()
	return c.err
}

func testPod(name string, priority int32) *v1.Pod {
	return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID(name)}, Spec: v1.PodSpec{Priority: &priority}}
}

type env struct {
	logind  *fakeLogind
	pods    *fakePods
	m       *Manager
	mu      sync.Mutex
	events  []string
	synced  int
	connect int
}

func newEnv(t *testing.T, grace, critical time.Duration, bands ...Band) *env {
	dir := t.TempDir()
	e := &env{logind: &fakeLogind{delay: 5 * time.Second, dropIns: dir, events: make(chan bool)}}
	e.pods = &fakePods{takes: map[types.UID]time.Duration{}, locked: func() bool { _, h := e.logind.held(); return h }}
	m, err := New(Options{
		GracePeriod: grace, CriticalGracePeriod: critical, ByPodPriority: bands,
		Connect: func() (Logind, error) {
			e.mu.Lock()
			defer e.mu.Unlock()
			e.connect++
			return e.logind, nil
		},
		Pods: e.pods,
		SyncNodeStatus: func(context.Context) error {
			e.mu.Lock()
			defer e.mu.Unlock()
			e.synced++
			return nil
		},
		Event: func(typ, reason, msg string) {
			e.mu.Lock()
			defer e.mu.Unlock()
			e.events = append(e.events, typ+" "+reason+" "+msg)
		},
		DropInDir: dir,
		Logger:    testlog.New(t),
	})
	if err != nil {
		t.Fatal(err)
	}
	e.m = m
	return e
}

func TestNewDisabled(t *testing.T) {
	m, err := New(Options{})
	if m != nil || err != nil {
		t.Errorf("New with no grace period = %v, %v; want nil, nil", m, err)
	}
	if m.ShuttingDown() != nil {
		t.Error("a nil Manager is shutting down")
	}
	if _, err := New(Options{GracePeriod: time.Second, CriticalGracePeriod: 2 * time.Second}); err == nil {
		t.Error("critical above the whole accepted")
	}
	if _, err := New(Options{GracePeriod: time.Second, ByPodPriority: []Band{{0, time.Second}}}); err == nil {
		t.Error("shutdownGracePeriod with shutdownGracePeriodByPodPriority accepted")
	}
	if _, err := New(Options{ByPodPriority: []Band{{0, -time.Second}}}); err == nil {
		t.Error("negative band accepted")
	}
}

// The whole procedure: the delay is raised with a drop-in, the lock is
// held; on PrepareForShutdown(true) the node is shutting down (event,
// status), regular pods stop first with total-critical, critical pods then
// with critical, the lock is released only after both; a cancellation
// takes the lock again.
func TestShutdownStopsRegularThenCriticalPods(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, 20*time.Second, 5*time.Second)
		e.pods.pods = []*v1.Pod{testPod("web", 0), testPod("dns", SystemCriticalPriority)}
		e.pods.takes["web"] = 3 * time.Second
		e.pods.takes["dns"] = time.Second
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan struct{})
		go func() { defer close(done); e.m.Run(ctx) }()
		synctest.Wait()

		if n, held := e.logind.held(); n != 1 || !held {
			t.Fatalf("locks %d, held %v: want one lock held", n, held)
		}
		if got := e.logind.locks[0].what; !reflect.DeepEqual(got, []string{"shutdown", "nodeagent", inhibitWhy, "delay"}) {
			t.Errorf("Inhibit(%q)", got)
		}
		if e.logind.reloads != 1 || e.logind.delay != 20*time.Second {
			t.Errorf("reloads %d, delay %v: want logind raised to 20s", e.logind.reloads, e.logind.delay)
		}
		if e.m.ShuttingDown() != nil {
			t.Error("shutting down before PrepareForShutdown")
		}

		start := time.Now()
		e.logind.events <- true
		synctest.Wait()
		if err := e.m.ShuttingDown(); !errors.Is(err, ErrShuttingDown) || err.Error() != "node is shutting down" {
			t.Errorf("ShuttingDown = %v", err)
		}
		time.Sleep(10 * time.Second)
		synctest.Wait()
		if _, held := e.logind.held(); held {
			t.Error("lock still held after the pods stopped")
		}
		calls := e.pods.calls
		if len(calls) != 2 {
			t.Fatalf("StopPods calls %+v", calls)
		}
		if !reflect.DeepEqual(calls[0].uids, []types.UID{"web"}) || calls[0].grace != 15*time.Second || calls[0].err != nil || !calls[0].locked {
			t.Errorf("first call %+v: want web with 15s, under the lock", calls[0])
		}
		if !reflect.DeepEqual(calls[1].uids, []types.UID{"dns"}) || calls[1].grace != 5*time.Second || !calls[1].locked {
			t.Errorf("second call %+v: want dns with 5s, under the lock", calls[1])
		}
		if calls[1].at.Sub(start) != 3*time.Second {
			t.Errorf("critical pods stopped %v after the event, want once the regular ones stopped (3s)", calls[1].at.Sub(start))
		}
		e.mu.Lock()
		if e.synced != 1 || len(e.events) != 1 || e.events[0] != "Normal Shutdown Shutdown manager detected shutdown event" {
			t.Errorf("status syncs %d, events %q", e.synced, e.events)
		}
		e.mu.Unlock()

		// Cancelled: not shutting down, locked again.
		e.logind.events <- false
		synctest.Wait()
		if e.m.ShuttingDown() != nil {
			t.Error("still shutting down after the cancellation")
		}
		if n, held := e.logind.held(); n != 2 || !held {
			t.Errorf("after the cancellation: locks %d, held %v", n, held)
		}
		e.mu.Lock()
		if e.events[len(e.events)-1] != "Normal Shutdown Shutdown manager detected shutdown cancellation" {
			t.Errorf("events %q", e.events)
		}
		e.mu.Unlock()
		cancel()
		<-done
		if _, held := e.logind.held(); held || !e.logind.closed {
			t.Error("Run returned with the lock held or the connection open")
		}
	})
}

// Pods that do not stop in time: each group is given up at its grace
// period, and the lock is released within shutdownGracePeriod.
func TestShutdownWithinBudget(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, 20*time.Second, 5*time.Second)
		e.logind.delay = 30 * time.Second // no need to raise it
		e.pods.pods = []*v1.Pod{testPod("slow", 0), testPod("slow-critical", SystemCriticalPriority)}
		e.pods.takes["slow"] = time.Hour
		e.pods.takes["slow-critical"] = time.Hour
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		go e.m.Run(ctx)
		synctest.Wait()
		if e.logind.reloads != 0 {
			t.Errorf("logind reloaded although its delay (30s) covers 20s")
		}
		start := time.Now()
		e.logind.events <- true
		for {
			synctest.Wait()
			if _, held := e.logind.held(); !held {
				break
			}
			if time.Since(start) > time.Minute {
				t.Fatal("lock still held a minute after PrepareForShutdown")
			}
			time.Sleep(100 * time.Millisecond)
		}
		if took := time.Since(start); took > 20*time.Second {
			t.Errorf("lock released after %v, want within shutdownGracePeriod (20s)", took)
		}
		if len(e.pods.calls) != 2 || e.pods.calls[1].at.Sub(start) != 15*time.Second {
			t.Errorf("calls %+v: want the critical group started at 15s", e.pods.calls)
		}
	})
}

// shutdownGracePeriodByPodPriority: logind's delay is raised to the
// bands' sum; the pods are stopped band by band from the lowest priority,
// each band with its own grace period and started once the band below has
// stopped or its grace period passed; a band without pods is not waited
// for; the lock is released once the last band is done.
func TestShutdownByPodPriority(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, 0, 0,
			Band{Priority: 1000, Grace: 10 * time.Second},
			Band{Priority: SystemCriticalPriority, Grace: 3 * time.Second},
			Band{Priority: 500, Grace: 4 * time.Second}, // empty
			Band{Priority: 0, Grace: 5 * time.Second})
		e.pods.pods = []*v1.Pod{
			testPod("dns", SystemCriticalPriority), testPod("web", 0), testPod("batch", -10),
			testPod("db", 1000), testPod("cache", 5000),
		}
		e.pods.takes["web"] = 2 * time.Second
		e.pods.takes["batch"] = time.Second
		e.pods.takes["db"] = time.Hour // does not stop: given up at 10s
		e.pods.takes["dns"] = time.Second
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		go e.m.Run(ctx)
		synctest.Wait()
		if e.logind.reloads != 1 || e.logind.delay != 22*time.Second {
			t.Errorf("reloads %d, delay %v: want logind raised to the bands' sum, 22s", e.logind.reloads, e.logind.delay)
		}
		start := time.Now()
		e.logind.events <- true
		for {
			synctest.Wait()
			if _, held := e.logind.held(); !held {
				break
			}
			if time.Since(start) > time.Minute {
				t.Fatal("lock still held a minute after PrepareForShutdown")
			}
			time.Sleep(100 * time.Millisecond)
		}
		if took := time.Since(start); took != 13*time.Second {
			t.Errorf("lock released after %v, want 13s (2s, then 10s given up, then 1s)", took)
		}
		type call struct {
			at    time.Duration
			uids  []types.UID
			grace time.Duration
			err   bool
		}
		var got []call
		for _, c := range e.pods.calls {
			got = append(got, call{c.at.Sub(start), c.uids, c.grace, c.err != nil})
			if !c.locked {
				t.Errorf("%v stopped without the lock held", c.uids)
			}
		}
		want := []call{
			{0, []types.UID{"web", "batch"}, 5 * time.Second, false},
			{2 * time.Second, []types.UID{"db", "cache"}, 10 * time.Second, true},
			{12 * time.Second, []types.UID{"dns"}, 3 * time.Second, false},
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("StopPods calls %+v\nwant %+v", got, want)
		}
		if err := e.m.ShuttingDown(); !errors.Is(err, ErrShuttingDown) {
			t.Errorf("ShuttingDown = %v", err)
		}
	})
}

// logind's delay that cannot be raised is logged, and the lock is taken
// anyway.
func TestDelayStillTooSmall(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, 20*time.Second, 0)
		e.logind.stuck = true
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		go e.m.Run(ctx)
		time.Sleep(5 * time.Second)
		synctest.Wait()
		if e.logind.reloads != 1 {
			t.Errorf("reloads %d", e.logind.reloads)
		}
		b, err := os.ReadFile(filepath.Join(e.logind.dropIns, dropInName))
		if err != nil || !strings.Contains(string(b), "InhibitDelayMaxSec=20\n") {
			t.Errorf("drop-in %q, %v", b, err)
		}
		if _, held := e.logind.held(); !held {
			t.Error("no lock although logind is reachable")
		}
	})
}

// Without logind the feature is off: Run returns, the node is never
// shutting down. A connection lost later is made again.
func TestNoLogindAndReconnect(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m, _ := New(Options{GracePeriod: time.Second, Pods: &fakePods{}, Logger: testlog.New(t),
			Connect: func() (Logind, error) { return nil, errors.New("dial unix /run/dbus/system_bus_socket: no such file") }})
		m.Run(t.Context()) // returns
		if m.ShuttingDown() != nil {
			t.Error("shutting down without logind")
		}

		e := newEnv(t, 20*time.Second, 0)
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		go e.m.Run(ctx)
		synctest.Wait()
		close(e.logind.events) // the bus connection ends
		e.logind.events = make(chan bool)
		synctest.Wait()
		if _, held := e.logind.held(); held {
			t.Error("lock held after the connection ended")
		}
		time.Sleep(reconnectPeriod)
		synctest.Wait()
		e.mu.Lock()
		n := e.connect
		e.mu.Unlock()
		if n != 2 {
			t.Errorf("connections %d, want a second one after %v", n, reconnectPeriod)
		}
		if _, held := e.logind.held(); !held {
			t.Error("no lock after reconnecting")
		}
	})
}
