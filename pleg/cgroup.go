package pleg

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/fsnotify/fsnotify"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/clock"

	"github.com/nodeagent/nodeagent/internal/mountinfo"
	"github.com/nodeagent/nodeagent/runtime"
)

// cgroupEvent is what the cgroup watcher tells the PLEG.
type cgroupEvent struct {
	containerID string
	exited      bool  // cgroup.events says populated 0, or the directory went away
	created     bool  // the container's directory appeared
	overflow    bool  // the inotify queue overflowed: events were lost
	failed      error // the source cannot watch every running container
	recovered   bool  // it can again
}

// cgroupWatcher watches the cgroup v2 directory of every running container
// (its cgroup.events, and the directory's removal) and the parent
// directories (creation of container directories) with inotify. It finds a
// container's directory from its init process (/proc/<pid>/cgroup, the
// "0::" line), falling back to the OCI spec's cgroupsPath, so no layout is
// assumed. It works on pure cgroup v2 and on hybrid hosts, where runc also
// places containers in the unified hierarchy.
//
// One goroutine, run, does all of its file I/O (reading /proc and cgroup
// files, adding and removing inotify watches) and owns the watch state. The
// PLEG only records what it wants watched (track), in memory, under a lock
// that is never held during I/O; run acts on it. signal is called from run
// with no lock held.
//
// Running out of inotify (no instance: fs.inotify.max_user_instances; no
// watch: fs.inotify.max_user_watches) is not fatal: what could not be
// watched is remembered, the source reports itself failing (the PLEG relists
// at its fallback period meanwhile), and run retries with backoff (1s
// doubling to 10s) until everything is watched, then reports recovery.
type cgroupWatcher struct {
	root       string
	log        *slog.Logger
	signal     func(cgroupEvent)
	clock      clock.WithTicker
	newInotify func() (inotify, error)
	w          inotify // nil until an inotify instance could be created

	// mu guards the PLEG's requests.
	mu      sync.Mutex
	want    map[string]bool              // running containers the PLEG wants watched
	changes map[string]cgroupTrackChange // requests run has not acted on yet
	kick    chan struct{}                // 1-buffered: there are requests

	// Owned by run (and by newCgroupWatcher before run starts).
	dirs    map[string]string // container ID -> watched dir
	byDir   map[string]string // watched container dir -> container ID
	podDirs map[string]bool   // watched directories whose new children may be containers
	// podRoots are the configured pod parents (absolute); waiting maps a
	// watched existing ancestor to the pod roots not created yet below it.
	podRoots map[string]bool
	waiting  map[string][]string
	missing  map[string]runtime.Container // running but not watched
	// missingDirs are pod directories (false) and pod roots (true) that
	// could not be watched: containers created in them would go unseen.
	missingDirs map[string]bool
	failing     bool  // reported as failing
	lastErr     error // why the last watch (or inotify instance) failed
}

// inotify is what the cgroup watcher needs of an inotify instance:
// fsnotify's Watcher, or a fake in tests.
type inotify interface {
	Add(name string) error
	Remove(name string) error
	Close() error
	Events() <-chan fsnotify.Event
	Errors() <-chan error
}

type fsnotifyWatcher struct{ *fsnotify.Watcher }

func (w fsnotifyWatcher) Events() <-chan fsnotify.Event { return w.Watcher.Events }
func (w fsnotifyWatcher) Errors() <-chan error          { return w.Watcher.Errors }

func newFsnotify() (inotify, error) {
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return nil, err
	}
	return fsnotifyWatcher{w}, nil
}

// newWatchRetryBackoff is the wait before retrying what could not be
// watched: 1s doubling to 10s, so a freed limit is noticed within 10s.
func newWatchRetryBackoff() wait.Backoff {
	return wait.Backoff{Duration: time.Second, Factor: 2, Steps: math.MaxInt32, Cap: 10 * time.Second}
}

