// Package shutdown is kubelet's graceful node shutdown
// (pkg/kubelet/nodeshutdown, shutdownGracePeriod and
// shutdownGracePeriodCriticalPods, or shutdownGracePeriodByPodPriority):
// the agent holds a systemd-logind
// "delay" inhibitor lock on shutdown, so that when the machine is powered
// off or rebooted logind first announces it (PrepareForShutdown(true)) and
// waits until the lock is released or logind's InhibitDelayMaxSec passes.
//
// What it promises, as kubelet 1.34:
//
//   - The grace periods are priority bands (Band): those of
//     shutdownGracePeriodByPodPriority, or two made from the two periods
//     as kubelet's migrateConfig (MigrateBands). The grace period is their
//     sum.
//   - At start it reads logind's InhibitDelayMaxUSec; when it is below
//     the grace period it writes a drop-in
//     (/etc/systemd/logind.conf.d/99-nodeagent.conf) raising it, makes
//     logind reload (SIGHUP through systemd's KillUnit), and logs when the
//     delay is still too small (the lock is taken anyway: a shorter delay is
//     better than none).
//   - It takes the lock (what "shutdown", mode "delay", who "nodeagent").
//   - On PrepareForShutdown(true): ShuttingDown reports "node is shutting
//     down" (the Ready condition turns False with reason KubeletNotReady,
//     and new pods are rejected), a Normal "Shutdown" event is recorded on
//     the Node and a node status report is asked for at once; then the
//     pods are stopped band by band from the lowest priority (Groups), each
//     with the smaller of its own grace period and its band's (with the two
//     periods: the regular pods with shutdownGracePeriod -
//     shutdownGracePeriodCriticalPods, then the critical pods, priority >=
//     2000000000, with shutdownGracePeriodCriticalPods). Each group is
//     waited for at most its grace period; empty ones are skipped. The pods end Failed with reason Terminated and the
//     DisruptionTarget condition (pods.StopForNodeShutdown). Then the lock
//     is released and the shutdown goes on.
//   - On PrepareForShutdown(false) (the shutdown was cancelled) the node is
//     no longer shutting down and the lock is taken again. Stopped pods
//     stay stopped.
//   - Without logind or the system bus the feature is off: Run logs why
//     and returns; nothing else of the agent depends on it. If the bus
//     connection is lost later, Run connects again every second.
//
// Not implemented: the state file and the graceful-shutdown start/end
// metrics.
package shutdown
