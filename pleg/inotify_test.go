package pleg

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/nodeagent/nodeagent/internal/testing/testlog"

	"github.com/fsnotify/fsnotify"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodeagent/nodeagent/runtime"
)

// fakeInotifyHost stands for the host's inotify limits: instances can be
// refused (EMFILE, fs.inotify.max_user_instances) and watches capped
// (ENOSPC, fs.inotify.max_user_watches).
type fakeInotifyHost struct {
	mu          sync.Mutex
	noInstances bool
	maxWatches  int // < 0: no limit
	opens       int
	opened      *fakeInotify
	adds        map[string][]time.Time // every Add attempt, by path
}

func newFakeInotifyHost() *fakeInotifyHost {
	return &fakeInotifyHost{maxWatches: -1, adds: map[string][]time.Time{}}
}

func (h *fakeInotifyHost) newInotify() (inotify, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.opens++
	if h.noInstances {
		return nil, fmt.Errorf("inotify_init1: %w", syscall.EMFILE)
	}
	h.opened = &fakeInotify{h: h, watches: map[string]bool{}, events: make(chan fsnotify.Event, 10), errs: make(chan error, 1)}
	return h.opened, nil
}

func (h *fakeInotifyHost) set(noInstances bool, maxWatches int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.noInstances, h.maxWatches = noInstances, maxWatches
}

func (h *fakeInotifyHost) watched(path string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.opened != nil && h.opened.watches[path]
}

func (h *fakeInotifyHost) attempts(path string) []time.Time {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]time.Time{}, h.adds[path]...)
}

func (h *fakeInotifyHost) openCount() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.opens
}

type fakeInotify struct {
	h       *fakeInotifyHost
	watches map[string]bool // guarded by h.mu
	events  chan fsnotify.Event
	errs    chan error
}

func (f *fakeInotify) Add(name string) error {
	f.h.mu.Lock()
	defer f.h.mu.Unlock()
	f.h.adds[name] = append(f.h.adds[name], time.Now())
	if f.watches[name] {
		return nil
	}
	if _, err := os.Stat(name); err != nil {
		return err
	}
	if f.h.maxWatches >= 0 && len(f.watches) >= f.h.maxWatches {
		return fmt.Errorf("%q: %w", name, syscall.ENOSPC)
	}
	f.watches[name] = true
	return nil
}

func (f *fakeInotify) Remove(name string) error {
	f.h.mu.Lock()
	defer f.h.mu.Unlock()
	delete(f.watches, name)
	return nil
}

func (f *fakeInotify) Close() error                  { return nil }
func (f *fakeInotify) Events() <-chan fsnotify.Event { return f.events }
func (f *fakeInotify) Errors() <-chan error          { return f.errs }

