package runtime

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	clocktesting "k8s.io/utils/clock/testing"
)

func TestStallWatch(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	type sample struct {
		at     time.Duration
		active int32
		bytes  uint64
		want   bool
	}
	for _, tc := range []struct {
		desc    string
		samples []sample
	}{
		{"bytes keep coming: never stalled, however long", []sample{
			{10 * time.Second, 1, 1, false}, {4 * time.Minute, 1, 2, false}, {8 * time.Minute, 1, 3, false}, {12 * time.Minute, 1, 4, false}, {60 * time.Minute, 1, 5, false},
		}},
		{"an open request without bytes for more than the timeout", []sample{
			{10 * time.Second, 1, 100, false}, {2 * time.Minute, 1, 100, false}, {5*time.Minute + 10*time.Second, 1, 100, false},
			{5*time.Minute + 11*time.Second, 1, 100, true},
		}},
		{"exactly the timeout is not yet a stall", []sample{
			{0, 1, 7, false}, {5 * time.Minute, 1, 7, false},
		}},
		{"no open request (unpacking) is not a stall", []sample{
			{0, 1, 7, false}, {4 * time.Minute, 0, 7, false}, {9 * time.Minute, 0, 7, false}, {13 * time.Minute, 1, 7, false},
		}},
		{"a stall counts from the last progress, not the first sample", []sample{
			{0, 1, 1, false}, {3 * time.Minute, 1, 2, false}, {7 * time.Minute, 1, 2, false}, {8*time.Minute + 1, 1, 2, true},
		}},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			w := &stallWatch{timeout: 5 * time.Minute, lastProgress: t0}
			for i, s := range tc.samples {
				if got := w.observe(t0.Add(s.at), s.active, s.bytes); got != s.want {
					t.Fatalf("sample %d (%+v): stalled = %v, want %v", i, s, got, s.want)
				}
			}
		})
	}
}

func TestCheckInterval(t *testing.T) {
	for timeout, want := range map[time.Duration]time.Duration{
		5 * time.Minute: 10 * time.Second, 10 * time.Second: 10 * time.Second, 4 * time.Second: 2 * time.Second,
	} {
		if got := checkInterval(timeout); got != want {
			t.Errorf("checkInterval(%s) = %s, want %s", timeout, got, want)
		}
	}
}

// The watchdog, driven by a fake clock: a pull whose byte counter moves
// survives many timeouts; once it stops moving with a request open, the
// watchdog fires after the timeout and not before.
func TestWatchPull(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	r := &Runtime{opts: Options{PullProgressTimeout: 30 * time.Second, Clock: clk, Logger: slog.New(slog.DiscardHandler)}}
	prog := &pullProgress{}
	prog.active.Store(1)
	fired := make(chan struct{})
	stop := r.watchPull(context.Background(), prog, func() { close(fired) })
	defer stop()
	step := func() {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for !clk.HasWaiters() {
			if time.Now().After(deadline) {
				t.Fatal("the watchdog does not wait on its ticker")
			}
			time.Sleep(time.Millisecond)
		}
		clk.Step(10 * time.Second)
	}
	notFired := func(when string) {
		t.Helper()
		select {
		case <-fired:
			t.Fatalf("stall declared %s", when)
		case <-time.After(20 * time.Millisecond):
		}
	}
	for i := range 30 { // 5 minutes of slow progress, 10 timeouts
		prog.bytes.Add(1)
		step()
		notFired(fmt.Sprintf("while bytes arrive (step %d)", i))
	}
	// The last byte arrived before the last step; the watchdog may see
	// it at that step's time or one step earlier (it samples late under
	// load): 20s more is at most 30s without progress, not a stall.
	for range 2 {
		step()
	}
	notFired("at most the timeout after the last byte")
	for i := 0; ; i++ {
		step()
		select {
		case <-fired:
			return
		case <-time.After(50 * time.Millisecond):
		}
		if i == 20 {
			t.Fatal("no stall declared 220s after the last byte")
		}
	}
}