// cgroupTrackChange is a request to start (running) or stop watching c.
type cgroupTrackChange struct {
	c       runtime.Container
	running bool
}

// findCgroup2Root returns the mount point of the cgroup2 filesystem.
func findCgroup2Root() (string, error) {
	ms, err := mountinfo.Read()
	if err != nil {
		return "", err
	}
	for _, m := range ms {
		if m.FSType == "cgroup2" {
			return m.MountPoint, nil
		}
	}
	return "", errors.New("no cgroup2 (unified) hierarchy mounted")
}

func newCgroupWatcher(root string, podParents []string, log *slog.Logger, signal func(cgroupEvent)) (*cgroupWatcher, error) {
	return newCgroupWatcherWith(root, podParents, log, signal, clock.RealClock{}, newFsnotify)
}

// newCgroupWatcherWith is newCgroupWatcher with the clock (for the retry
// backoff) and the inotify constructor given. It fails only when root is
// not a cgroup2 mount; running out of inotify is retried by run.
func newCgroupWatcherWith(root string, podParents []string, log *slog.Logger, signal func(cgroupEvent),
	clk clock.WithTicker, newInotify func() (inotify, error)) (*cgroupWatcher, error) {
	if root == "" {
		var err error
		if root, err = findCgroup2Root(); err != nil {
			return nil, fmt.Errorf("cgroup event source: %w", err)
		}
	}
	if _, err := os.Stat(filepath.Join(root, "cgroup.controllers")); err != nil {
		return nil, fmt.Errorf("cgroup event source: %s is not a cgroup2 mount: %w", root, err)
	}
	cw := &cgroupWatcher{
		root: root, log: log, signal: signal, clock: clk, newInotify: newInotify,
		want: map[string]bool{}, changes: map[string]cgroupTrackChange{}, kick: make(chan struct{}, 1),
		dirs: map[string]string{}, byDir: map[string]string{}, podDirs: map[string]bool{},
		podRoots: map[string]bool{}, waiting: map[string][]string{}, missing: map[string]runtime.Container{},
		missingDirs: map[string]bool{},
	}
	for _, pp := range podParents {
		cw.podRoots[filepath.Join(root, runtime.CgroupfsPath(pp))] = true
	}
	if err := cw.open(); err != nil {
		cw.lastErr = err // run reports it and retries
	}
	return cw, nil
}

// open creates the inotify instance and watches the pod roots. On failure
// nothing is kept, and it can be called again.
func (cw *cgroupWatcher) open() error {
	w, err := cw.newInotify()
	if err != nil {
		if errors.Is(err, syscall.EMFILE) {
			return fmt.Errorf("cgroup event source: inotify instance limit reached (fs.inotify.max_user_instances): %w", err)
		}
		return fmt.Errorf("cgroup event source: inotify: %w", err)
	}
	cw.w = w
	roots := make([]string, 0, len(cw.podRoots))
	for dir := range cw.podRoots {
		roots = append(roots, dir)
	}
	sort.Strings(roots) // parents before the roots nested in them
	for _, dir := range roots {
		if err := cw.watchPodRoot(dir, false); err != nil {
			w.Close()
			cw.w = nil
			cw.podDirs, cw.waiting, cw.missingDirs = map[string]bool{}, map[string][]string{}, map[string]bool{}
			return fmt.Errorf("cgroup event source: %w", err)
		}
	}
	return nil
}