// cgroupTree is a directory shaped like a cgroup v2 hierarchy with the pod
// parent /kubepods.
func cgroupTree(t *testing.T) string {
	root := t.TempDir()
	if err := os.WriteFile(filepath.Join(root, "cgroup.controllers"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(root, "kubepods"), 0o755); err != nil {
		t.Fatal(err)
	}
	return root
}

// runningIn makes container id of pod run in <root>/kubepods/<pod>/<id>,
// cgroup.events "populated 1", and returns its directory.
func runningIn(t *testing.T, rt *fakeRuntime, root, pod, id string) string {
	t.Helper()
	dir := filepath.Join(root, "kubepods", pod, id)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "cgroup.events"), []byte("populated 1\nfrozen 0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	rt.mu.Lock()
	rt.containers[id] = runtime.Container{ID: id, Name: "c-" + id, State: runtime.StateRunning, CgroupsPath: "/kubepods/" + pod + "/" + id,
		Pod: runtime.PodRef{UID: types.UID("uid-" + pod), Name: pod, Namespace: "ns"}}
	rt.mu.Unlock()
	return dir
}

// syncBuf is a log destination the test reads.
type syncBuf = testlog.Buffer

// nextEvent returns the next event of container id (skipping others), or
// fails after timeout of (bubble) time.
func nextEvent(t *testing.T, ch <-chan Event, id string, timeout time.Duration) Event {
	t.Helper()
	deadline := time.After(timeout)
	for {
		select {
		case ev := <-ch:
			if ev.ContainerID == id {
				return ev
			}
		case <-deadline:
			t.Fatalf("no event for %s within %s", id, timeout)
			return Event{}
		}
	}
}

// TestCgroupSourceWatchesExhausted: with fs.inotify.max_user_watches
// reached, a pod directory and a running container cannot be watched. The
// PLEG must say so (log, metrics), relist at its fallback period and stay
// healthy and correct (a death and a start are seen by relisting), retry the
// watches with backoff (1s, 2s, 4s, 8s, then every 10s), and go back to
// event mode once watches are available again, with the container's exit
// then seen through inotify.
func TestCgroupSourceWatchesExhausted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		root := cgroupTree(t)
		rt := newFakeRuntime()
		a := runningIn(t, rt, root, "pod1", "a")
		host := newFakeInotifyHost()
		host.set(false, 1) // room for the pod root only
		logs := &syncBuf{}
		reg := prometheus.NewRegistry()
		p := newTestPLEG(t, rt, Options{
			Sources: []Source{SourceCgroups}, CgroupRoot: root, CgroupParents: []string{"/kubepods"},
			RelistPeriod: time.Hour, FallbackRelistPeriod: time.Second, Registerer: reg,
			Logger:     slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
			newInotify: host.newInotify,
		})
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		evs, unsub := p.Subscribe()
		defer unsub()
		start := time.Now()
		go p.Run(ctx)
		if ev := nextEvent(t, evs, "a", time.Second); ev.Type != ContainerStarted {
			t.Fatalf("first event %+v", ev)
		}
		synctest.Wait()
		if p.EventMode() {
			t.Fatal("event mode with a running container unwatched")
		}
		if v := testutil.ToFloat64(p.m.fallbackActive); v != 1 {
			t.Errorf("fallback_active = %v, want 1", v)
		}
		if v := testutil.ToFloat64(p.m.sourceHealthy.WithLabelValues("cgroups")); v != 0 {
			t.Errorf("source_healthy{cgroups} = %v, want 0", v)
		}
		if l := logs.String(); !strings.Contains(l, "falling back to relisting") || !strings.Contains(l, "inotify watch limit reached (fs.inotify.max_user_watches)") {
			t.Errorf("the log does not say why the PLEG relists:\n%s", l)
		}
		if ok, err := p.Healthy(); !ok {
			t.Fatal(err)
		}

		// Correct meanwhile: relisting at the fallback period sees a
		// death and a start no inotify watch could.
		rt.set("a", "pod1", runtime.StateExited, 137)
		if ev := nextEvent(t, evs, "a", 1100*time.Millisecond); ev.Type != ContainerDied || ev.Source != SourceRelist {
			t.Fatalf("death while unwatched: %+v, want ContainerDied from relist within the fallback period", ev)
		}
		b := runningIn(t, rt, root, "pod1", "b")
		if ev := nextEvent(t, evs, "b", 1100*time.Millisecond); ev.Type != ContainerStarted || ev.Source != SourceRelist {
			t.Fatalf("start while unwatched: %+v", ev)
		}

		// Retried with backoff: 1s, 2s, 4s, 8s, 10s, 10s after the first
		// failure.
		time.Sleep(start.Add(36 * time.Second).Sub(time.Now()))
		synctest.Wait()
		var got []string
		for _, at := range host.attempts(filepath.Dir(a)) {
			got = append(got, at.Sub(start).Round(time.Second).String())
		}
		if want := "0s 1s 3s 7s 15s 25s 35s"; strings.Join(got, " ") != want {
			t.Errorf("attempts to watch the pod directory at %v, want %s", got, want)
		}
		if ok, err := p.Healthy(); !ok || p.EventMode() {
			t.Fatalf("after 36s exhausted: healthy %v (%v), event mode %v", ok, err, p.EventMode())
		}

		// Watches available again: within one backoff step (10s) the
		// pod directory and b are watched and the PLEG is back in event
		// mode.
		freed := time.Now()
		host.set(false, -1)
		for !p.EventMode() {
			if time.Since(freed) > 10*time.Second {
				t.Fatal("not back in event mode 10s after watches were freed")
			}
			time.Sleep(100 * time.Millisecond)
		}
		t.Logf("back in event mode %s after the watches were freed", time.Since(freed))
		// The PLEG logs what it decided under its lock after unlocking
		// (logLocked): let it finish before reading the log. A timer of
		// the poll firing at the same instant as the recovery's could
		// otherwise read it in between.
		synctest.Wait()
		if !host.watched(filepath.Dir(a)) || !host.watched(b) {
			t.Fatal("pod directory or container b not watched after recovery")
		}
		if v := testutil.ToFloat64(p.m.fallbackActive); v != 0 {
			t.Errorf("fallback_active = %v after recovery", v)
		}
		if v := testutil.ToFloat64(p.m.sourceHealthy.WithLabelValues("cgroups")); v != 1 {
			t.Errorf("source_healthy{cgroups} = %v after recovery", v)
		}
		if !strings.Contains(logs.String(), "back to event mode") {
			t.Error("recovery not logged")
		}
		synctest.Wait()
		drainAll(evs)

		// Events again: b's exit is seen through its cgroup.events, not
		// a relist (the safety-net period is an hour).
		rt.set("b", "pod1", runtime.StateExited, 0)
		if err := os.WriteFile(filepath.Join(b, "cgroup.events"), []byte("populated 0\nfrozen 0\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		host.opened.events <- fsnotify.Event{Name: filepath.Join(b, "cgroup.events"), Op: fsnotify.Write}
		if ev := nextEvent(t, evs, "b", time.Second); ev.Type != ContainerDied || ev.Source != SourceCgroups {
			t.Fatalf("b's exit after recovery: %+v, want ContainerDied from cgroups", ev)
		}
		// No more retries once everything is watched.
		n := len(host.attempts(filepath.Dir(a)))
		time.Sleep(time.Minute)
		if m := len(host.attempts(filepath.Dir(a))); m != n {
			t.Errorf("%d more attempts to watch the pod directory after recovery", m-n)
		}
		cancel()
	})
}

