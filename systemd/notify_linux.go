//go:build linux

package systemd

import (
	"fmt"
	"os"
	"syscall"
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

// StderrIsJournal reports whether this process's stderr is connected to the
// journal: systemd sets JOURNAL_STREAM to the device and inode of the stream
// it passes as stdout/stderr, and they must match stderr (a redirected stderr
// does not). Then NewJournalHandler's priority prefixes are understood.
func StderrIsJournal() bool {
	js := os.Getenv("JOURNAL_STREAM")
	if js == "" {
		return false
	}
	var dev, ino uint64
	if _, err := fmt.Sscanf(js, "%d:%d", &dev, &ino); err != nil {
		return false
	}
	var st syscall.Stat_t
	if err := syscall.Fstat(int(os.Stderr.Fd()), &st); err != nil {
		return false
	}
	return uint64(st.Dev) == dev && uint64(st.Ino) == ino
}
