// Package dirwatch tells its consumer when the contents of a few
// directories may have changed, so that the consumer re-reads them: the
// agent's configuration files and drop-ins, the static pod manifests.
//
// Contract:
//
//   - Notifications carry no data: each says "re-read now". They come
//     through C, a channel that holds one; a notification that finds one
//     pending is dropped, since the pending one already asks for a re-read
//     that will see every change so far (coalescing: the watcher never
//     blocks on a slow consumer and keeps draining inotify).
//   - Run sends one notification as soon as its first watches are in
//     place, so a consumer that re-reads on it misses no change made
//     before Run started. After that, a change is followed by a
//     notification sent after the change:
//   - Changes are the inotify events (any, Chmod included) on the entries
//     directly inside a watched directory that Options.Relevant accepts,
//     and any event on a watched directory itself (created, removed,
//     renamed). A burst of them is debounced: the notification comes
//     Debounce after the last one, but no later than MaxDelay after the
//     first, so a directory that never stops changing is still re-read.
//   - A directory that is missing (or not a directory) is not an error:
//     its parent is watched until it appears, then it is watched itself.
//     A directory removed or moved away and created again is watched again
//     (watches are checked against the directory's device and inode).
//   - A directory that cannot be watched (its parent is missing too,
//     inotify limits, permissions) is logged once per distinct problem
//     and retried with Options.Retry's back-off; every retry also
//     notifies, so that the consumer polls meanwhile. The back-off starts
//     over once everything is watched.
//   - With Options.Rescan, a notification is also sent every Rescan: the
//     safety net for what inotify cannot see (a symlinked file's target
//     changing in another directory).
//   - Trigger (for SIGHUP) re-checks the watches and notifies at once.
//   - Options.Dirs is called at every re-check (start, after a debounced
//     burst, on retry, rescan and Trigger), so a set of directories that
//     changes (the directory of a symlink's target) is followed;
//     directories it no longer returns stop being watched.
//
// Run owns all state and runs the Dirs and Relevant callbacks on its own
// goroutine; C and Trigger may be used from any goroutine.
package dirwatch

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/fsnotify/fsnotify"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/clock"
)

// DefaultMaxDelayFactor is MaxDelay in Debounce periods when Options.MaxDelay
// is zero.
const DefaultMaxDelayFactor = 10

// Options configures a Watcher.
type Options struct {
	// Dirs returns the directories to watch. Required. Paths are cleaned;
	// they should be absolute. It runs on Run's goroutine.
	Dirs func() []string
	// Relevant reports whether an event on an entry of a watched
	// directory may matter to the consumer; others are ignored (events on
	// the watched directories themselves always matter). Nil accepts
	// everything. It runs on Run's goroutine and must be quick.
	Relevant func(fsnotify.Event) bool
	// Debounce is the quiet time after the last relevant event before the
	// notification. Required (> 0).
	Debounce time.Duration
	// MaxDelay bounds the debounce of a continuous burst: the notification
	// comes at most MaxDelay after the burst's first event. Zero means
	// DefaultMaxDelayFactor × Debounce.
	MaxDelay time.Duration
	// Rescan is the period of the safety-net notification. Zero turns it
	// off.
	Rescan time.Duration
	// Retry is the back-off between attempts to watch a directory that
	// cannot be watched. Duration is required (> 0); with Steps ≤ 0 the
	// delay stays Duration (wait.Backoff's semantics). Name the values at
	// the call site.
	Retry wait.Backoff
	// Clock drives debounce, rescan and retries. Nil means the real clock.
	Clock clock.Clock
	// Logger receives the watcher's logs. Nil discards them.
	Logger *slog.Logger
}

