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
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	testclock "k8s.io/utils/clock/testing"
	utilptr "k8s.io/utils/ptr"

	"github.com/nodeagent/nodeagent/internal/testing/testlog"
	"github.com/nodeagent/nodeagent/kubetypes"
	"github.com/nodeagent/nodeagent/pleg"
)

// The podWorker state machine against a fake syncer, a fake PLEG and a
// fake clock, as kubelet's pod_workers_test drives its pod workers: no
// runtime, no API server, no real time.

// fakeSyncer records what the state machine asks of it.
type fakeSyncer struct {
	mu    sync.Mutex
	calls []string // "sync", "terminating <reason> <grace>", "terminated <reason>"

	syncRes  syncResult
	syncErr  error
	deadline time.Time
	// running: containers still run; the next SyncTerminatingPod stops
	// them and reports false.
	running        bool
	terminatingErr error
	terminatedErr  error
}

func (f *fakeSyncer) record(s string) {
	f.mu.Lock()
	f.calls = append(f.calls, s)
	f.mu.Unlock()
}

func (f *fakeSyncer) took() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := f.calls
	f.calls = nil
	return out
}

func (f *fakeSyncer) SyncPod(context.Context, *v1.Pod, pleg.PodStatus, time.Time) (syncResult, error) {
	f.record("sync")
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.syncRes, f.syncErr
}

func (f *fakeSyncer) SyncTerminatingPod(_ context.Context, pod *v1.Pod, _ pleg.PodStatus, t *termination, _ time.Time) (bool, error) {
	f.record(fmt.Sprintf("terminating %s %v", t.reason, t.gracePeriod(pod)))
	if f.terminatingErr != nil {
		return false, f.terminatingErr
	}
	if f.running {
		f.running = false
		return false, nil
	}
	return true, nil
}

func (f *fakeSyncer) SyncTerminatedPod(_ context.Context, _ *v1.Pod, _ pleg.PodStatus, t *termination, _ time.Time) (time.Duration, bool, error) {
	f.record("terminated " + t.reason.String())
	if f.terminatedErr != nil {
		return 0, false, f.terminatedErr
	}
	t.finish()
	if t.reason == termRemoval {
		return 0, true, nil
	}
	return time.Minute, false, nil
}

func (f *fakeSyncer) Deadline(*v1.Pod) time.Time { return f.deadline }

// fakeWaits is the PLEG and cache of a podWorker: it records the waits
// before each sync.
type fakeWaits struct {
	mu    sync.Mutex
	waits []string
}

func (p *fakeWaits) Watch() <-chan pleg.Event                                      { return nil }
func (p *fakeWaits) ExpectWithin(types.UID, string, pleg.EventType, time.Duration) {}
func (p *fakeWaits) WaitExpected(context.Context, types.UID) error {
	p.mu.Lock()
	p.waits = append(p.waits, "expected")
	p.mu.Unlock()
	return nil
}
func (p *fakeWaits) Get(types.UID) (pleg.PodStatus, bool) { return pleg.PodStatus{}, true }
func (p *fakeWaits) GetNewerThan(_ context.Context, uid types.UID, min time.Time) (pleg.PodStatus, error) {
	p.mu.Lock()
	p.waits = append(p.waits, "newer than "+min.Format(time.TimeOnly))
	p.mu.Unlock()
	return pleg.PodStatus{}, nil
}

type smEnv struct {
	clk   *testclock.FakeClock
	s     *fakeSyncer
	waits *fakeWaits
	host  *fakeHost
	rec   *fakeRecorder
	w     *podWorker
}

func newSMEnv(t *testing.T, pod *v1.Pod, src string) *smEnv {
	clk := testclock.NewFakeClock(time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC))
	e := &smEnv{clk: clk, s: &fakeSyncer{}, waits: &fakeWaits{}, host: &fakeHost{}, rec: &fakeRecorder{}}
	d := &workerDeps{pleg: e.waits, cache: e.waits, clock: clk, host: e.host, rec: e.rec, met: newMetrics(nil), resync: time.Minute}
	e.w = newPodWorker(d, pod, src, e.s, testlog.New(t))
	return e
}

