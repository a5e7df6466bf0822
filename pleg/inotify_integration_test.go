package pleg_test

import (
	"context"
	"log/slog"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/nodeagent/nodeagent/pleg"
	"github.com/prometheus/client_golang/prometheus"
)

// TestRealInotifyNoInstance: the PLEG starts while
// fs.inotify.max_user_instances is exhausted, so its cgroup source cannot
// create an inotify instance. It must relist at its fallback period (a
// death is seen), then, once instances are available again, create one
// within its retry backoff and see the next death through inotify. The
// limit is host-wide for root: it is lowered for about a second.
func TestRealInotifyNoInstance(t *testing.T) {
	e := setup(t) // containerd and a runtime; its own PLEG relists only
	a := e.start("p", "a", 0, "exec sleep 1000")

	const sysctl = "/proc/sys/fs/inotify/max_user_instances"
	orig, err := os.ReadFile(sysctl)
	if err != nil {
		t.Fatal(err)
	}
	restore := func() { _ = os.WriteFile(sysctl, orig, 0o644) }
	t.Cleanup(restore)

	log := slog.New(slog.NewTextHandler(logWriter{t}, nil))
	p, err := pleg.New(e.rt, pleg.Options{
		Sources:              []pleg.Source{pleg.SourceCgroups},
		RelistPeriod:         time.Hour,
		FallbackRelistPeriod: 200 * time.Millisecond,
		InspectTimeout:       2 * time.Second,
		RelistTimeout:        2 * time.Second,
		Logger:               log,
		Registerer:           prometheus.NewRegistry(),
		CgroupParents:        []string{e.cd.CgroupParent},
	})
	if err != nil {
		t.Fatal(err)
	}
	evs, unsub := p.Subscribe()
	t.Cleanup(unsub)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	t.Cleanup(func() { cancel(); <-done })

	// The limit counts root's instances on the whole host; hold one so
	// that a limit of 1 is reached even on a host where nothing else of
	// root's uses inotify (an idle machine without a cluster).
	held, err := syscall.InotifyInit1(syscall.IN_CLOEXEC)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Close(held) })
	if err := os.WriteFile(sysctl, []byte("1"), 0o644); err != nil {
		t.Fatal(err)
	}
	go func() { defer close(done); p.Run(ctx) }()
	waitFor(t, "fallback", func() bool { return !p.EventMode() })
	restore()
	freed := time.Now()

	// Relisting sees a's death (Run's first relist reported it started).
	next := func(id string, want pleg.EventType) pleg.Event {
		t.Helper()
		timeout := time.After(20 * time.Second)
		for {
			select {
			case ev := <-evs:
				if ev.ContainerID == id && ev.Type == want {
					return ev
				}
			case <-timeout:
				t.Fatalf("no %s for %s", want, id)
			}
		}
	}
	next(a, pleg.ContainerStarted)
	c, err := e.rt.InspectContainer(context.Background(), a)
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(int(c.Pid), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if ev := next(a, pleg.ContainerDied); ev.Source != pleg.SourceRelist && ev.Source != pleg.SourceCgroups {
		t.Fatalf("a's death from %s", ev.Source)
	}

	waitFor(t, "event mode once an inotify instance can be created", p.EventMode)
	t.Logf("event mode %s after max_user_instances was restored", time.Since(freed).Round(time.Millisecond))
	if d := time.Since(freed); d > 12*time.Second {
		t.Errorf("event mode %s after the limit was restored, want within the 10s backoff cap", d)
	}
	b := e.start("p", "b", 0, "sleep 0.3")
	if ev := next(b, pleg.ContainerDied); ev.Source != pleg.SourceCgroups {
		t.Fatalf("b's death from %s, want cgroups (inotify works again)", ev.Source)
	}
}