// Watcher watches directories; see the package documentation.
type Watcher struct {
	dirs     func() []string
	relevant func(fsnotify.Event) bool
	debounce time.Duration
	maxDelay time.Duration
	rescan   time.Duration
	retry    wait.Backoff
	clock    clock.Clock // For testability.
	log      *slog.Logger

	notify  chan struct{} // 1-buffered: notifications coalesce
	trigger chan struct{} // 1-buffered: triggers coalesce
	started atomic.Bool

	// observe, if set (tests), sees every event Run handles and whether
	// it counted as a change.
	observe func(ev fsnotify.Event, relevant bool)

	// Owned by Run.
	fw       *fsnotify.Watcher
	wanted   map[string]bool  // Dirs() at the last check
	watches  map[string]dirID // paths watched, with the inode watched
	problems map[string]string
	nextWait func() time.Duration // the retry back-off of the current failure streak
}

// dirID identifies a directory inode: a path that names another directory
// than the one watched (moved away and re-created) is watched again.
type dirID struct{ dev, ino uint64 }

// New validates o and returns a Watcher; Run starts it.
func New(o Options) (*Watcher, error) {
	var errs []error
	if o.Dirs == nil {
		errs = append(errs, errors.New("Dirs is nil"))
	}
	if o.Debounce <= 0 {
		errs = append(errs, fmt.Errorf("Debounce %v is not positive", o.Debounce))
	}
	if o.MaxDelay < 0 {
		errs = append(errs, fmt.Errorf("MaxDelay %v is negative", o.MaxDelay))
	}
	if o.Rescan < 0 {
		errs = append(errs, fmt.Errorf("Rescan %v is negative", o.Rescan))
	}
	if o.Retry.Duration <= 0 {
		errs = append(errs, fmt.Errorf("Retry.Duration %v is not positive", o.Retry.Duration))
	}
	if o.Retry.Factor < 0 || o.Retry.Jitter < 0 {
		errs = append(errs, fmt.Errorf("Retry.Factor %v or Retry.Jitter %v is negative", o.Retry.Factor, o.Retry.Jitter))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("dirwatch: %w", err)
	}
	w := &Watcher{
		dirs:     o.Dirs,
		relevant: o.Relevant,
		debounce: o.Debounce,
		maxDelay: o.MaxDelay,
		rescan:   o.Rescan,
		retry:    o.Retry,
		clock:    o.Clock,
		log:      o.Logger,
		notify:   make(chan struct{}, 1),
		trigger:  make(chan struct{}, 1),
		wanted:   map[string]bool{},
		watches:  map[string]dirID{},
		problems: map[string]string{},
	}
	if w.maxDelay == 0 {
		w.maxDelay = DefaultMaxDelayFactor * w.debounce
	}
	if w.clock == nil {
		w.clock = clock.RealClock{}
	}
	if w.log == nil {
		w.log = slog.New(slog.DiscardHandler)
	}
	return w, nil
}

// C delivers the notifications. It holds at most one; it is never closed.
func (w *Watcher) C() <-chan struct{} { return w.notify }

// Trigger asks Run to re-check its watches and notify now. It never
// blocks; triggers that arrive while one is pending coalesce.
func (w *Watcher) Trigger() {
	select {
	case w.trigger <- struct{}{}:
	default:
	}
}

