package pleg

import (
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/nodeagent/nodeagent/runtime"
)

// TestCgroupWatcherTree drives the watcher over a directory tree shaped
// like a cgroup v2 hierarchy (real inotify, regular files): the layout is
// taken from the containers' cgroup paths and the configured pod parent,
// which does not exist yet when the watcher starts.
func TestCgroupWatcherTree(t *testing.T) {
	root := t.TempDir()
	if err := os.WriteFile(filepath.Join(root, "cgroup.controllers"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	signals := make(chan cgroupEvent, 100)
	cw, err := newCgroupWatcher(root, []string{"/kubepods/burstable"}, testLogger(t), func(e cgroupEvent) { signals <- e })
	if err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	defer close(stop)
	ctx, cancel := contextWithStop(stop)
	defer cancel()
	go cw.run(ctx)

	next := func(want func(cgroupEvent) bool, what string) {
		t.Helper()
		timeout := time.After(10 * time.Second)
		for {
			select {
			case e := <-signals:
				if want(e) {
					return
				}
				t.Logf("other signal %+v", e)
			case <-timeout:
				t.Fatalf("no signal: %s", what)
			}
		}
	}
	mkcg := func(rel string, populated string) string {
		dir := filepath.Join(root, rel)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "cgroup.events"), []byte("populated "+populated+"\nfrozen 0\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		return dir
	}

	// The pod parent appears, then a pod, then a container in it.
	pod := mkcg("kubepods/burstable/pod1", "1")
	time.Sleep(100 * time.Millisecond) // let the watcher descend
	mkcg("kubepods/burstable/pod1/c1", "1")
	next(func(e cgroupEvent) bool { return e.containerID == "c1" && e.created }, "c1 created")

	// Once observed running, its cgroup.events is watched.
	cw.track(runtime.Container{ID: "c1", State: runtime.StateRunning, CgroupsPath: "/kubepods/burstable/pod1/c1"}, true)
	if err := os.WriteFile(filepath.Join(pod, "c1", "cgroup.events"), []byte("populated 0\nfrozen 0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	next(func(e cgroupEvent) bool { return e.containerID == "c1" && e.exited }, "c1 exited")

	// A running container whose directory cannot be found makes the source
	// fail; when it stops running the source recovers.
	cw.track(runtime.Container{ID: "ghost", State: runtime.StateRunning, CgroupsPath: "/elsewhere/ghost"}, true)
	next(func(e cgroupEvent) bool { return e.failed != nil }, "failure")
	cw.track(runtime.Container{ID: "ghost"}, false)
	next(func(e cgroupEvent) bool { return e.recovered }, "recovery")

	// Removal of a watched container directory.
	c2 := mkcg("kubepods/burstable/pod1/c2", "1")
	next(func(e cgroupEvent) bool { return e.containerID == "c2" && e.created }, "c2 created")
	cw.track(runtime.Container{ID: "c2", State: runtime.StateRunning, CgroupsPath: "/kubepods/burstable/pod1/c2"}, true)
	// track only records the request; the watcher's goroutine adds the
	// watch. Its exit (seen by the watch, or when the watch is added) shows
	// that it is watched.
	if err := os.WriteFile(filepath.Join(c2, "cgroup.events"), []byte("populated 0\nfrozen 0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	next(func(e cgroupEvent) bool { return e.containerID == "c2" && e.exited }, "c2 exited")
	if err := os.RemoveAll(c2); err != nil {
		t.Fatal(err)
	}
	next(func(e cgroupEvent) bool { return e.containerID == "c2" && e.exited }, "c2 removed")
}

func contextWithStop(stop <-chan struct{}) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		select {
		case <-stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	return ctx, cancel
}

// The cgroup watcher's file I/O never runs under the PLEG's lock: while
// reading a container's cgroup.events blocks (here a FIFO that gets no
// data), everything that takes the lock (Healthy, EventMode, Expect,
// Relist) still answers.
func TestCgroupIOOutsidePLEGLock(t *testing.T) {
	root := t.TempDir()
	if err := os.WriteFile(filepath.Join(root, "cgroup.controllers"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(root, "kubepods", "pod1", "c1")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	fifo := filepath.Join(dir, "cgroup.events")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	rt := newFakeRuntime()
	rt.set("c1", "p", runtime.StateRunning, 0)
	rt.mu.Lock()
	c := rt.containers["c1"]
	c.CgroupsPath = "/kubepods/pod1/c1"
	rt.containers["c1"] = c
	rt.mu.Unlock()
	p := newTestPLEG(t, rt, Options{Sources: []Source{SourceCgroups}, CgroupRoot: root, CgroupParents: []string{"/kubepods"},
		RelistPeriod: time.Hour, Registerer: prometheus.NewRegistry()})
	ctx, cancel := context.WithCancel(context.Background())
	runDone := make(chan struct{})
	go func() { defer close(runDone); p.Run(ctx) }()

	// The first relist sees c1 running; watching it reads its
	// cgroup.events. Once the reader has opened the FIFO, hold its write
	// end without writing: the read blocks.
	var w *os.File
	deadline := time.Now().Add(10 * time.Second)
	for {
		f, err := os.OpenFile(fifo, os.O_WRONLY|syscall.O_NONBLOCK, 0)
		if err == nil {
			w = f
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the watcher never read c1's cgroup.events: %v", err)
		}
		time.Sleep(time.Millisecond)
	}
	defer func() {
		_, _ = w.WriteString("populated 1\n")
		w.Close()
		cancel()
		<-runDone
	}()
	answered := make(chan struct{})
	go func() {
		defer close(answered)
		p.Healthy()
		p.EventMode()
		p.ExpectWithin("uid-p", "c2", ContainerStarted, time.Minute)
		if err := p.Relist(ctx); err != nil {
			t.Error(err)
		}
	}()
	select {
	case <-answered:
	case <-time.After(10 * time.Second):
		t.Fatal("the PLEG's lock is held while the cgroup watcher reads a file")
	}
}

// TestCgroupWatcherNestedRoots: with kubelet's layout the pod parents nest
// (kubepods holds pods and the burstable and besteffort levels). New
// containers are seen in each level, whether the levels exist when the
// watcher starts or appear later, and a level is never taken for a pod
// nor a pod for a container. Systemd scopes name their container.
func TestCgroupWatcherNestedRoots(t *testing.T) {
	for _, early := range []bool{false, true} {
		t.Run(map[bool]string{false: "levels appear later", true: "levels exist"}[early], func(t *testing.T) {
			root := t.TempDir()
			if err := os.WriteFile(filepath.Join(root, "cgroup.controllers"), nil, 0o644); err != nil {
				t.Fatal(err)
			}
			mk := func(rel string) {
				if err := os.MkdirAll(filepath.Join(root, rel), 0o755); err != nil {
					t.Fatal(err)
				}
			}
			if early {
				mk("kubepods/burstable")
				mk("kubepods/besteffort")
			}
			signals := make(chan cgroupEvent, 100)
			parents := []string{"/kubepods", "/kubepods/burstable", "/kubepods/besteffort"}
			cw, err := newCgroupWatcher(root, parents, testLogger(t), func(e cgroupEvent) { signals <- e })
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			go cw.run(ctx)
			next := func(id string) {
				t.Helper()
				timeout := time.After(10 * time.Second)
				for {
					select {
					case e := <-signals:
						switch e.containerID {
						case id:
							if e.created {
								return
							}
						case "burstable", "besteffort", "podg", "podb", "pode", "kubepods":
							t.Errorf("a cgroup level was taken for a container: %+v", e)
						}
					case <-timeout:
						t.Fatalf("no created signal for %s", id)
					}
				}
			}
			steps := []struct{ pod, ctr, id string }{
				{"kubepods/podg", "cg", "cg"},
				{"kubepods/burstable/podb", "cb", "cb"},
				{"kubepods/besteffort/pode", "cri-containerd-ce.scope", "ce"},
			}
			for _, s := range steps {
				mk(s.pod)
				time.Sleep(100 * time.Millisecond) // let the watcher descend
				mk(s.pod + "/" + s.ctr)
				next(s.id)
			}
		})
	}
}