// watchPodRoot watches a configured pod parent, or its nearest
// existing ancestor until it is created. Pod directories already in it are
// watched too; announce makes their containers inspected.
func (cw *cgroupWatcher) watchPodRoot(dir string, announce bool) error {
	if _, err := os.Stat(dir); err != nil {
		anc := filepath.Dir(dir)
		for anc != cw.root && anc != "/" {
			if _, err := os.Stat(anc); err == nil {
				break
			}
			anc = filepath.Dir(anc)
		}
		if err := cw.w.Add(anc); err != nil {
			return watchErr(anc, err)
		}
		if !slices.Contains(cw.waiting[anc], dir) {
			cw.waiting[anc] = append(cw.waiting[anc], dir)
		}
		// It may have been created meanwhile.
		if _, err := os.Stat(dir); err != nil {
			return nil
		}
	}
	if err := cw.w.Add(dir); err != nil {
		return watchErr(dir, err)
	}
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		// A pod root may hold others (kubepods holds burstable and
		// besteffort); those are watched as roots, not as pods.
		if child := filepath.Join(dir, e.Name()); e.IsDir() && !cw.podRoots[child] {
			cw.watchPodDir(child, announce)
		}
	}
	return nil
}

// watchPodDir watches a directory whose new subdirectories may be
// containers; announce makes the existing ones inspected. A directory that
// cannot be watched (but exists) is remembered in missingDirs and retried:
// until then, containers created in it would be seen only by relisting.
func (cw *cgroupWatcher) watchPodDir(dir string, announce bool) {
	if cw.podDirs[dir] {
		return
	}
	if err := cw.w.Add(dir); err != nil {
		if errors.Is(err, os.ErrNotExist) {
			delete(cw.missingDirs, dir)
			return
		}
		cw.missingDirs[dir] = false
		cw.lastErr = watchErr(dir, err)
		cw.log.Debug("cannot watch pod cgroup", "dir", dir, "err", err)
		return
	}
	delete(cw.missingDirs, dir)
	cw.podDirs[dir] = true
	if !announce {
		return
	}
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		if e.IsDir() && cw.byDir[filepath.Join(dir, e.Name())] == "" {
			cw.signal(cgroupEvent{containerID: containerIDOfDir(e.Name()), created: true})
		}
	}
}

// dirOf finds the container's cgroup v2 directory. gone is true when the
// init process no longer exists (the container exited meanwhile).
func (cw *cgroupWatcher) dirOf(c runtime.Container) (dir string, gone bool, err error) {
	if c.Pid > 0 {
		data, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", c.Pid))
		if errors.Is(err, os.ErrNotExist) {
			return "", true, nil
		}
		if err == nil {
			for _, l := range strings.Split(string(data), "\n") {
				if rest, ok := strings.CutPrefix(l, "0::"); ok {
					return filepath.Join(cw.root, rest), false, nil
				}
			}
		}
	}
	if c.CgroupsPath == "" {
		return "", false, fmt.Errorf("container %s: cgroup path unknown", c.ID)
	}
	return filepath.Join(cw.root, runtime.CgroupfsPath(c.CgroupsPath)), false, nil
}

// track records that c is running (watch it) or not (stop watching it);
// run acts on it. It does no I/O, so the PLEG calls it under its lock.
func (cw *cgroupWatcher) track(c runtime.Container, running bool) {
	cw.mu.Lock()
	defer cw.mu.Unlock()
	if cw.want[c.ID] == running {
		return
	}
	if running {
		cw.want[c.ID] = true
	} else {
		delete(cw.want, c.ID)
	}
	cw.changes[c.ID] = cgroupTrackChange{c: c, running: running}
	poke(cw.kick)
}

// reconcile takes the PLEG's requests and acts on them: it watches the
// containers that started running, stops watching those that stopped and,
// when retry is set, retries the missing containers and pod directories.
// Only run calls it, once the inotify instance exists.
func (cw *cgroupWatcher) reconcile(retry bool) {
	cw.mu.Lock()
	changes := cw.changes
	cw.changes = map[string]cgroupTrackChange{}
	cw.mu.Unlock()
	try := func(c runtime.Container) {
		if err := cw.watch(c); err != nil {
			cw.missing[c.ID] = c
			cw.lastErr = err
			return
		}
		delete(cw.missing, c.ID)
	}
	for id, ch := range changes {
		switch _, watched := cw.dirs[id]; {
		case !ch.running:
			delete(cw.missing, id)
			cw.unwatch(id)
		case !watched:
			try(ch.c)
		}
	}
	if retry {
		for id, c := range cw.missing {
			if _, tried := changes[id]; !tried {
				try(c)
			}
		}
		for dir, isRoot := range cw.missingDirs {
			if !isRoot {
				cw.watchPodDir(dir, true)
				continue
			}
			if err := cw.watchPodRoot(dir, true); err != nil {
				cw.lastErr = err
				continue
			}
			delete(cw.missingDirs, dir)
		}
	}
}