// Run watches until ctx is done. It may be called once; later calls return
// at once.
func (w *Watcher) Run(ctx context.Context) {
	if !w.started.CompareAndSwap(false, true) {
		w.log.Error("dirwatch: Run called twice; ignoring the second call")
		return
	}
	defer w.closeWatcher()

	var (
		debounce, retry   clock.Timer // armed while a burst is pending / while a watch is missing
		debounceC, retryC <-chan time.Time
		first, last       time.Time   // first and latest event of the pending burst
		rescan            clock.Timer // re-armed when it fires: a period, not a deadline
		rescanC           <-chan time.Time
	)
	stop := func(t *clock.Timer, c *<-chan time.Time) {
		if *t != nil {
			(*t).Stop()
			*t, *c = nil, nil
		}
	}
	defer func() { stop(&debounce, &debounceC); stop(&retry, &retryC); stop(&rescan, &rescanC) }()
	if w.rescan > 0 {
		rescan = w.clock.NewTimer(w.rescan)
		rescanC = rescan.C()
	}

	// check re-checks the watches and notifies; the notification covers
	// every event so far, so a pending burst is done with.
	check := func() {
		stop(&debounce, &debounceC)
		if w.ensureWatches() {
			stop(&retry, &retryC)
			w.nextWait = nil
		} else if retry == nil {
			if w.nextWait == nil {
				w.nextWait = w.retry.DelayFunc()
			}
			retry = w.clock.NewTimer(w.nextWait())
			retryC = retry.C()
		}
		w.send()
	}
	check()

	for {
		var events <-chan fsnotify.Event
		var errs <-chan error
		if w.fw != nil {
			events, errs = w.fw.Events, w.fw.Errors
		}
		select {
		case <-ctx.Done():
			return
		case <-w.trigger:
			check()
		case ev, ok := <-events:
			if !ok {
				w.log.Error("inotify watcher closed unexpectedly; re-creating it")
				w.closeWatcher()
				check()
				continue
			}
			now := w.clock.Now()
			if !w.handle(ev) {
				continue
			}
			last = now
			if debounce == nil {
				first = last
				debounce = w.clock.NewTimer(w.debounce)
				debounceC = debounce.C()
			}
			// An armed timer stays; when it fires it re-arms itself if the
			// burst went on (see notifyAt).
		case err, ok := <-errs:
			if !ok {
				continue // Events reports the closed watcher
			}
			if errors.Is(err, fsnotify.ErrEventOverflow) {
				w.log.Warn("inotify queue overflowed; re-reading", "err", err)
			} else {
				w.log.Error("inotify watcher error; re-reading", "err", err)
			}
			check()
		case <-debounceC:
			debounce, debounceC = nil, nil
			now := w.clock.Now()
			if at := notifyAt(first, last, w.debounce, w.maxDelay); now.Before(at) {
				debounce = w.clock.NewTimer(at.Sub(now))
				debounceC = debounce.C()
				continue
			}
			check()
		case <-retryC:
			retry, retryC = nil, nil
			check()
		case <-rescanC:
			rescan.Reset(w.rescan)
			check()
		}
	}
}

// notifyAt is when a burst of changes that began at first, and whose
// latest change came at last, is notified: debounce after the latest
// change, but no later than maxDelay after the first.
func notifyAt(first, last time.Time, debounce, maxDelay time.Duration) time.Time {
	at := last.Add(debounce)
	if limit := first.Add(maxDelay); at.After(limit) {
		return limit
	}
	return at
}

// send notifies, unless a notification is pending already.
func (w *Watcher) send() {
	select {
	case w.notify <- struct{}{}:
	default:
	}
}

// handle classifies one event and reports whether it is a change to
// notify: any event on a wanted directory itself (seen by its own watch or
// by its parent's), and the events on its entries that Relevant accepts.
// Events on a parent's other entries are not.
func (w *Watcher) handle(ev fsnotify.Event) bool {
	var rel bool
	switch {
	case w.wanted[ev.Name]:
		if ev.Has(fsnotify.Remove) || ev.Has(fsnotify.Rename) {
			// The watch is gone or follows the directory elsewhere:
			// drop it so that the next check watches the path again.
			if _, ok := w.watches[ev.Name]; ok {
				_ = w.fw.Remove(ev.Name)
				delete(w.watches, ev.Name)
			}
		}
		rel = true
	case w.wanted[filepath.Dir(ev.Name)]:
		rel = w.relevant == nil || w.relevant(ev)
	}
	if w.observe != nil {
		w.observe(ev, rel)
	}
	return rel
}

// ensureWatches makes the watches match the wanted directories: each one
// that exists is watched, the parent of each one that does not, nothing
// else. It reports whether every watch is in place. A directory that
// appears or vanishes while the watches are set up is looked at again.
func (w *Watcher) ensureWatches() bool {
	hadProblems := len(w.problems) > 0
	ok := false // if it keeps changing, the retry looks again soon
	for range 3 {
		var stable bool
		if ok, stable = w.syncWatches(); stable {
			break
		}
		ok = false
	}
	if ok && hadProblems && len(w.problems) == 0 {
		w.log.Info("Watching every directory again", "dirs", slices.Sorted(maps.Keys(w.wanted)))
	}
	return ok
}

