package pods

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodeagent/nodeagent/kubetypes"
	"github.com/nodeagent/nodeagent/pleg"
	"github.com/nodeagent/nodeagent/runtime"
)

// The Manager's routing, through newManager with fakes: the workers it
// makes run the state machine around fake syncers (orphans around the real
// syncer on the fake runtime), so what reaches a pod's worker shows as the
// calls its syncer gets.

type routingEnv struct {
	*workerEnv
	m      *Manager
	cancel context.CancelFunc

	mu      sync.Mutex
	syncers map[types.UID]*fakeSyncer
}

func newRoutingEnv(t *testing.T, o Options) *routingEnv {
	r := &routingEnv{workerEnv: newWorkerEnv(t), syncers: map[types.UID]*fakeSyncer{}}
	r.pleg.events = make(chan pleg.Event)
	r.m = r.manager(o)
	r.m.newWorker = func(pod *v1.Pod, src string) *podWorker {
		s := &fakeSyncer{}
		r.mu.Lock()
		r.syncers[pod.UID] = s
		r.mu.Unlock()
		return newPodWorker(r.m.deps, pod, src, s, r.m.log)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
	r.m.begin(ctx)
	t.Cleanup(func() {
		cancel()
		r.m.wg.Wait() // every worker ended
	})
	return r
}

// syncs counts the calls pod uid's syncer got.
func (r *routingEnv) syncs(uid types.UID) int {
	r.mu.Lock()
	s := r.syncers[uid]
	r.mu.Unlock()
	if s == nil {
		return 0
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.calls)
}

// tctx is a context that ends with the test.
func (r *routingEnv) tctx() context.Context {
	r.m.mu.Lock()
	defer r.m.mu.Unlock()
	return r.m.ctx
}

func (r *routingEnv) worker(uid types.UID) *podWorker {
	r.m.mu.Lock()
	defer r.m.mu.Unlock()
	return r.m.workers[uid]
}

func (r *routingEnv) waitFor(what string, f func() bool) {
	r.t.Helper()
	for i := 0; !f(); i++ {
		if i > 5000 {
			r.t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// A new pod is admitted and gets a worker; a known one gets the new
// version; a status-only update reaches the worker without waking it; a
// pod that does not fit is rejected; a pod deleted before it was seen is
// not admitted; PodRemove ends the worker.
func TestManagerUpsertAndRemove(t *testing.T) {
	r := newRoutingEnv(t, Options{MaxPods: 1})
	a := testPod("a", v1.RestartPolicyAlways, ctr("c"))
	r.m.PodUpdate(a)
	w := r.worker(a.UID)
	if w == nil || w.source != kubetypes.SourceAPI || w.rejected() {
		t.Fatalf("worker %+v", w)
	}
	r.waitFor("the first sync", func() bool { return r.syncs(a.UID) == 1 })

	st := a.DeepCopy()
	st.Status.Phase = v1.PodRunning
	r.m.PodUpdate(st)
	if p, _ := w.snapshot(); p != st {
		t.Error("the worker did not get the new version")
	}
	spec := st.DeepCopy()
	spec.Labels = map[string]string{"x": "y"}
	r.m.PodUpdate(spec)
	r.waitFor("the sync of the change", func() bool { return r.syncs(a.UID) == 2 })
	if n := r.syncs(a.UID); n != 2 {
		t.Errorf("%d syncs, want 2 (the status-only update woke the worker)", n)
	}

	b := testPod("b", v1.RestartPolicyAlways, ctr("c"))
	r.m.PodUpdate(b)
	if w := r.worker(b.UID); w == nil || !w.rejected() {
		t.Error("a pod over maxPods was not rejected")
	}
	gone := deleted(testPod("gone", v1.RestartPolicyAlways, ctr("c")), 0)
	r.m.PodUpdate(gone)
	if w := r.worker(gone.UID); w == nil || w.rejected() {
		t.Error("a deleted pod was admitted (and rejected) instead of stopped")
	}

	r.m.PodRemove(a.UID)
	r.waitFor("the removed pod's worker to end", func() bool { return r.worker(a.UID) == nil })
	r.m.PodRemove("unknown") // nothing to do
	if got := len(r.m.Pods()); got != 2 {
		t.Errorf("%d workers left, want 2", got)
	}
}

// PLEG events wake their pod's worker; mirror pod changes wake the static
// pod's.
func TestManagerDispatch(t *testing.T) {
	r := newRoutingEnv(t, Options{})
	go r.m.dispatch(r.tctx())
	p := testPod("web", v1.RestartPolicyAlways, ctr("c"))
	r.m.upsert(kubetypes.SourceFile, p)
	r.waitFor("the first sync", func() bool { return r.syncs(p.UID) == 1 })
	r.pleg.events <- pleg.Event{PodUID: p.UID, Type: pleg.ContainerDied}
	r.waitFor("the sync of the event", func() bool { return r.syncs(p.UID) == 2 })
	r.pleg.events <- pleg.Event{PodUID: "other"}
	mp := p.DeepCopy()
	mp.Annotations = map[string]string{kubetypes.AnnotationConfigMirror: "x"}
	r.m.MirrorRemove(mp)
	r.waitFor("the sync of the mirror pod's removal", func() bool { return r.syncs(p.UID) == 3 })
	r.m.MirrorUpdate(deleted(mp, 0))
	r.waitFor("the sync of the mirror pod's deletion", func() bool { return r.syncs(p.UID) == 4 })
}

// The static source's snapshots: the first marks the source synced; a
// pod missing from a later one is removed before the new ones start.
func TestManagerFollowStatic(t *testing.T) {
	r := newRoutingEnv(t, Options{})
	updates, synced := make(chan []*v1.Pod), make(chan struct{})
	go r.m.followStatic(r.tctx(), updates, synced)
	a, b := testPod("a", v1.RestartPolicyAlways, ctr("c")), testPod("b", v1.RestartPolicyAlways, ctr("c"))
	updates <- []*v1.Pod{a, b}
	select {
	case <-synced:
	case <-time.After(5 * time.Second):
		t.Fatal("the first snapshot did not mark the source synced")
	}
	if w := r.worker(a.UID); w == nil || w.source != kubetypes.SourceFile {
		t.Fatalf("no static worker for a: %+v", w)
	}
	c := testPod("c", v1.RestartPolicyAlways, ctr("c"))
	updates <- []*v1.Pod{b, c}
	r.waitFor("c's worker", func() bool { return r.worker(c.UID) != nil })
	r.waitFor("a's worker to end", func() bool { return r.worker(a.UID) == nil })
	if got := r.m.staticHashes(); len(got) != 2 {
		t.Errorf("static pods %v, want b and c", got)
	}
}

// Once the sources synced, what pods no source knows left (containers,
// pod directories) gets an orphan worker that removes it; known pods are
// not touched. A worker's end wakes the workers of pods of the same name
// (a static pod's new version waits for the old one).
func TestManagerCleanupOrphansAndWorkerDone(t *testing.T) {
	r := newRoutingEnv(t, Options{})
	known := testPod("known", v1.RestartPolicyAlways, ctr("c"))
	r.m.upsert(kubetypes.SourceAPI, known)
	ctx := context.Background()
	for _, ref := range []runtime.PodRef{{UID: "gone", Name: "gone", Namespace: "default"}, {UID: known.UID, Name: known.Name, Namespace: known.Namespace}} {
		id, _ := r.rt.CreateContainer(ctx, runtime.ContainerSpec{Pod: ref, Name: "c"})
		_ = r.rt.StartContainer(ctx, id)
	}
	dir := filepath.Join(r.m.opts.RootDir, "pods", "left")
	if err := os.MkdirAll(dir, 0o750); err != nil {
		t.Fatal(err)
	}
	r.m.cleanupOrphans(r.tctx())
	r.waitFor("the orphans' workers to end", func() bool { return len(r.m.Pods()) == 1 })
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("the orphan pod directory is left: %v", err)
	}
	pods, _ := r.rt.ListPods(ctx)
	if len(pods) != 1 || pods[0].UID != known.UID {
		t.Errorf("pods in the runtime %+v, want only the known one", pods)
	}

	// A new version of the pod (another UID, the same name) waits for the
	// old one; the old one's end wakes it.
	next := known.DeepCopy()
	next.UID = "known-2"
	r.m.upsert(kubetypes.SourceAPI, next)
	r.waitFor("the new version's first sync", func() bool { return r.syncs(next.UID) == 1 })
	r.m.PodRemove(known.UID)
	r.waitFor("the new version woken by the old one's end", func() bool { return r.syncs(next.UID) == 2 })
	if r.worker(known.UID) != nil {
		t.Error("the ended worker is still known")
	}
}

// The sync loop's health is kubelet's SyncLoopHealthCheck on the fake
// clock: healthy before the loop runs and while it passes (at least every
// second without events); once a pass has been stuck for longer than
// max(2 × syncFrequency, 5 minutes) it fails with kubelet's message, and
// passes made while RuntimeErrors reports an error do not count.
func TestManagerSyncLoopHealthCheck(t *testing.T) {
	for _, tc := range []struct {
		resync, bound time.Duration
	}{
		{time.Minute, 5 * time.Minute},       // kubelet's floor
		{4 * time.Minute, 8 * time.Minute},   // 2 × syncFrequency
		{10 * time.Minute, 20 * time.Minute}, // 2 × syncFrequency
	} {
		t.Run(tc.resync.String(), func(t *testing.T) {
			var runtimeErr atomic.Bool
			var asked atomic.Int64
			r := newRoutingEnv(t, Options{ResyncPeriod: tc.resync, RuntimeErrors: func() error {
				asked.Add(1)
				if runtimeErr.Load() {
					return errors.New("PLEG is not healthy")
				}
				return nil
			}})
			if err := r.m.SyncLoopHealthCheck(); err != nil {
				t.Fatalf("before the loop runs: %v", err)
			}
			go r.m.dispatch(r.tctx())
			r.waitFor("the first pass", func() bool { return r.m.LatestLoopEntryTime().Equal(r.clk.Now()) })
			// Idle: the loop's ticker makes it pass.
			r.waitFor("the loop's ticker", func() bool { return r.clk.HasWaiters() })
			r.clk.Step(tc.bound + time.Minute)
			r.waitFor("an idle pass", func() bool { return r.m.LatestLoopEntryTime().Equal(r.clk.Now()) })
			if err := r.m.SyncLoopHealthCheck(); err != nil {
				t.Fatalf("an idle loop past the bound: %v", err)
			}

			// A pass stuck (the manager's lock held while an event waits).
			r.m.mu.Lock()
			r.pleg.events <- pleg.Event{PodUID: "any"}
			r.clk.Step(tc.bound)
			if err := r.m.SyncLoopHealthCheck(); err != nil {
				r.m.mu.Unlock()
				t.Fatalf("stuck for exactly the bound: %v", err)
			}
			r.clk.Step(time.Millisecond)
			err := r.m.SyncLoopHealthCheck()
			r.m.mu.Unlock()
			if err == nil || err.Error() != "sync Loop took longer than expected" {
				t.Fatalf("stuck past the bound: %v, want kubelet's %q", err, "sync Loop took longer than expected")
			}
			r.waitFor("the pass after the stuck one", func() bool { return r.m.SyncLoopHealthCheck() == nil })

			// Passes while the runtime has errors are not entries.
			runtimeErr.Store(true)
			n := asked.Load()
			r.clk.Step(tc.bound + time.Second)
			r.waitFor("passes with runtime errors", func() bool { return asked.Load() >= n+2 })
			if err := r.m.SyncLoopHealthCheck(); err == nil {
				t.Fatal("healthy after passes made only with runtime errors past the bound")
			}
			runtimeErr.Store(false)
			r.clk.Step(time.Second)
			r.waitFor("a pass once the runtime is healthy", func() bool { return r.m.SyncLoopHealthCheck() == nil })
		})
	}
}
