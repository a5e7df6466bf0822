package dirwatch

import (
	"context"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fsnotify/fsnotify"
	"k8s.io/apimachinery/pkg/util/wait"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/nodeagent/nodeagent/internal/testing/backofftest"
)

// manifestName is the static pod source's filter, the harder of the two
// consumers': *.yaml, *.yml, *.json, not hidden.
func manifestName(ev fsnotify.Event) bool {
	base := filepath.Base(ev.Name)
	if strings.HasPrefix(base, ".") {
		return false
	}
	switch filepath.Ext(base) {
	case ".yaml", ".yml", ".json":
		return true
	}
	return false
}

// observed collects the events Run handled.
type observed struct {
	mu     sync.Mutex
	events []string // "<relevant> <name>"
}

func (o *observed) add(ev fsnotify.Event, rel bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	mark := "-"
	if rel {
		mark = "+"
	}
	o.events = append(o.events, mark+" "+ev.Name)
}

// has reports whether an event on name was handled with that relevance.
func (o *observed) has(name string, rel bool) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	want := "- " + name
	if rel {
		want = "+ " + name
	}
	for _, e := range o.events {
		if e == want {
			return true
		}
	}
	return false
}

func (o *observed) reset() {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.events = nil
}

type logWriter struct{ t *testing.T }

