package systemd

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"k8s.io/utils/clock"
)

// Messages understood by the service manager; see sd_notify(3).
const (
	msgReady    = "READY=1"
	msgStopping = "STOPPING=1"
	msgWatchdog = "WATCHDOG=1"
)

// Ready tells systemd that start-up is complete.
func Ready() error { return send(msgReady) }

// Stopping tells systemd that the agent is shutting down.
func Stopping() error { return send(msgStopping) }

// Status sets the free-form status line shown by `systemctl status`.
func Status(msg string) error {
	return send("STATUS=" + strings.NewReplacer("\r\n", " ", "\n", " ", "\r", " ").Replace(msg))
}

func send(state string) error {
	if _, err := notify(state); err != nil {
		return fmt.Errorf("sd_notify %q: %w", state, err)
	}
	return nil
}

// RunWatchdog feeds systemd's watchdog until ctx is done. It reads the
// watchdog timeout from WATCHDOG_USEC/WATCHDOG_PID and returns at once when the
// watchdog is not enabled for this process. Otherwise it calls check every
// timeout/2 and sends WATCHDOG=1 only when check returns nil; when check fails
// it logs why the keep-alive is withheld and how long until systemd acts.
//
// check is called from RunWatchdog's goroutine only and must not block for
// long (a check that blocks withholds keep-alives, which is the point).
func RunWatchdog(ctx context.Context, logger *slog.Logger, clk clock.Clock, check func() error) {
	timeout, err := watchdogTimeout()
	if err != nil {
		logger.Warn("systemd watchdog disabled: bad watchdog environment", "err", err)
		return
	}
	if timeout <= 0 {
		logger.Debug("systemd watchdog not enabled for this process")
		return
	}
	w := newWatchdog(logger, clk, timeout, check)
	logger.Info("systemd watchdog enabled", "timeout", timeout, "interval", w.interval)
	w.run(ctx)
}

// watchdog holds the state of one RunWatchdog loop; it is owned by that loop's
// goroutine.
type watchdog struct {
	logger   *slog.Logger
	clk      clock.Clock
	timeout  time.Duration // WatchdogSec
	interval time.Duration // timeout / 2
	check    func() error
	notify   func(state string) (bool, error)

	lastSent time.Time // zero until the first keep-alive went out
	failing  bool      // the previous beat withheld the keep-alive
}

func newWatchdog(logger *slog.Logger, clk clock.Clock, timeout time.Duration, check func() error) *watchdog {
	return &watchdog{
		logger:   logger,
		clk:      clk,
		timeout:  timeout,
		interval: timeout / 2,
		check:    check,
		notify:   notify,
	}
}

func (w *watchdog) run(ctx context.Context) {
	for ctx.Err() == nil {
		w.beat()
		select {
		case <-ctx.Done():
			return
		case <-w.clk.After(w.interval):
		}
	}
}

// beat runs the health check once and sends a keep-alive if it passes. It
// reports whether a keep-alive was sent.
func (w *watchdog) beat() bool {
	now := w.clk.Now()
	if err := w.check(); err != nil {
		w.failing = true
		args := []any{"err", err}
		if !w.lastSent.IsZero() {
			args = append(args, "sinceLastKeepAlive", now.Sub(w.lastSent), "killAfter", w.timeout-now.Sub(w.lastSent))
		}
		w.logger.Warn("withholding systemd watchdog keep-alive: health check failed", args...)
		return false
	}
	if _, err := w.notify(msgWatchdog); err != nil {
		// Nothing else to do: if this persists, systemd restarts us, which is
		// also the right fix for a broken notify socket.
		w.logger.Error("cannot send systemd watchdog keep-alive", "err", err)
		return false
	}
	if w.failing {
		w.logger.Info("health check passes again, resuming systemd watchdog keep-alives")
		w.failing = false
	}
	w.lastSent = now
	return true
}