func (e *smEnv) state() podState {
	e.w.mu.Lock()
	defer e.w.mu.Unlock()
	return e.w.state
}

func woken(w *podWorker) bool {
	select {
	case <-w.wake:
		return true
	default:
		return false
	}
}

func deleted(pod *v1.Pod, grace int64) *v1.Pod {
	p := pod.DeepCopy()
	p.DeletionTimestamp = &metav1.Time{Time: time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)}
	p.DeletionGracePeriodSeconds = utilptr.To(grace)
	return p
}

func stopReq(grace time.Duration) *termination {
	return newTermination(termStop, grace, termStatus{reason: StopForNodeShutdown.Reason, message: StopForNodeShutdown.Message, disruption: true})
}

func evictReq(grace time.Duration) *termination {
	return newTermination(termEviction, grace, termStatus{reason: "Evicted", message: "low", disruption: true})
}

// Each step is one sync: what the syncer is asked, what the state
// machine then says (next sync, done) and the pod's state after it.
func TestPodWorkerLifecycle(t *testing.T) {
	type step struct {
		before func(e *smEnv) // requests, updates, syncer results
		calls  string         // the syncer calls of the sync, joined by "; "
		next   time.Duration
		done   bool
		state  podState
	}
	pod := testPod("web", v1.RestartPolicyAlways, ctr("c")) // grace 7s
	for _, tc := range []struct {
		desc  string
		src   string
		steps []step
	}{
		{desc: "syncing: idle resync, act at once, a held-back restart, a failed sync backs off and a good one resets it", steps: []step{
			{calls: "sync", next: time.Minute},
			{before: func(e *smEnv) { e.s.syncRes = syncResult{acted: true} }, calls: "sync", next: 0},
			{before: func(e *smEnv) { e.s.syncRes = syncResult{wakeAt: e.clk.Now().Add(10 * time.Second)} }, calls: "sync", next: 10 * time.Second},
			{before: func(e *smEnv) { e.s.syncErr = errors.New("boom") }, calls: "sync", next: time.Second},
			{calls: "sync", next: 2 * time.Second},
			{calls: "sync", next: 4 * time.Second},
			{before: func(e *smEnv) { e.s.syncErr, e.s.syncRes = nil, syncResult{} }, calls: "sync", next: time.Minute},
			{before: func(e *smEnv) { e.s.syncErr = errors.New("boom") }, calls: "sync", next: time.Second},
		}},
		{desc: "the active deadline: woken at it, then terminating with the pod's grace, then terminated; the request is never left", steps: []step{
			{before: func(e *smEnv) { e.s.deadline = e.clk.Now().Add(30 * time.Second) }, calls: "sync", next: 30 * time.Second},
			{before: func(e *smEnv) { e.clk.Step(30 * time.Second); e.s.running = true }, calls: "terminating deadline 7s", next: 0, state: podTerminating},
			{calls: "terminating deadline 7s; terminated deadline", next: time.Minute, state: podTerminated},
			{before: func(e *smEnv) { e.s.deadline = time.Time{} }, calls: "terminating deadline 7s; terminated deadline", next: time.Minute, state: podTerminated},
		}},
		{desc: "API deletion: the deletion's grace, terminated until the source drops the pod, then the removal ends the worker", src: kubetypes.SourceAPI, steps: []step{
			{calls: "sync", next: time.Minute},
			{before: func(e *smEnv) { e.s.running = true; e.w.update(deleted(pod, 5)) }, calls: "terminating deletion 5s", next: 0, state: podTerminating},
			{calls: "terminating deletion 5s; terminated deletion", next: time.Minute, state: podTerminated},
			{before: func(e *smEnv) { e.w.remove() }, calls: "terminating removal 5s; terminated removal", done: true, state: podTerminated},
		}},
		{desc: "a static pod's deletion timestamp removes it", src: kubetypes.SourceFile, steps: []step{
			{before: func(e *smEnv) { e.w.update(deleted(pod, 3)) }, calls: "terminating removal 3s; terminated removal", done: true, state: podTerminated},
		}},
		{desc: "a failed stop and a failed after-step retry with the sync back-off", steps: []step{
			{before: func(e *smEnv) {
				e.s.terminatingErr = errors.New("stuck")
				e.w.requestTermination(evictReq(time.Second))
			}, calls: "terminating eviction 1s", next: time.Second, state: podTerminating},
			{calls: "terminating eviction 1s", next: 2 * time.Second, state: podTerminating},
			{before: func(e *smEnv) { e.s.terminatingErr, e.s.terminatedErr = nil, errors.New("flush") }, calls: "terminating eviction 1s; terminated eviction", next: 4 * time.Second, state: podTerminated},
			{before: func(e *smEnv) { e.s.terminatedErr = nil }, calls: "terminating eviction 1s; terminated eviction", next: time.Minute, state: podTerminated},
		}},
		{desc: "node shutdown: at most the request's grace; an eviction then replaces it", steps: []step{
			{before: func(e *smEnv) { e.s.running = true; e.w.requestTermination(stopReq(5 * time.Second)) }, calls: "terminating shutdown 5s", next: 0, state: podTerminating},
			{before: func(e *smEnv) { e.s.running = true; e.w.requestTermination(stopReq(30 * time.Second)) }, calls: "terminating shutdown 5s", next: 0, state: podTerminating},
			{before: func(e *smEnv) { e.w.requestTermination(evictReq(time.Second)) }, calls: "terminating eviction 1s; terminated eviction", next: time.Minute, state: podTerminated},
		}},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			src := tc.src
			if src == "" {
				src = kubetypes.SourceAPI
			}
			p := pod.DeepCopy()
			p.Annotations[kubetypes.AnnotationConfigSource] = src
			e := newSMEnv(t, p, src)
			for i, s := range tc.steps {
				if s.before != nil {
					s.before(e)
				}
				next, done := e.w.syncOnce(context.Background())
				if got := strings.Join(e.s.took(), "; "); got != s.calls {
					t.Fatalf("step %d: calls %q, want %q", i, got, s.calls)
				}
				if next != s.next || done != s.done || e.state() != s.state {
					t.Fatalf("step %d: next %v done %v state %s, want %v %v %s", i, next, done, e.state(), s.next, s.done, s.state)
				}
			}
		})
	}
}