func (l logWriter) Write(p []byte) (int, error) {
	l.t.Logf("%s", strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// logSink sends logs to t.Logf and keeps them for assertions.
type logSink struct {
	t  *testing.T
	mu sync.Mutex
	b  strings.Builder
}

func (s *logSink) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.b.Write(p)
	s.t.Logf("%s", strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// waitFor waits until the logs contain every string of want.
func (s *logSink) waitFor(t *testing.T, want ...string) {
	t.Helper()
	backofftest.WaitFor(t, func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		for _, w := range want {
			if !strings.Contains(s.b.String(), w) {
				return false
			}
		}
		return true
	}, "logs with %q", want)
}

// start runs a Watcher on o until the end of the test.
func start(t *testing.T, o Options) (*Watcher, *observed) {
	t.Helper()
	if o.Logger == nil {
		o.Logger = slog.New(slog.NewTextHandler(logWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	w, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	obs := &observed{}
	w.observe = obs.add
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); w.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Error("Run did not return after its context was cancelled")
		}
	})
	return w, obs
}

func waitNotify(t *testing.T, w *Watcher, what string) {
	t.Helper()
	select {
	case <-w.C():
	case <-time.After(10 * time.Second):
		t.Fatalf("no notification within 10s: %s", what)
	}
}

// noNotify fails if a notification is pending. Callers use it where no
// timer could have fired, so nothing can be in flight.
func noNotify(t *testing.T, w *Watcher, what string) {
	t.Helper()
	select {
	case <-w.C():
		t.Fatalf("unexpected notification: %s", what)
	default:
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func write(t *testing.T, p, s string) {
	t.Helper()
	must(t, os.WriteFile(p, []byte(s), 0o644))
}

// noRetry is a back-off that never fires within a test: a notification
// seen in time came from inotify.
var noRetry = wait.Backoff{Duration: time.Hour}

func TestNewValidates(t *testing.T) {
	dirs := func() []string { return nil }
	ok := Options{Dirs: dirs, Debounce: time.Second, Retry: wait.Backoff{Duration: time.Second}}
	for _, tc := range []struct {
		desc    string
		mutate  func(o *Options)
		wantErr string
	}{
		{desc: "valid", mutate: func(*Options) {}},
		{desc: "no Dirs", mutate: func(o *Options) { o.Dirs = nil }, wantErr: "Dirs is nil"},
		{desc: "no debounce", mutate: func(o *Options) { o.Debounce = 0 }, wantErr: "Debounce 0s"},
		{desc: "negative max delay", mutate: func(o *Options) { o.MaxDelay = -1 }, wantErr: "MaxDelay"},
		{desc: "negative rescan", mutate: func(o *Options) { o.Rescan = -1 }, wantErr: "Rescan"},
		{desc: "no retry", mutate: func(o *Options) { o.Retry = wait.Backoff{} }, wantErr: "Retry.Duration"},
		{desc: "negative factor", mutate: func(o *Options) { o.Retry.Factor = -1 }, wantErr: "Retry.Factor"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			o := ok
			tc.mutate(&o)
			w, err := New(o)
			if tc.wantErr == "" {
				if err != nil {
					t.Fatal(err)
				}
				if w.maxDelay != DefaultMaxDelayFactor*time.Second || w.clock == nil || w.log == nil {
					t.Errorf("defaults not applied: maxDelay %v clock %v log %v", w.maxDelay, w.clock, w.log)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("err = %v, want one containing %q", err, tc.wantErr)
			}
		})
	}
}

func TestNotifyAt(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	const debounce, maxDelay = 100 * time.Millisecond, time.Second
	for _, tc := range []struct {
		desc        string
		first, last time.Duration // after t0
		want        time.Duration
	}{
		{"one event", 0, 0, debounce},
		{"burst within the bound", 0, 500 * time.Millisecond, 600 * time.Millisecond},
		{"burst reaching the bound", 0, 950 * time.Millisecond, maxDelay},
		{"burst beyond the bound", 0, 5 * time.Second, maxDelay},
	} {
		if got := notifyAt(t0.Add(tc.first), t0.Add(tc.last), debounce, maxDelay); !got.Equal(t0.Add(tc.want)) {
			t.Errorf("%s: notifyAt = t0+%v, want t0+%v", tc.desc, got.Sub(t0), tc.want)
		}
	}
}

// TestInotify drives a watched directory through what editors, configuration
// managers and operators do to it, with real inotify and the real clock.
func TestInotify(t *testing.T) {
	parent := t.TempDir()
	dir := filepath.Join(parent, "manifests")
	must(t, os.Mkdir(dir, 0o755))
	w, obs := start(t, Options{
		Dirs:     func() []string { return []string{dir} },
		Relevant: manifestName,
		Debounce: 10 * time.Millisecond,
		Retry:    noRetry,
	})
	waitNotify(t, w, "the initial notification")

	a := filepath.Join(dir, "a.yaml")
	write(t, a, "v1")
	waitNotify(t, w, "a created")
	backofftest.WaitFor(t, func() bool { return obs.has(a, true) }, "a.yaml relevant")

	// Editor and hidden files are seen but ignored.
	for _, name := range []string{".a.yaml.swp", "a.yaml~", "4913", "notes.txt"} {
		p := filepath.Join(dir, name)
		write(t, p, "x")
		backofftest.WaitFor(t, func() bool { return obs.has(p, false) }, "%s", name+" ignored")
		if obs.has(p, true) {
			t.Errorf("%s counted as a change", name)
		}
	}

	// An atomic replace, the way configuration managers write.
	tmp := filepath.Join(dir, ".a.yaml.tmp")
	write(t, tmp, "v2")
	must(t, os.Rename(tmp, a))
	waitNotify(t, w, "a replaced")

	// The directory removed and created again: watched again.
	must(t, os.RemoveAll(dir))
	waitNotify(t, w, "directory removed")
	must(t, os.Mkdir(dir, 0o755))
	waitNotify(t, w, "directory re-created")
	b := filepath.Join(dir, "b.yaml")
	write(t, b, "v1")
	waitNotify(t, w, "b created in the re-created directory")
	backofftest.WaitFor(t, func() bool { return obs.has(b, true) }, "b.yaml relevant")

	// The directory moved away and created again: the new one is watched,
	// not the old one that the watch followed.
	must(t, os.Rename(dir, dir+".old"))
	must(t, os.Mkdir(dir, 0o755))
	waitNotify(t, w, "directory moved and re-created")
	obs.reset()
	c := filepath.Join(dir, "c.yaml")
	write(t, c, "v1")
	waitNotify(t, w, "c created in the new directory")
	backofftest.WaitFor(t, func() bool { return obs.has(c, true) }, "c.yaml relevant")
}

// TestDirectoryAppears starts with the directory missing: its parent is
// watched, so it is noticed at once when it appears (retries are an hour
// apart), and then watched itself. A file at the path counts as missing.
func TestDirectoryAppears(t *testing.T) {
	parent := t.TempDir()
	dir := filepath.Join(parent, "config.d")
	write(t, dir, "a file, not a directory")
	w, obs := start(t, Options{
		Dirs:     func() []string { return []string{dir} },
		Debounce: 10 * time.Millisecond,
		Retry:    noRetry,
	})
	waitNotify(t, w, "the initial notification")
	other := filepath.Join(parent, "unrelated")
	write(t, other, "x")
	backofftest.WaitFor(t, func() bool { return obs.has(other, false) }, "the parent's other entries ignored")

	must(t, os.Remove(dir))
	waitNotify(t, w, "the file removed")
	must(t, os.Mkdir(dir, 0o755))
	waitNotify(t, w, "the directory created")
	f := filepath.Join(dir, "10.conf")
	write(t, f, "x")
	waitNotify(t, w, "a file in the new directory")
	backofftest.WaitFor(t, func() bool { return obs.has(f, true) }, "10.conf relevant")
}

// TestDebounce uses a fake clock: the notification comes Debounce after
// the change, not before.
func TestDebounce(t *testing.T) {
	dir := t.TempDir()
	fc := testingclock.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	w, obs := start(t, Options{
		Dirs:     func() []string { return []string{dir} },
		Debounce: time.Second,
		Retry:    noRetry,
		Clock:    fc,
	})
	waitNotify(t, w, "the initial notification")
	if fc.HasWaiters() {
		t.Fatal("a timer is armed although nothing changed and every watch is in place")
	}

	// A mkdir is one inotify event (a file write is two, and a late second
	// one would arm the timer again after the step).
	p := filepath.Join(dir, "a")
	must(t, os.Mkdir(p, 0o755))
	backofftest.WaitFor(t, func() bool { return obs.has(p, true) }, "the event")
	backofftest.WaitFor(t, fc.HasWaiters, "the debounce timer")
	fc.Step(time.Second - time.Millisecond)
	noNotify(t, w, "before the debounce period passed")
	fc.Step(time.Millisecond)
	waitNotify(t, w, "after the debounce period")
	backofftest.WaitFor(t, func() bool { return !fc.HasWaiters() }, "the debounce timer to go")
}

// TestBurstBound uses a fake clock: a burst that never goes quiet is
// notified MaxDelay after its first change. Each change is a mkdir, one
// inotify event, so the test knows when Run has seen it.
func TestBurstBound(t *testing.T) {
	dir := t.TempDir()
	fc := testingclock.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	const ms = time.Millisecond
	w, obs := start(t, Options{
		Dirs:     func() []string { return []string{dir} },
		Debounce: 1000 * ms,
		MaxDelay: 3000 * ms,
		Retry:    noRetry,
		Clock:    fc,
	})
	waitNotify(t, w, "the initial notification")
	change := func(name string) {
		t.Helper()
		p := filepath.Join(dir, name)
		must(t, os.Mkdir(p, 0o755))
		backofftest.WaitFor(t, func() bool { return obs.has(p, true) }, "%s", "the event on "+name)
	}
	// step moves the clock, then waits for the debounce timer to be
	// armed again (it fires and re-arms itself while the burst goes on).
	step := func(d time.Duration) {
		t.Helper()
		fc.Step(d)
		backofftest.WaitFor(t, fc.HasWaiters, "the debounce timer")
		noNotify(t, w, "within the burst")
	}

	change("c0") // t0: due at t0+1s
	fc.Step(900 * ms)
	change("c1") // t0+0.9s: due at t0+1.9s
	step(100 * ms)
	step(800 * ms)
	change("c2") // t0+1.8s: due at t0+2.8s
	step(100 * ms)
	step(800 * ms)
	change("c3") // t0+2.7s: due at t0+3.7s, but the bound is t0+3s
	step(100 * ms)
	fc.Step(199 * ms)
	noNotify(t, w, "before the bound")
	fc.Step(1 * ms)
	waitNotify(t, w, "at the bound, 3s after the first change")
}

// TestRetry uses a fake clock: a directory whose parent is missing too
// cannot be watched; the watcher retries (and notifies) with the back-off
// it was given, watches it once it exists, and starts the back-off over
// after a success.
func TestRetry(t *testing.T) {
	base := t.TempDir()
	parent := filepath.Join(base, "etc")
	dir := filepath.Join(parent, "config.d")
	fc := testingclock.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	logs := &logSink{t: t}
	w, obs := start(t, Options{
		Dirs:     func() []string { return []string{dir} },
		Debounce: time.Second,
		Retry:    wait.Backoff{Duration: time.Second, Factor: 2, Cap: 4 * time.Second, Steps: math.MaxInt32},
		Clock:    fc,
		Logger:   slog.New(slog.NewTextHandler(logs, nil)),
	})
	waitNotify(t, w, "the initial notification")
	logs.waitFor(t, "Cannot watch directory; retrying", "dir="+parent)
	backofftest.WaitFor(t, fc.HasWaiters, "the retry timer")

	for _, delay := range []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 4 * time.Second} {
		fc.Step(delay - time.Millisecond)
		noNotify(t, w, "before the retry delay "+delay.String())
		fc.Step(time.Millisecond)
		waitNotify(t, w, "the retry after "+delay.String())
		backofftest.WaitFor(t, fc.HasWaiters, "the next retry timer")
	}

	// Created meanwhile: only the next retry can see it.
	must(t, os.MkdirAll(dir, 0o755))
	fc.Step(4 * time.Second)
	waitNotify(t, w, "the retry that finds the directory")
	logs.waitFor(t, "Watching every directory again")
	backofftest.WaitFor(t, func() bool { return !fc.HasWaiters() }, "no timer once everything is watched")

	p := filepath.Join(dir, "10.d") // a mkdir: one event, see TestDebounce
	must(t, os.Mkdir(p, 0o755))
	backofftest.WaitFor(t, func() bool { return obs.has(p, true) }, "the event")
	backofftest.WaitFor(t, fc.HasWaiters, "the debounce timer")
	fc.Step(time.Second)
	waitNotify(t, w, "the change in the watched directory")

	// Lost again: the back-off starts over at 1s.
	must(t, os.RemoveAll(parent))
	backofftest.WaitFor(t, func() bool { return obs.has(dir, true) }, "the removal")
	backofftest.WaitFor(t, fc.HasWaiters, "the debounce timer")
	fc.Step(time.Second)
	waitNotify(t, w, "the removal")
	backofftest.WaitFor(t, fc.HasWaiters, "the retry timer")
	fc.Step(time.Second)
	waitNotify(t, w, "the first retry, 1s after the failure")
}

// TestRescanAndTrigger: the periodic notification, and Trigger's.
func TestRescanAndTrigger(t *testing.T) {
	dir := t.TempDir()
	fc := testingclock.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	w, _ := start(t, Options{
		Dirs:     func() []string { return []string{dir} },
		Debounce: time.Second,
		Rescan:   time.Minute,
		Retry:    noRetry,
		Clock:    fc,
	})
	waitNotify(t, w, "the initial notification")
	backofftest.WaitFor(t, fc.HasWaiters, "the rescan ticker")
	fc.Step(time.Minute - time.Millisecond)
	noNotify(t, w, "before the rescan period")
	fc.Step(time.Millisecond)
	waitNotify(t, w, "the rescan")

	w.Trigger()
	w.Trigger() // coalesces
	waitNotify(t, w, "the trigger")
}

// TestDirsChange: the directories are asked for again at every check; a
// new one is watched, one no longer returned is not.
func TestDirsChange(t *testing.T) {
	d1, d2 := t.TempDir(), t.TempDir()
	var cur atomic.Pointer[string]
	cur.Store(&d1)
	w, obs := start(t, Options{
		Dirs:     func() []string { return []string{*cur.Load()} },
		Debounce: 10 * time.Millisecond,
		Retry:    noRetry,
	})
	waitNotify(t, w, "the initial notification")
	cur.Store(&d2)
	w.Trigger()
	waitNotify(t, w, "the trigger")

	old, p := filepath.Join(d1, "a"), filepath.Join(d2, "a")
	write(t, old, "x")
	write(t, p, "x")
	waitNotify(t, w, "the change in the new directory")
	backofftest.WaitFor(t, func() bool { return obs.has(p, true) }, "the event in the new directory")
	if obs.has(old, true) || obs.has(old, false) {
		t.Errorf("an event in the directory no longer returned was seen")
	}
}

// TestCoalesce: notifications that find one pending are dropped, never
// blocking the watcher.
func TestCoalesce(t *testing.T) {
	dir := t.TempDir()
	w, _ := start(t, Options{
		Dirs:     func() []string { return []string{dir} },
		Debounce: time.Millisecond,
		Retry:    noRetry,
	})
	for i := range 5 {
		w.Trigger()
		write(t, filepath.Join(dir, "f"), strings.Repeat("x", i))
	}
	backofftest.WaitFor(t, func() bool { return len(w.C()) == 1 }, "a pending notification")
	// The watcher still runs: after the pending one is taken, a new
	// change notifies again.
	<-w.C()
	write(t, filepath.Join(dir, "g"), "x")
	waitNotify(t, w, "a change after the coalesced ones")
}
