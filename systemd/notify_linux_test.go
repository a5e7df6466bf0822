//go:build linux

package systemd

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	testingclock "k8s.io/utils/clock/testing"
)

// listen creates a unix datagram socket like the one systemd passes in
// NOTIFY_SOCKET and points the environment at it.
func listen(t *testing.T) *net.UnixConn {
	t.Helper()
	dir, err := os.MkdirTemp("", "sdnotify") // short path: sun_path is 108 bytes
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	path := filepath.Join(dir, "notify.sock")
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: path, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	t.Setenv("NOTIFY_SOCKET", path)
	return conn
}

// recv returns the next datagram, failing the test if none arrives in time.
func recv(t *testing.T, conn *net.UnixConn) string {
	t.Helper()
	buf := make([]byte, 4096)
	if err := conn.SetReadDeadline(time.Now().Add(5 * time.Second)); err != nil {
		t.Fatal(err)
	}
	n, err := conn.Read(buf)
	if err != nil {
		t.Fatalf("no sd_notify message: %v", err)
	}
	return string(buf[:n])
}

// pending returns the datagram already queued on conn, or "" if there is none.
// Datagrams on a unix socket are queued by the sender's write, so anything sent
// before this call is seen. (The deadline is slightly in the future because Go
// does not even try the read once a deadline has passed; a queued datagram is
// read at once, without waiting.)
func pending(t *testing.T, conn *net.UnixConn) string {
	t.Helper()
	buf := make([]byte, 4096)
	if err := conn.SetReadDeadline(time.Now().Add(10 * time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	n, err := conn.Read(buf)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return ""
	}
	if err != nil {
		t.Fatal(err)
	}
	return string(buf[:n])
}

func TestNotifyMessages(t *testing.T) {
	conn := listen(t)
	for _, tc := range []struct {
		desc string
		call func() error
		want string
	}{
		{"ready", Ready, "READY=1"},
		{"stopping", Stopping, "STOPPING=1"},
		{"status", func() error { return Status("registering node") }, "STATUS=registering node"},
		{"status is one line", func() error { return Status("a\nb\r\nc") }, "STATUS=a b c"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			if err := tc.call(); err != nil {
				t.Fatal(err)
			}
			if got := recv(t, conn); got != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}

func TestNotifyWithoutSocketIsNoop(t *testing.T) {
	t.Setenv("NOTIFY_SOCKET", "")
	for name, call := range map[string]func() error{
		"Ready": Ready, "Stopping": Stopping, "Status": func() error { return Status("x") },
	} {
		if err := call(); err != nil {
			t.Errorf("%s without NOTIFY_SOCKET: %v, want nil", name, err)
		}
	}
}

func TestNotifyBrokenSocketIsError(t *testing.T) {
	t.Setenv("NOTIFY_SOCKET", filepath.Join(t.TempDir(), "missing.sock"))
	err := Ready()
	if err == nil {
		t.Fatal("Ready with a NOTIFY_SOCKET nobody listens on: got nil error")
	}
	if !strings.Contains(err.Error(), "READY=1") {
		t.Errorf("error %q does not say which message failed", err)
	}
}

func TestRunWatchdogReturnsWhenDisabled(t *testing.T) {
	for _, tc := range []struct {
		desc, usec, pid, wantLog string
	}{
		{desc: "no WATCHDOG_USEC", wantLog: "not enabled"},
		{desc: "WATCHDOG_PID of another process", usec: "60000000", pid: strconv.Itoa(os.Getpid() + 1), wantLog: "not enabled"},
		{desc: "malformed WATCHDOG_USEC", usec: "sixty", wantLog: "bad watchdog environment"},
		{desc: "zero WATCHDOG_USEC", usec: "0", wantLog: "bad watchdog environment"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			conn := listen(t)
			t.Setenv("WATCHDOG_USEC", tc.usec)
			t.Setenv("WATCHDOG_PID", tc.pid)
			logger, logs := testLogger(t)
			checked := false
			done := make(chan struct{})
			go func() {
				defer close(done)
				RunWatchdog(context.Background(), logger, testingclock.NewFakeClock(time.Now()), func() error { checked = true; return nil })
			}()
			select {
			case <-done:
			case <-time.After(5 * time.Second):
				t.Fatal("RunWatchdog did not return although the watchdog is disabled")
			}
			if checked {
				t.Error("health check was called although the watchdog is disabled")
			}
			if got := pending(t, conn); got != "" {
				t.Errorf("sent %q although the watchdog is disabled", got)
			}
			if !strings.Contains(logs.String(), tc.wantLog) {
				t.Errorf("log does not mention %q", tc.wantLog)
			}
		})
	}
}

// TestRunWatchdogCadence runs the real loop against a real notify socket with
// a fake clock: keep-alives go out at start and every WatchdogSec/2, are
// withheld while the check fails (with a log line saying why), and resume when
// it passes again.
func TestRunWatchdogCadence(t *testing.T) {
	conn := listen(t)
	t.Setenv("WATCHDOG_USEC", "60000000") // WatchdogSec=60s
	t.Setenv("WATCHDOG_PID", strconv.Itoa(os.Getpid()))
	logger, logs := testLogger(t)
	clk := testingclock.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))

	var mu sync.Mutex
	var healthErr error
	setHealth := func(err error) { mu.Lock(); healthErr = err; mu.Unlock() }
	checks := make(chan struct{}, 10)
	check := func() error {
		checks <- struct{}{}
		mu.Lock()
		defer mu.Unlock()
		return healthErr
	}

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); RunWatchdog(ctx, logger, clk, check) }()
	defer func() {
		cancel()
		<-done
	}()

	// waitIdle waits until the loop has finished a beat and waits on the clock.
	waitIdle := func() {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for !clk.HasWaiters() {
			if time.Now().After(deadline) {
				t.Fatal("watchdog loop never waited on the clock")
			}
			time.Sleep(time.Millisecond)
		}
	}
	expectBeat := func(want string) {
		t.Helper()
		select {
		case <-checks:
		case <-time.After(5 * time.Second):
			t.Fatal("health check not called")
		}
		waitIdle()
		if got := pending(t, conn); got != want {
			t.Fatalf("after beat: got message %q, want %q", got, want)
		}
	}

	expectBeat("WATCHDOG=1") // first keep-alive right away

	clk.Step(29 * time.Second)
	if clk.Waiters() != 1 {
		t.Fatal("loop woke up before WatchdogSec/2")
	}
	if len(checks) != 0 {
		t.Fatal("health check called before WatchdogSec/2")
	}
	clk.Step(time.Second) // t=30s
	expectBeat("WATCHDOG=1")

	setHealth(errors.New("lease not renewed for 3m"))
	clk.Step(30 * time.Second) // t=60s
	expectBeat("")
	if l := logs.String(); !strings.Contains(l, "withholding systemd watchdog keep-alive") || !strings.Contains(l, "lease not renewed for 3m") {
		t.Errorf("withheld keep-alive not logged with its reason")
	}
	if !strings.Contains(logs.String(), "killAfter=30s") {
		t.Errorf("withheld keep-alive log does not say when systemd acts")
	}

	setHealth(nil)
	clk.Step(30 * time.Second) // t=90s
	expectBeat("WATCHDOG=1")
	if !strings.Contains(logs.String(), "resuming systemd watchdog keep-alives") {
		t.Errorf("recovery not logged")
	}

	cancel()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("RunWatchdog did not return after the context was cancelled")
	}
}