// A termination request gives way to one in force of the same or a later
// reason (the caller waits for that one); a later reason replaces it and
// completes it with itself.
func TestTerminationPrecedence(t *testing.T) {
	for _, tc := range []struct {
		desc        string
		first, then *termination
		replaced    bool
	}{
		{"a second shutdown waits for the first", stopReq(5 * time.Second), stopReq(time.Second), false},
		{"a shutdown waits for an eviction", evictReq(time.Second), stopReq(time.Second), false},
		{"an eviction replaces a shutdown", stopReq(time.Second), evictReq(time.Second), true},
		{"an eviction replaces the deadline", newTermination(termDeadline, 0, termStatus{reason: ReasonDeadlineExceeded}), evictReq(time.Second), true},
		{"an eviction waits for a rejection", newTermination(termRejection, 0, termStatus{rejected: true}), evictReq(time.Second), false},
		{"a deletion replaces an eviction", evictReq(time.Second), newTermination(termDeletion, 0, termStatus{}), true},
		{"a removal replaces a deletion", newTermination(termDeletion, 0, termStatus{}), newTermination(termRemoval, 0, termStatus{}), true},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			e := newSMEnv(t, testPod("p", v1.RestartPolicyAlways, ctr("c")), kubetypes.SourceAPI)
			if got := e.w.requestTermination(tc.first); got != tc.first {
				t.Fatal("the first request is not in force")
			}
			if !woken(e.w) {
				t.Error("a request did not wake the worker")
			}
			got := e.w.requestTermination(tc.then)
			if want := map[bool]*termination{true: tc.then, false: tc.first}[tc.replaced]; got != want {
				t.Fatalf("in force: %s, want %s", got.reason, want.reason)
			}
			got.finish()
			if !tc.first.finished() || !got.finished() {
				t.Error("finishing the request in force did not complete the first")
			}
		})
	}
}