func TestWatchPullDisabled(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Now())
	r := &Runtime{opts: Options{PullProgressTimeout: -1, Clock: clk, Logger: slog.New(slog.DiscardHandler)}}
	stop := r.watchPull(context.Background(), &pullProgress{}, func() { t.Error("fired") })
	stop()
	if clk.HasWaiters() {
		t.Fatal("a disabled watchdog started a ticker")
	}
}

// hosts.toml in containerd's layout, read by containerd's own code: which
// endpoints a pull tries, in which order, for which registry.
func TestRegistryEndpoints(t *testing.T) {
	root := t.TempDir()
	write := func(dir, body string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Join(root, dir), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, dir, "hosts.toml"), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("docker.io", `
server = "https://registry-1.docker.io"

[host."https://mirror.example.com"]
  capabilities = ["pull", "resolve"]

[host."http://10.0.0.1:5000"]
  capabilities = ["pull"]

[host."http://10.0.0.2:5000"]
  capabilities = ["pull", "resolve"]
  skip_verify = true
`)
	write("registry.example.com_5000_", `
server = "https://registry.example.com:5000"

[host."https://cache.example.com/custom/api"]
  capabilities = ["pull", "resolve"]
  override_path = true
`)
	write("push.example.com", `
[host."https://push-only.example.com"]
  capabilities = ["push"]
`)
	write("_default", `
[host."https://default-mirror.example.com"]
  capabilities = ["pull", "resolve"]
`)
	second := t.TempDir()
	if err := os.MkdirAll(filepath.Join(second, "only.second"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(second, "only.second", "hosts.toml"), []byte(`server = "https://elsewhere.example.com"`), 0o644); err != nil {
		t.Fatal(err)
	}

	r := &Runtime{opts: Options{RegistryConfigPath: root + string(filepath.ListSeparator) + second}}
	none := &Runtime{}
	for _, tc := range []struct {
		rt       *Runtime
		registry string
		want     []registryEndpoint
	}{
		{r, "docker.io", []registryEndpoint{
			{"https://mirror.example.com/v2", true, true},
			{"http://10.0.0.1:5000/v2", true, false},
			// TLS settings on an http host: HTTPS first, then HTTP
			// (containerd's fallback).
			{"https://10.0.0.2:5000/v2", true, true},
			{"https://registry-1.docker.io/v2", true, true},
		}},
		{r, "registry.example.com:5000", []registryEndpoint{
			{"https://cache.example.com/custom/api", true, true},
			{"https://registry.example.com:5000/v2", true, true},
		}},
		// A host whose only mirror cannot pull: nothing else is tried,
		// and the upstream is the last host.
		{r, "push.example.com", []registryEndpoint{{"https://push.example.com/v2", true, true}}},
		// No directory of its own: _default of the first root.
		{r, "quay.io", []registryEndpoint{
			{"https://default-mirror.example.com/v2", true, true},
			{"https://quay.io/v2", true, true},
		}},
		// The first root with a directory for the host wins, and its
		// _default counts (containerd CRI's order over config_path).
		{r, "only.second", []registryEndpoint{
			{"https://default-mirror.example.com/v2", true, true},
			{"https://only.second/v2", true, true},
		}},
		{&Runtime{opts: Options{RegistryConfigPath: second}}, "only.second", []registryEndpoint{{"https://elsewhere.example.com/v2", true, true}}},
		{none, "docker.io", []registryEndpoint{{"https://registry-1.docker.io/v2", true, true}}},
		{none, "quay.io", []registryEndpoint{{"https://quay.io/v2", true, true}}},
		// Loopback with a port: HTTPS first, falling back to HTTP.
		{none, "127.0.0.1:5000", []registryEndpoint{{"https://127.0.0.1:5000/v2", true, true}}},
	} {
		got, err := tc.rt.registryEndpoints(context.Background(), tc.registry)
		if err != nil {
			t.Fatalf("%s: %v", tc.registry, err)
		}
		if d := cmp.Diff(tc.want, got); d != "" {
			t.Errorf("%s (config path %q): endpoints (-want +got):\n%s", tc.registry, tc.rt.opts.RegistryConfigPath, d)
		}
	}
}