// watch starts watching a running container's cgroup directory.
func (cw *cgroupWatcher) watch(c runtime.Container) error {
	dir, gone, err := cw.dirOf(c)
	if gone {
		// Exited between observation and now: have it inspected again.
		cw.signal(cgroupEvent{containerID: c.ID, exited: true})
		return nil
	}
	if err != nil {
		return err
	}
	if err := cw.w.Add(dir); err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("container %s: cgroup directory %s not found: %w", c.ID, dir, err)
		}
		return fmt.Errorf("container %s: %w", c.ID, watchErr(dir, err))
	}
	cw.watchPodDir(filepath.Dir(dir), false)
	cw.dirs[c.ID] = dir
	cw.byDir[dir] = c.ID
	// The process may have exited before the watch existed.
	if populated, err := readPopulated(dir); err == nil && !populated {
		cw.signal(cgroupEvent{containerID: c.ID, exited: true})
	}
	return nil
}

func (cw *cgroupWatcher) unwatch(id string) {
	dir, ok := cw.dirs[id]
	if !ok {
		return
	}
	delete(cw.dirs, id)
	delete(cw.byDir, dir)
	_ = cw.w.Remove(dir) // fails harmlessly when the directory is gone
}

// watchErr names the limit when adding a watch failed for want of watches.
func watchErr(dir string, err error) error {
	if isWatchLimit(err) {
		return fmt.Errorf("watch %s: inotify watch limit reached (fs.inotify.max_user_watches): %w", dir, err)
	}
	return fmt.Errorf("watch %s: %w", dir, err)
}

// updateHealth reports whether the source sees everything (an inotify
// instance, every running container and pod directory watched), when that
// changes.
func (cw *cgroupWatcher) updateHealth() {
	failing := cw.w == nil || len(cw.missing) > 0 || len(cw.missingDirs) > 0
	if failing == cw.failing {
		return
	}
	cw.failing = failing
	switch {
	case !failing:
		cw.signal(cgroupEvent{recovered: true})
	case cw.w == nil:
		cw.signal(cgroupEvent{failed: cw.lastErr})
	default:
		cw.signal(cgroupEvent{failed: fmt.Errorf("%d running containers and %d pod cgroups unwatched, last error: %w", len(cw.missing), len(cw.missingDirs), cw.lastErr)})
	}
}

func readPopulated(dir string) (bool, error) {
	data, err := os.ReadFile(filepath.Join(dir, "cgroup.events"))
	if err != nil {
		return false, err
	}
	for _, l := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(l, "populated "); ok {
			n, err := strconv.Atoi(strings.TrimSpace(v))
			return n != 0, err
		}
	}
	return false, errors.New("no populated line in cgroup.events")
}

