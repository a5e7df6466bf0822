//go:build linux

package systemd

import (
	"time"

	"github.com/coreos/go-systemd/v22/daemon"
)

// notify sends state to $NOTIFY_SOCKET. It reports false and no error when the
// variable is unset (not running under systemd, or not Type=notify).
func notify(state string) (bool, error) {
	return daemon.SdNotify(false, state)
}

// watchdogTimeout returns WatchdogSec for this process, or 0 if the watchdog is
// not enabled for it (WATCHDOG_USEC unset, or WATCHDOG_PID names another
// process).
func watchdogTimeout() (time.Duration, error) {
	return daemon.SdWatchdogEnabled(false)
}
