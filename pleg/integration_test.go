package pleg_test

import (
	"context"
	"log/slog"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nodeagent/nodeagent/internal/testing/testimage"
	"github.com/nodeagent/nodeagent/pleg"
	"github.com/nodeagent/nodeagent/runtime"
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/types"
)

type logWriter struct{ t testing.TB }

func (w logWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

type env struct {
	t   *testing.T
	cd  *testimage.Containerd
	rt  *runtime.Runtime
	p   *pleg.PLEG
	evs <-chan pleg.Event
}

func setup(t *testing.T, sources ...pleg.Source) *env {
	t.Helper()
	if testing.Short() {
		t.Skip("needs a real containerd")
	}
	log := slog.New(slog.NewTextHandler(logWriter{t}, nil))
	cd := testimage.StartContainerd(t)
	rt, err := runtime.New(runtime.Options{Address: cd.Address, CgroupParent: cd.CgroupParent, CallTimeout: 5 * time.Second, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rt.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := testimage.Import(ctx, rt); err != nil {
		t.Fatal(err)
	}
	p, err := pleg.New(rt, pleg.Options{
		Sources:              sources,
		RelistPeriod:         time.Hour, // only event sources (or fallback) can detect anything
		FallbackRelistPeriod: 200 * time.Millisecond,
		InspectTimeout:       2 * time.Second,
		RelistTimeout:        2 * time.Second,
		Logger:               log,
		Registerer:           prometheus.NewRegistry(),
		CgroupParents:        []string{cd.CgroupParent},
	})
	if err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(context.Background())
	runDone := make(chan struct{})
	t.Cleanup(func() {
		// Run returns once its goroutines have stopped, before the
		// runtime is closed (cleanups run last-registered first).
		stop()
		select {
		case <-runDone:
		case <-time.After(10 * time.Second):
			t.Error("Run did not return after its context was cancelled")
		}
	})
	evs, unsub := p.Subscribe()
	t.Cleanup(unsub)
	go func() { defer close(runDone); p.Run(runCtx) }()
	e := &env{t: t, cd: cd, rt: rt, p: p, evs: evs}
	if len(sources) > 0 {
		waitFor(t, "event mode", p.EventMode)
	}
	return e
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func (e *env) start(pod, name string, attempt uint32, script string) string {
	e.t.Helper()
	ctx := context.Background()
	id, err := e.rt.CreateContainer(ctx, runtime.ContainerSpec{
		Pod:     runtime.PodRef{UID: types.UID("uid-" + pod), Name: pod, Namespace: "default"},
		Name:    name,
		Attempt: attempt,
		Image:   testimage.Ref,
		Command: []string{"sh", "-c", script},
	})
	if err != nil {
		e.t.Fatal(err)
	}
	if err := e.rt.StartContainer(ctx, id); err != nil {
		e.t.Fatal(err)
	}
	return id
}

// expect waits for the next events of container id, skipping
// ContainerChanged (the transient "created" state may or may not be seen),
// and checks their types and that they came from allowed sources.
func (e *env) expect(id string, sources []pleg.Source, want ...pleg.EventType) []pleg.Event {
	e.t.Helper()
	var got []pleg.Event
	timeout := time.After(20 * time.Second)
	for len(got) < len(want) {
		select {
		case ev := <-e.evs:
			if ev.ContainerID != id || ev.Type == pleg.ContainerChanged {
				continue
			}
			if ev.Type != want[len(got)] {
				e.t.Fatalf("container %s: event %d is %s (source %s), want %s", id, len(got), ev.Type, ev.Source, want[len(got)])
			}
			ok := false
			for _, s := range sources {
				ok = ok || ev.Source == s
			}
			if !ok {
				e.t.Fatalf("container %s: %s came from %s, want one of %v", id, ev.Type, ev.Source, sources)
			}
			got = append(got, ev)
		case <-timeout:
			e.t.Fatalf("container %s: got %d events, want %v", id, len(got), want)
		}
	}
	return got
}

var upstream = []pleg.Source{pleg.SourceContainerd, pleg.SourceCgroups}

func TestRealEventSequence(t *testing.T) {
	e := setup(t, pleg.SourceContainerd, pleg.SourceCgroups)
	ctx := context.Background()

	a := e.start("web", "app", 0, "sleep 0.5; exit 3")
	e.expect(a, upstream, pleg.ContainerStarted)
	died := e.expect(a, upstream, pleg.ContainerDied)
	if died[0].ExitCode == nil || *died[0].ExitCode != 3 {
		t.Fatalf("died event %+v", died[0])
	}
	s, ok := e.p.Cache().Get("uid-web")
	if !ok || len(s.Containers) != 1 || s.Containers[0].State != runtime.StateExited {
		t.Fatalf("cache after exit: %+v", s)
	}

	// Restart: a new attempt of the same container, then the old one is removed.
	b := e.start("web", "app", 1, "exec sleep 1000")
	e.expect(b, upstream, pleg.ContainerStarted)
	if err := e.rt.RemoveContainer(ctx, a); err != nil {
		t.Fatal(err)
	}
	e.expect(a, upstream, pleg.ContainerRemoved)

	// Stop and remove the running one.
	if err := e.rt.StopContainer(ctx, b, time.Second); err != nil {
		t.Fatal(err)
	}
	e.expect(b, upstream, pleg.ContainerDied)
	if err := e.rt.RemoveContainer(ctx, b); err != nil {
		t.Fatal(err)
	}
	e.expect(b, upstream, pleg.ContainerRemoved)

	// Removing a running container: Died, then Removed.
	c := e.start("web", "side", 0, "exec sleep 1000")
	e.expect(c, upstream, pleg.ContainerStarted)
	if err := e.rt.RemoveContainer(ctx, c); err != nil {
		t.Fatal(err)
	}
	e.expect(c, upstream, pleg.ContainerDied, pleg.ContainerRemoved)
	if ok, err := e.p.Healthy(); !ok || !e.p.EventMode() {
		t.Fatalf("healthy %v (%v), event mode %v", ok, err, e.p.EventMode())
	}
}

// Each source alone detects exits.
func TestRealSingleSources(t *testing.T) {
	for _, src := range upstream {
		t.Run(string(src), func(t *testing.T) {
			e := setup(t, src)
			a := e.start("p", "c", 0, "sleep 0.3")
			e.expect(a, []pleg.Source{src}, pleg.ContainerStarted, pleg.ContainerDied)
		})
	}
}

func TestRealContainerdRestart(t *testing.T) {
	e := setup(t, pleg.SourceContainerd)
	a := e.start("p", "c", 0, "exec sleep 1000")
	e.expect(a, upstream, pleg.ContainerStarted)
	c, err := e.rt.InspectContainer(context.Background(), a)
	if err != nil {
		t.Fatal(err)
	}

	e.cd.Kill()
	waitFor(t, "fallback", func() bool { return !e.p.EventMode() })
	// The container dies while containerd is down: no event can tell.
	if err := syscall.Kill(int(c.Pid), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second)
	if ok, err := e.p.Healthy(); !ok {
		t.Fatalf("unhealthy while containerd restarts: %v", err)
	}
	if err := e.cd.Start(); err != nil {
		t.Fatal(err)
	}
	died := e.expect(a, []pleg.Source{pleg.SourceRelist}, pleg.ContainerDied)
	// containerd 2.x reaps the stopped task while it starts, before anyone
	// could read the exit status: the death is reported, its code unknown.
	want := int32(137)
	if v, err := e.rt.Version(context.Background()); err != nil {
		t.Fatal(err)
	} else if !testimage.ExitStatusSurvivesRestart(v.RuntimeVersion) {
		want = -1
	}
	if died[0].ExitCode == nil || *died[0].ExitCode != want {
		t.Fatalf("died %+v, want exit code %d", died[0], want)
	}
	waitFor(t, "event mode after reconnect", e.p.EventMode)
	if ok, err := e.p.Healthy(); !ok {
		t.Fatal(err)
	}
	// Events flow again.
	b := e.start("p", "c", 1, "sleep 0.2")
	e.expect(b, []pleg.Source{pleg.SourceContainerd}, pleg.ContainerStarted, pleg.ContainerDied)
}

func TestRealInotifyExhaustion(t *testing.T) {
	e := setup(t, pleg.SourceCgroups)
	a := e.start("p", "a", 0, "exec sleep 1000")
	e.expect(a, upstream, pleg.ContainerStarted)

	const sysctl = "/proc/sys/fs/inotify/max_user_watches"
	orig, err := os.ReadFile(sysctl)
	if err != nil {
		t.Fatal(err)
	}
	restore := func() { _ = os.WriteFile(sysctl, orig, 0o644) }
	t.Cleanup(restore)
	// No room for one more watch (the limit is below what is in use; the
	// count of watches in use cannot be trusted when other user namespaces
	// have some). Other processes cannot add watches either until restore:
	// keep it short.
	if err := os.WriteFile(sysctl, []byte("1"), 0o644); err != nil {
		t.Fatal(err)
	}
	var b string
	func() {
		defer restore()
		b = e.start("p", "b", 0, "exec sleep 1000")
		// Failing to watch b can switch the PLEG to relisting before
		// containerd's TaskStart arrives, so the relist may be first.
		e.expect(b, []pleg.Source{pleg.SourceContainerd, pleg.SourceCgroups, pleg.SourceRelist}, pleg.ContainerStarted)
		// b cannot be watched: the PLEG falls back to relisting...
		waitFor(t, "fallback", func() bool { return !e.p.EventMode() })
		// ... and keeps working: an unwatched container's death is
		// reported by the fast relist (or by the cgroup source's retry to
		// watch it, which finds its process gone).
		c := e.start("p", "c", 0, "sleep 0.3")
		e.expect(c, []pleg.Source{pleg.SourceRelist, pleg.SourceCgroups}, pleg.ContainerStarted, pleg.ContainerDied)
	}()
	// Restored: b is watched at the next relist and the source recovers.
	waitFor(t, "recovery", e.p.EventMode)
	if ok, err := e.p.Healthy(); !ok {
		t.Fatal(err)
	}
	bc, err := e.rt.InspectContainer(context.Background(), b)
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(int(bc.Pid), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	e.expect(b, []pleg.Source{pleg.SourceCgroups}, pleg.ContainerDied)
}