// TestCgroupSourceNoInotifyInstance: with fs.inotify.max_user_instances
// reached, the cgroup source cannot even start. The PLEG relists at its
// fallback period, stays healthy, retries with backoff and switches to
// event mode once an instance can be created; the containers running by
// then are watched.
func TestCgroupSourceNoInotifyInstance(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		root := cgroupTree(t)
		rt := newFakeRuntime()
		a := runningIn(t, rt, root, "pod1", "a")
		host := newFakeInotifyHost()
		host.set(true, -1)
		logs := &syncBuf{}
		p := newTestPLEG(t, rt, Options{
			Sources: []Source{SourceCgroups}, CgroupRoot: root, CgroupParents: []string{"/kubepods"},
			RelistPeriod: time.Hour, FallbackRelistPeriod: time.Second, Registerer: prometheus.NewRegistry(),
			Logger:     slog.New(slog.NewTextHandler(logs, nil)),
			newInotify: host.newInotify,
		})
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		evs, unsub := p.Subscribe()
		defer unsub()
		go p.Run(ctx)
		nextEvent(t, evs, "a", time.Second)
		synctest.Wait()
		if p.EventMode() {
			t.Fatal("event mode without an inotify instance")
		}
		if l := logs.String(); !strings.Contains(l, "inotify instance limit reached (fs.inotify.max_user_instances)") {
			t.Errorf("the log does not name the limit:\n%s", l)
		}
		n := rt.listCount()
		time.Sleep(5 * time.Second)
		synctest.Wait()
		if m := rt.listCount(); m-n < 4 {
			t.Errorf("%d relists in 5s without inotify, want one per second", m-n)
		}
		if ok, err := p.Healthy(); !ok {
			t.Fatal(err)
		}
		// 1 at start, then retries at 1s, 3s: 3 opens within 5s.
		if o := host.openCount(); o != 3 {
			t.Errorf("%d attempts to create an inotify instance in 5s, want 3 (backoff 1s, 2s)", o)
		}
		host.set(false, -1)
		freed := time.Now()
		for !p.EventMode() {
			if time.Since(freed) > 10*time.Second {
				t.Fatal("not in event mode 10s after an instance became available")
			}
			time.Sleep(100 * time.Millisecond)
		}
		synctest.Wait()
		if !host.watched(a) || !host.watched(filepath.Join(root, "kubepods")) {
			t.Fatal("the pod root or the running container not watched once inotify works")
		}
		cancel()
	})
}

func drainAll(ch <-chan Event) {
	for {
		select {
		case <-ch:
		default:
			return
		}
	}
}
