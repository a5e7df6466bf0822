// Package systemd is nodeagent's side of the systemd service protocol
// (sd_notify(3)): it tells the service manager when the agent is ready, when it
// is stopping, what it is doing, and - through the watchdog - that it is still
// healthy.
//
// Contract:
//
//   - Ready sends READY=1. Call it once, after the node is registered, the first
//     Lease renewal succeeded and the health endpoints serve. With Type=notify
//     `systemctl start nodeagent` returns only then.
//   - Stopping sends STOPPING=1. Call it when shutdown begins (SIGTERM).
//   - Status sends STATUS=<msg>, a one-line human-readable state shown by
//     `systemctl status`; newlines are replaced by spaces.
//   - RunWatchdog sends WATCHDOG=1 every WatchdogSec/2, but only while the
//     caller's health check passes; when it fails the keep-alive is withheld
//     (and the reason logged), so a wedged agent is killed with SIGABRT and
//     restarted by systemd once WatchdogSec has passed without a keep-alive.
//     systemd arms the watchdog when start-up completes (READY=1), so
//     keep-alives sent before Ready are harmless.
//   - NewJournalHandler prefixes every log record with its syslog priority
//     ("<4>" for warnings, ...) so journald stores stderr lines with their
//     level; use it when go-systemd's journal.StderrIsJournalStream reports that
//     stderr is the journal.
//
// Not running under systemd is not an error: without NOTIFY_SOCKET every call
// is a no-op that returns nil, and without WATCHDOG_USEC (or with a
// WATCHDOG_PID that is not this process) RunWatchdog returns at once. An error
// is returned only when NOTIFY_SOCKET is set but the message cannot be sent.
//
// The environment is left in place (NOTIFY_SOCKET is needed for every later
// message); the unit uses NotifyAccess=main, so processes the agent starts
// cannot notify on its behalf even if they inherit it.
//
// The functions may be called from any goroutine. The sd_notify transport is
// Linux-only (notify_linux.go, go-systemd); on other platforms every call is a
// no-op.
package systemd
