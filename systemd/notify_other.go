//go:build !linux

package systemd

import "time"

// notify is a no-op off Linux: there is no systemd to talk to.
func notify(string) (bool, error) { return false, nil }

// watchdogTimeout reports the watchdog as disabled off Linux.
func watchdogTimeout() (time.Duration, error) { return 0, nil }