// syncWatches is one pass of ensureWatches; stable is false if a wanted
// directory appeared or vanished during the pass.
func (w *Watcher) syncWatches() (ok, stable bool) {
	if w.fw == nil {
		fw, err := fsnotify.NewWatcher()
		if err != nil {
			w.problem("", fmt.Errorf("creating inotify watcher: %w", err))
			return false, true
		}
		w.fw = fw
		w.resolved("")
	}
	wanted := map[string]bool{}
	for _, d := range w.dirs() {
		wanted[filepath.Clean(d)] = true
	}
	w.wanted = wanted
	exists := map[string]bool{}
	desired := map[string]bool{}
	for d := range wanted {
		if isDir(d) {
			exists[d] = true
			desired[d] = true
		} else {
			desired[filepath.Dir(d)] = true
		}
	}

	// Drop watches no longer desired, lost (fsnotify drops a watch whose
	// directory was removed or moved), or on a path that names another
	// directory now.
	active := map[string]bool{}
	for _, p := range w.fw.WatchList() {
		active[p] = true
	}
	for p, id := range w.watches {
		if cur, err := statDir(p); !desired[p] || !active[p] || err != nil || cur != id {
			_ = w.fw.Remove(p) // may be gone already
			delete(w.watches, p)
		}
	}

	ok = true
	for _, p := range slices.Sorted(maps.Keys(desired)) {
		if _, watched := w.watches[p]; watched {
			continue
		}
		id, err := w.add(p)
		if err != nil {
			ok = false
			w.problem(p, err)
			continue
		}
		w.watches[p] = id
		w.resolved(p)
		if wanted[p] {
			w.log.Debug("Watching directory", "dir", p)
		} else {
			w.log.Debug("Watching the parent of a missing directory", "dir", p)
		}
	}
	for p := range w.problems {
		if p != "" && !desired[p] {
			delete(w.problems, p) // no longer wanted: forget its problem
		}
	}

	// A directory that appeared before its parent's watch, or vanished
	// before its own, sent no event we saw.
	for d := range wanted {
		if isDir(d) != exists[d] {
			return ok, false
		}
	}
	return ok, true
}

// add watches directory p and returns the inode watched. If p is replaced
// while it is being added, it reports an error: the watch may be on the
// old directory.
func (w *Watcher) add(p string) (dirID, error) {
	before, err := statDir(p)
	if err != nil {
		return dirID{}, err
	}
	if err := w.fw.Add(p); err != nil {
		return dirID{}, fmt.Errorf("watching %s: %w", p, err)
	}
	after, err := statDir(p)
	if err != nil || after != before {
		_ = w.fw.Remove(p)
		return dirID{}, fmt.Errorf("%s was replaced while it was being watched", p)
	}
	return before, nil
}

// problem logs a watch problem of path p ("" for the inotify instance)
// unless it is the one logged last for p.
func (w *Watcher) problem(p string, err error) {
	msg := err.Error()
	if w.problems[p] == msg {
		return
	}
	w.problems[p] = msg
	if p == "" {
		w.log.Error("Cannot watch directories; retrying", "err", err)
	} else {
		w.log.Error("Cannot watch directory; retrying", "dir", p, "err", err)
	}
}

// resolved forgets the problem of path p; ensureWatches logs the recovery
// once every problem is over.
func (w *Watcher) resolved(p string) { delete(w.problems, p) }

func (w *Watcher) closeWatcher() {
	if w.fw != nil {
		_ = w.fw.Close()
		w.fw = nil
	}
	clear(w.watches)
}

func isDir(p string) bool {
	_, err := statDir(p)
	return err == nil
}

// statDir returns the identity of directory p, or an error if p does not
// name a directory.
func statDir(p string) (dirID, error) {
	fi, err := os.Stat(p)
	if err != nil {
		return dirID{}, err
	}
	if !fi.IsDir() {
		return dirID{}, &fs.PathError{Op: "watch", Path: p, Err: syscall.ENOTDIR}
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return dirID{}, nil
	}
	return dirID{dev: uint64(st.Dev), ino: st.Ino}, nil
}
