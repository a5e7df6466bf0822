// Package pleg is nodeagent's pod lifecycle event generator: it turns
// container state in the runtime into pod lifecycle events (ContainerStarted,
// ContainerDied, ContainerRemoved, ContainerChanged) for the pod workers,
// keeps a cache of pod statuses with timestamps, and reports its health.
//
// # Detection
//
// Relist lists every container (two runtime calls) and diffs it against the
// last observed state with kubelet's generic PLEG semantics: running →
// ContainerStarted, exited → ContainerDied, created/unknown →
// ContainerChanged, gone → ContainerRemoved (preceded by ContainerDied unless
// it had already exited). Every relist refreshes the whole cache. A
// container the runtime lists Undetermined (its state could not be asked
// in time) is not a change: its last observation stands and it is
// inspected on its own, with the inspection's retries.
//
// Upstream event sources (Options.Sources) trigger a targeted inspection of
// the one container concerned instead of a relist:
//   - "containerd": task start/exit/delete/OOM and container create/delete
//     events (runtime.Subscribe);
//   - "cgroups": inotify on each running container's cgroup v2 directory
//     (cgroup.events "populated 1 → 0", removal of the directory) and on its
//     parent (creation of container directories). The directory comes from
//     the container's init process (/proc/<pid>/cgroup) or its OCI spec, so
//     pure v2 and hybrid v1/v2 hosts both work; pure v1 hosts cannot use
//     this source.
//
// A containerd TaskExit that decides the exit (the event carries the exit
// status and time, and the reason unless an inspection must find it: a
// SIGKILL on cgroup v2, runtime.Event.Reason) is applied at once to a
// container last seen running, without a runtime call: the ContainerDied
// and the cache need nothing else, and the inspection the event triggers
// as well only confirms it (a later difference, such as a TaskOOM after
// the TaskExit, is a ContainerChanged). A cgroup signal, which usually
// comes a few milliseconds before the TaskExit (the process has died but
// the shim has not reaped it, so containerd still reports it running),
// still inspects and rechecks; whichever learns of the exit first makes
// the event, and the other's observation is not news.
//
// At most one inspection per container is in flight; signals arriving
// meanwhile (from either source) coalesce into one more inspection, so
// duplicates cost one runtime call and per-container order holds. An
// observation older than the one already applied is discarded. Each
// inspection has its own timeout; a failing one is retried on its own after
// 1s, 2s, 4s, 8s and 16s (wait.Backoff), then left to the next relist, so
// one hung container never stalls the others.
//
// While every configured source works, the periodic relist is a safety net
// (Options.RelistPeriod, default 5m). When a source fails (containerd event
// stream broken, inotify watch limit reached, cgroup directory not found)
// the PLEG logs it, counts it (nodeagent_pleg_fallbacks_total,
// nodeagent_pleg_fallback_active, nodeagent_pleg_source_healthy) and relists
// every Options.FallbackRelistPeriod (1s) until the source recovers; it
// relists once more at recovery to cover the gap. With no sources it is a
// relist-only PLEG with kubelet's 1s baseline.
//
// Running out of inotify is such a failure, never a permanent one: when no
// instance can be created (fs.inotify.max_user_instances) or a running
// container's cgroup or a pod cgroup cannot be watched
// (fs.inotify.max_user_watches), the cgroup source says which limit in its
// error, remembers what it could not watch and retries on its own goroutine
// after 1s, 2s, 4s, 8s, then every 10s, so it is back in event mode within
// 10s of watches being available again. Kubelet has no inotify source and
// no such path.
//
// # Expected events
//
// A pod worker records the events its own actions will cause (Expect,
// ExpectWithin) before acting. For a pod with pending expectations, an
// event of the expected container and type meets the expectation and is
// not delivered; earlier stages of the same container (ContainerChanged
// before an expected ContainerStarted, ContainerDied before an expected
// ContainerRemoved) are absorbed; later stages meet it and are news. News is
// held and delivered in order once all the pod's expectations are met or
// expired. Expiries are logged and counted (nodeagent_pleg_expectations_total), and the
// expired expectation's container is inspected again at once: its signal may have been
// lost, and the PLEG's view of it would otherwise stay stale until the next relist.
//
// # Delivery
//
// Watch is the pod workers' channel (Options.EventBuffer, default 1000).
// Policy: drop. Sending never blocks the PLEG; when the channel is full the
// event is dropped and counted (nodeagent_pleg_discarded_events_total
// {consumer="watch"}), as kubelet does. A worker that missed an event still
// converges: the cache always holds the latest status and workers resync
// periodically. Subscribe/EventsHandler stream every event (before
// expectation filtering) to observers through 256-event buffers with the
// same drop policy (consumer="stream").
//
// # Cache
//
// Cache().GetNewerThan(ctx, uid, t) returns the pod's status once it
// reflects the runtime at a time after t. Relists refresh every pod; an
// inspection refreshes its pod; in event mode, while no inspection is
// pending, every status is current as of now (every change would arrive as
// a signal), which the cache asks lazily so that an idle PLEG does no
// periodic work.
//
// # Health
//
// Healthy is false only when relisting has been hung or failing for longer
// than Options.HealthThreshold (3m), or never succeeded that long after
// start. Slow inspections do not count.
//
// # Concurrency and shutdown
//
// The PLEG's lock only guards memory: no runtime call, file read, inotify
// change or log write happens while it is held, so Healthy, Expect, the
// cache and the event sources never wait behind I/O. The relist and the
// inspections collect under the lock and act outside it; the cgroup source
// does all its I/O (reading /proc and cgroup.events, adding and removing
// watches) on its own goroutine, which the PLEG only tells, in memory, which
// containers to watch.
//
// Every runtime call is bounded by Run's context as well as by its own
// timeout. Run returns only after every goroutine it started (event sources,
// inspections, retry waits) has ended, so its caller may close the runtime
// then; no inspection starts after Run returned.
package pleg
