package systemd

import (
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/nodeagent/nodeagent/internal/testing/testlog"

	testingclock "k8s.io/utils/clock/testing"
)

func TestBeat(t *testing.T) {
	errUnhealthy := errors.New("pleg not healthy")
	for _, tc := range []struct {
		desc        string
		wasFailing  bool
		checkErr    error
		notifyErr   error
		wantSent    bool
		wantNotify  bool
		wantFailing bool
	}{
		{desc: "healthy sends", wantSent: true, wantNotify: true},
		{desc: "unhealthy withholds", checkErr: errUnhealthy, wantFailing: true},
		{desc: "still unhealthy withholds", wasFailing: true, checkErr: errUnhealthy, wantFailing: true},
		{desc: "recovered sends", wasFailing: true, wantSent: true, wantNotify: true},
		{desc: "send error is not a keep-alive", notifyErr: errors.New("connection refused"), wantNotify: true},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			logger, _ := testLogger(t)
			clk := testingclock.NewFakeClock(time.Unix(1000, 0))
			w := newWatchdog(logger, clk, time.Minute, func() error { return tc.checkErr })
			w.failing = tc.wasFailing
			w.lastSent = time.Unix(970, 0)
			var notified []string
			w.notify = func(s string) (bool, error) { notified = append(notified, s); return true, tc.notifyErr }

			if got := w.beat(); got != tc.wantSent {
				t.Errorf("beat() = %v, want %v", got, tc.wantSent)
			}
			if got := len(notified) == 1 && notified[0] == "WATCHDOG=1"; got != tc.wantNotify {
				t.Errorf("notified %q, want WATCHDOG=1: %v", notified, tc.wantNotify)
			}
			if w.failing != tc.wantFailing {
				t.Errorf("failing = %v, want %v", w.failing, tc.wantFailing)
			}
			wantLast := time.Unix(970, 0)
			if tc.wantSent {
				wantLast = clk.Now()
			}
			if !w.lastSent.Equal(wantLast) {
				t.Errorf("lastSent = %v, want %v", w.lastSent, wantLast)
			}
		})
	}
}

func TestNewWatchdogInterval(t *testing.T) {
	w := newWatchdog(nil, testingclock.NewFakeClock(time.Now()), 60*time.Second, nil)
	if w.interval != 30*time.Second {
		t.Errorf("interval = %v, want WatchdogSec/2 = 30s", w.interval)
	}
}

// logBuffer collects log output from several goroutines.
type logBuffer = testlog.Buffer

func testLogger(t *testing.T) (*slog.Logger, *logBuffer) {
	buf := &logBuffer{}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("log:\n%s", buf)
		}
	})
	return slog.New(slog.NewTextHandler(buf, &slog.HandlerOptions{Level: slog.LevelDebug})), buf
}