// What a pod's source says: a status-only update never wakes the worker,
// a spec change does, a deletion requests the termination; ActivePods
// leaves out pods being evicted or stopped, not those past their deadline.
func TestPodWorkerUpdatesAndActive(t *testing.T) {
	pod := testPod("web", v1.RestartPolicyAlways, ctr("c"))
	e := newSMEnv(t, pod, kubetypes.SourceAPI)
	st := pod.DeepCopy()
	st.Status.Phase = v1.PodRunning
	e.w.update(st)
	if woken(e.w) {
		t.Error("a status-only update woke the worker")
	}
	spec := st.DeepCopy()
	spec.Spec.ActiveDeadlineSeconds = utilptr.To[int64](5)
	e.w.update(spec)
	if !woken(e.w) {
		t.Error("a spec change did not wake the worker")
	}
	if _, ok := e.w.active(); !ok {
		t.Error("a syncing pod is not active")
	}
	e.w.requestTermination(newTermination(termDeadline, 0, termStatus{reason: ReasonDeadlineExceeded}))
	if _, ok := e.w.active(); !ok {
		t.Error("a pod past its deadline is not active until it is terminal")
	}
	e.w.terminal.Store(true)
	if _, ok := e.w.active(); ok {
		t.Error("a terminal pod is active")
	}
	for _, req := range []*termination{stopReq(time.Second), evictReq(time.Second)} {
		e := newSMEnv(t, pod, kubetypes.SourceAPI)
		e.w.requestTermination(req)
		if _, ok := e.w.active(); ok {
			t.Errorf("a pod terminating for %s is active", req.reason)
		}
	}
	d := newSMEnv(t, pod, kubetypes.SourceAPI)
	d.w.update(deleted(pod, 1))
	if _, term := d.w.current(); term == nil || term.reason != termDeletion || !woken(d.w) {
		t.Errorf("a deletion: termination %v", term)
	}
	if _, ok := d.w.active(); ok {
		t.Error("a deleted pod is active")
	}
}

// Before every sync the worker waits for the PLEG to see its previous
// actions, then for a status newer than its previous sync.
func TestPodWorkerWaitsForThePLEG(t *testing.T) {
	e := newSMEnv(t, testPod("web", v1.RestartPolicyAlways, ctr("c")), kubetypes.SourceAPI)
	first := e.clk.Now()
	e.w.syncOnce(context.Background())
	e.clk.Step(time.Second)
	e.w.syncOnce(context.Background())
	want := []string{"expected", "newer than 00:00:00", "expected", "newer than " + first.Format(time.TimeOnly)}
	if got := fmt.Sprint(e.waits.waits); got != fmt.Sprint(want) {
		t.Errorf("waits %v, want %v", got, want)
	}
}

// A worker that keeps acting slows down to its back-off after 20 syncs in
// a row; a wake-up resets it; a removed pod's worker ends and tells its
// host.
func TestPodWorkerRunLoop(t *testing.T) {
	e := newSMEnv(t, testPod("web", v1.RestartPolicyAlways, ctr("c")), kubetypes.SourceAPI)
	e.s.syncRes = syncResult{acted: true}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ended := make(chan struct{})
	go func() { e.w.run(ctx); close(ended) }()
	waitFor := func(what string, f func() bool) {
		t.Helper()
		for i := 0; !f(); i++ {
			if i > 5000 {
				t.Fatalf("timed out waiting for %s", what)
			}
			time.Sleep(time.Millisecond)
		}
	}
	count := func() int { e.s.mu.Lock(); defer e.s.mu.Unlock(); return len(e.s.calls) }
	waitFor("the busy back-off", e.clk.HasWaiters)
	if n := count(); n != maxImmediate+1 {
		t.Fatalf("%d syncs before slowing down, want %d", n, maxImmediate+1)
	}
	e.clk.Step(time.Second) // the first busy step
	waitFor("the next busy back-off", func() bool { return count() == maxImmediate+2 && e.clk.HasWaiters() })
	e.clk.Step(time.Second) // not yet: the second step is 2s
	time.Sleep(10 * time.Millisecond)
	if n := count(); n != maxImmediate+2 {
		t.Fatalf("%d syncs 1s into a 2s back-off", n)
	}
	e.s.syncRes = syncResult{}
	e.w.remove()
	select {
	case <-ended:
	case <-time.After(5 * time.Second):
		t.Fatal("the removed pod's worker did not end")
	}
	if e.host.done != 1 {
		t.Errorf("workerDone called %d times", e.host.done)
	}
}

