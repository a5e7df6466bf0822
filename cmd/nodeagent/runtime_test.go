package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	testingclock "k8s.io/utils/clock/testing"

	"github.com/nodeagent/nodeagent/config"
	"github.com/nodeagent/nodeagent/internal/testing/backofftest"
	"github.com/nodeagent/nodeagent/pleg"
	"github.com/nodeagent/nodeagent/pods"
	"github.com/nodeagent/nodeagent/runtime"
)

// Every event source the configuration accepts must be one the PLEG knows,
// or the agent would silently run with fewer sources than configured.
func TestConfigEventSourcesParse(t *testing.T) {
	for _, s := range append(config.Default().PLEG.EventSources, config.EventSourceCgroups, config.EventSourceContainerd) {
		if _, err := pleg.ParseSource(s); err != nil {
			t.Errorf("config event source %q: %v", s, err)
		}
	}
	// One spelling: what the configuration says is what metrics and
	// /events report as the source.
	for cfg, src := range map[string]pleg.Source{config.EventSourceCgroups: pleg.SourceCgroups, config.EventSourceContainerd: pleg.SourceContainerd} {
		if got, _ := pleg.ParseSource(cfg); got != src || string(src) != cfg {
			t.Errorf("%q parses to %q, want %q spelled the same", cfg, got, src)
		}
	}
}

// The runtime connection is retried 1s doubling to 30s, on the agent's clock.
func TestDialRuntimeBackoff(t *testing.T) {
	clk := testingclock.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	a := &agent{clock: clk}
	var attempts atomic.Int32
	dialErr := errors.New("connection refused")
	ctx, cancel := context.WithCancel(context.Background())
	type result struct {
		rt *runtime.Runtime
		ok bool
	}
	done := make(chan result, 1)
	go func() {
		rt, ok := a.dialRuntime(ctx, slog.New(slog.DiscardHandler), func(context.Context) (*runtime.Runtime, runtime.Version, error) {
			attempts.Add(1)
			return nil, runtime.Version{}, dialErr
		})
		done <- result{rt, ok}
	}()
	s := time.Second
	backofftest.ExpectDelays(t, clk, func() int { return int(attempts.Load()) },
		1*s, 2*s, 4*s, 8*s, 16*s, 30*s, 30*s)
	if _, err := a.runtimeOrErr(); !errors.Is(err, errRuntimeNotConnected) || !strings.Contains(err.Error(), dialErr.Error()) {
		t.Errorf("health check error %v, want the last dial error", err)
	}
	backofftest.WaitWaiting(t, clk)
	cancel()
	if r := <-done; r.ok || r.rt != nil {
		t.Errorf("dialRuntime = %v, %v after ctx was cancelled", r.rt, r.ok)
	}
}

// A restarted agent's status checks wait for its first dial of containerd
// instead of reporting "not connected" a moment before the connection is
// up (a false NotReady of a Ready node); once a dial has failed they answer
// at once, and the wait is bounded by the check's context.
func TestStatusChecksWaitForTheFirstDial(t *testing.T) {
	clk := testingclock.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	a := &agent{clock: clk}

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if err := a.runtimeHealthy(ctx); !errors.Is(err, errRuntimeNotConnected) {
		t.Fatalf("with no dial at all: %v, want not connected once the context ends", err)
	}

	release := make(chan struct{})
	dialErr := errors.New("connection refused")
	dialCtx, stopDial := context.WithCancel(context.Background())
	defer stopDial()
	go a.dialRuntime(dialCtx, slog.New(slog.DiscardHandler), func(context.Context) (*runtime.Runtime, runtime.Version, error) {
		<-release
		return nil, runtime.Version{}, dialErr
	})
	got := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		got <- a.runtimeHealthy(ctx)
	}()
	select {
	case err := <-got:
		t.Fatalf("the check answered %v before the first dial had an outcome", err)
	case <-time.After(100 * time.Millisecond):
	}
	close(release)
	select {
	case err := <-got:
		if !strings.Contains(fmt.Sprint(err), dialErr.Error()) {
			t.Errorf("after the first dial failed: %v, want its error", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the check did not answer after the first dial failed")
	}
	// Later checks answer at once, while the next dial waits for its backoff.
	start := time.Now()
	if _, _, err := a.runtimeVersion(context.Background()); !strings.Contains(fmt.Sprint(err), dialErr.Error()) {
		t.Errorf("version after a failed dial: %v", err)
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("version check after a failed dial took %s", d)
	}
}

// runtimeRequestTimeout bounds the calls kubelet's CRI requests map to:
// creating and starting get all of it, other containerd calls at most the
// runtime's 10s; streamingConnectionIdleTimeout 0 means no idle timeout.
func TestKubeletTimeoutsMapped(t *testing.T) {
	for _, tc := range []struct {
		request, call, start time.Duration
	}{
		{2 * time.Minute, 10 * time.Second, 2 * time.Minute}, // kubelet's default
		{5 * time.Minute, 10 * time.Second, 5 * time.Minute},
		{3 * time.Second, 3 * time.Second, 3 * time.Second},
	} {
		if call, start := runtimeTimeouts(tc.request); call != tc.call || start != tc.start {
			t.Errorf("runtimeRequestTimeout %v: call %v, start %v; want %v, %v", tc.request, call, start, tc.call, tc.start)
		}
	}
	for in, want := range map[time.Duration]time.Duration{0: -1, time.Minute: time.Minute, 4 * time.Hour: 4 * time.Hour} {
		if got := streamIdleTimeout(in); got != want {
			t.Errorf("streamIdleTimeout(%v) = %v, want %v", in, got, want)
		}
	}
}

// syncFrequency and fileCheckFrequency reach the pod workers as their
// resync period and the static pod directory's rescan period.
func TestPodsSettingsPeriods(t *testing.T) {
	cfg := config.Default()
	cfg.SyncFrequency.Duration, cfg.FileCheckFrequency.Duration = 30*time.Second, 7*time.Second
	if o := podsSettings(cfg); o.ResyncPeriod != 30*time.Second || o.StaticRescan != 7*time.Second {
		t.Errorf("resync %v, static rescan %v; want 30s, 7s", o.ResyncPeriod, o.StaticRescan)
	}
}

// The image pull settings reach the pod workers: kubelet's defaults
// (serialized, 5 a second, burst 10), and maxParallelImagePulls alone
// turning serialization off as kubelet's defaulting does.
func TestPodsSettingsImagePulls(t *testing.T) {
	cfg := config.Default()
	if got, want := podsSettings(cfg).ImagePulls, (pods.ImagePullLimits{Serialize: true, QPS: 5, Burst: 10}); got != want {
		t.Errorf("defaults: %+v, want %+v", got, want)
	}
	three := int32(3)
	cfg.MaxParallelImagePulls, cfg.RegistryPullQPS, cfg.RegistryBurst = &three, 0, 4
	if got, want := podsSettings(cfg).ImagePulls, (pods.ImagePullLimits{MaxParallel: 3, Burst: 4}); got != want {
		t.Errorf("maxParallelImagePulls 3, no rate: %+v, want %+v", got, want)
	}
}

// cpuCFSQuota reaches the pod workers: false, no container gets a quota.
func TestPodsSettingsCPUCFSQuota(t *testing.T) {
	cfg := config.Default()
	if podsSettings(cfg).NoCPUQuota {
		t.Error("default: containers without CFS quota")
	}
	cfg.CPUCFSQuota = false
	if !podsSettings(cfg).NoCPUQuota {
		t.Error("cpuCFSQuota false: containers still get a CFS quota")
	}
}