// run does the watcher's work until ctx is done, then closes the inotify
// watcher. While something cannot be watched (or there is no inotify
// instance) it retries with backoff.
func (cw *cgroupWatcher) run(ctx context.Context) {
	var retry clock.Timer
	defer func() {
		if retry != nil {
			retry.Stop()
		}
		if cw.w != nil {
			cw.w.Close()
		}
	}()
	bo := newWatchRetryBackoff()
	if cw.w != nil {
		cw.reconcile(false)
	}
	for {
		cw.updateHealth()
		switch {
		case !cw.failing:
			if retry != nil {
				retry.Stop()
				retry = nil
			}
			bo = newWatchRetryBackoff()
		case retry == nil:
			d := bo.Step()
			cw.log.Debug("cgroup event source: retrying unwatched cgroups", "in", d, "err", cw.lastErr)
			retry = cw.clock.NewTimer(d)
		}
		var retryC <-chan time.Time
		if retry != nil {
			retryC = retry.C()
		}
		var events <-chan fsnotify.Event
		var errs <-chan error
		if cw.w != nil {
			events, errs = cw.w.Events(), cw.w.Errors()
		}
		select {
		case <-ctx.Done():
			return
		case <-cw.kick:
			if cw.w != nil {
				cw.reconcile(false)
			} // else the requests wait for the instance
		case <-retryC:
			retry = nil
			if cw.w == nil {
				if err := cw.open(); err != nil {
					cw.lastErr = err
					continue
				}
				cw.reconcile(false)
				continue
			}
			cw.reconcile(true)
		case err, ok := <-errs:
			if !ok {
				return
			}
			if errors.Is(err, fsnotify.ErrEventOverflow) {
				cw.log.Warn("inotify queue overflow, relisting", "err", err)
				cw.signal(cgroupEvent{overflow: true})
				continue
			}
			cw.log.Warn("inotify error", "err", err)
		case ev, ok := <-events:
			if !ok {
				return
			}
			cw.handle(ev)
		}
	}
}

func (cw *cgroupWatcher) handle(ev fsnotify.Event) {
	dir, base := filepath.Dir(ev.Name), filepath.Base(ev.Name)
	var id string
	exited, created := false, false
	switch {
	case base == "cgroup.events" && ev.Has(fsnotify.Write):
		id = cw.byDir[dir]
		if id != "" {
			if populated, err := readPopulated(dir); err == nil && !populated {
				exited = true
			}
		}
	case ev.Has(fsnotify.Remove) && cw.byDir[ev.Name] != "":
		id, exited = cw.byDir[ev.Name], true
	case ev.Has(fsnotify.Remove) && cw.podDirs[ev.Name]:
		delete(cw.podDirs, ev.Name)
	case ev.Has(fsnotify.Create) && cw.podRoots[dir] && !cw.podRoots[ev.Name]:
		// A new pod directory: watch it, inspect what it already holds.
		cw.watchPodDir(ev.Name, true)
	case ev.Has(fsnotify.Create) && len(cw.waiting[dir]) > 0:
		var still []string
		for _, target := range cw.waiting[dir] {
			if target == ev.Name || strings.HasPrefix(target, ev.Name+"/") {
				if err := cw.watchPodRoot(target, true); err != nil {
					cw.log.Warn("cannot watch pod cgroup parent", "dir", target, "err", err)
					cw.missingDirs[target] = true
					cw.lastErr = err
				}
				continue
			}
			still = append(still, target)
		}
		if len(still) == 0 {
			delete(cw.waiting, dir)
		} else {
			cw.waiting[dir] = still
		}
	case ev.Has(fsnotify.Create) && cw.podDirs[dir] && cw.byDir[ev.Name] == "":
		// A new container directory; its name is the container ID with
		// the cgroupfs layout (else the inspection finds nothing).
		id, created = containerIDOfDir(base), true
	}
	if id != "" {
		cw.signal(cgroupEvent{containerID: id, exited: exited, created: created})
	}
}

// containerIDOfDir is the container ID a container cgroup directory is
// named after: the name itself with cgroupfs, <id> of the systemd driver's
// "cri-containerd-<id>.scope".
func containerIDOfDir(base string) string {
	if id, ok := strings.CutPrefix(base, runtime.SystemdScopePrefix+"-"); ok {
		return strings.TrimSuffix(id, ".scope")
	}
	return base
}

// isWatchLimit reports whether err is inotify's watch limit (ENOSPC).
func isWatchLimit(err error) bool { return errors.Is(err, syscall.ENOSPC) }