// A failing sync backs off, and the pod's own container events (a failed
// attempt's create, exit, removal) do not cut the back-off short; an update
// of the pod does, and so do events once a sync succeeds.
func TestPodWorkerErrorBackOffHoldsAgainstEvents(t *testing.T) {
	e := newSMEnv(t, testPod("web", v1.RestartPolicyAlways, ctr("c")), kubetypes.SourceAPI)
	e.s.mu.Lock()
	e.s.syncErr = errors.New("create container: failed to mount rootfs")
	e.s.mu.Unlock()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ended := make(chan struct{})
	go func() { e.w.run(ctx); close(ended) }()
	defer func() { cancel(); <-ended }()
	count := func() int { e.s.mu.Lock(); defer e.s.mu.Unlock(); return len(e.s.calls) }
	waitFor := func(what string, f func() bool) {
		t.Helper()
		for i := 0; !f(); i++ {
			if i > 5000 {
				t.Fatalf("timed out waiting for %s", what)
			}
			time.Sleep(time.Millisecond)
		}
	}
	waitFor("the first retry back-off", func() bool { return count() == 1 && e.clk.HasWaiters() })
	for range 20 {
		e.w.containersChanged()
		time.Sleep(time.Millisecond)
	}
	time.Sleep(20 * time.Millisecond)
	if n := count(); n != 1 {
		t.Fatalf("%d syncs: container events cut the failed sync's back-off short", n)
	}
	e.clk.Step(time.Second) // the back-off's first step
	waitFor("the retry", func() bool { return count() == 2 && e.clk.HasWaiters() })
	e.w.poke() // the pod changed: at once
	waitFor("the sync after an update", func() bool { return count() == 3 && e.clk.HasWaiters() })
	e.s.mu.Lock()
	e.s.syncErr = nil
	e.s.mu.Unlock()
	e.w.poke()
	waitFor("a good sync", func() bool { return count() == 4 && e.clk.HasWaiters() })
	e.w.containersChanged()
	waitFor("the sync after an event", func() bool { return count() == 5 })
}

// An idle worker resyncs after its resync period (syncFrequency) plus
// kubelet's jitter, up to half of it; a held-back restart due sooner
// still wins.
func TestPodWorkerResyncJitter(t *testing.T) {
	pod := testPod("jitter", v1.RestartPolicyAlways, ctr("c"))
	e := newSMEnv(t, pod, kubetypes.SourceAPI)
	e.w.d.resync, e.w.d.jitter = 30*time.Second, func(d time.Duration) time.Duration { return d + d/3 }
	if next, _ := e.w.syncOnce(context.Background()); next != 40*time.Second {
		t.Errorf("idle resync in %v, want 30s + the jitter's 10s", next)
	}
	e.s.syncRes = syncResult{wakeAt: e.clk.Now().Add(5 * time.Second)}
	if next, _ := e.w.syncOnce(context.Background()); next != 5*time.Second {
		t.Errorf("next sync in %v, want the restart's 5s", next)
	}
	// kubelet's factor: [d, 1.5d).
	seen := map[time.Duration]bool{}
	for range 100 {
		j := resyncJitter(time.Minute)
		if j < time.Minute || j > 90*time.Second {
			t.Fatalf("resyncJitter(1m) = %v, want within [1m, 1m30s]", j)
		}
		seen[j] = true
	}
	if len(seen) < 2 {
		t.Errorf("resyncJitter(1m) always %v", seen)
	}
}
