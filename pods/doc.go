// Package pods runs the node's pods: one worker goroutine per pod, as
// kubelet's pod workers.
//
// The Manager takes desired pods from its sources (package source: the
// static manifest directory and the API server's pods bound to this node),
// admits each new pod once (package admission: the supported subset of the
// pod spec, and whether it fits the node's allocatable), and gives it a
// worker. Its routing (upsert, PodUpdate, PodRemove, MirrorUpdate,
// dispatch, followStatic, cleanupOrphans, workerDone) is built by
// newManager from its dependencies, so it is unit-tested with fakes.
//
// A pod's worker has two halves, as kubelet's pod workers and their
// syncer. The podWorker (podworker.go) is the pod's state machine: it
// owns the pod's goroutine, woken by its source, by PLEG events for the
// pod, or by its own timers (crash-loop back-off, retries, resync), and
// its back-offs; before each sync it waits until the PLEG has seen the
// events its previous actions caused and reads a pod status from the
// PLEG's cache at least as new as its last sync. A pod is syncing until a
// termination is requested, terminating while its containers stop, and
// terminated once nothing of it runs, until it is gone. Everything that
// ends a pod is one termination request (termination) carrying its
// reason (the active deadline, a node shutdown, an eviction, admission's
// rejection, a deletion in the API, its removal from its source), its
// grace period, the status to write and a completion signal (Evict and
// StopPods wait for it); a request of a later reason in that list
// replaces one of an earlier reason and completes with it.
//
// The podWorker drives a podSyncer: SyncPod, SyncTerminatingPod,
// SyncTerminatedPod and Deadline. The worker type implements it: SyncPod
// computes a plan as a pure function of (spec, runtime state, back-off,
// now) and acts on it through the runtime; SyncTerminatingPod stops the
// containers in kubelet's order; SyncTerminatedPod writes the status the
// termination promises, releases a finished pod's sandbox, deletes a
// deleted API pod from the API or cleans up a removed one (what differs
// between reasons is data: termPolicies in terminate.go). Statuses go to
// the status manager (package status), which writes them to the API server
// on change; a static pod's status goes to its mirror pod (package
// mirror). Volumes are set up and torn down by package volume.
//
// The worker keeps what a pod's syncs share (its last status, crash-loop
// back-offs, start failures, pod IPs, name-service files, what its end
// did) and owns small per-pod helpers, each with one job and only the collaborators it uses
// (never the worker):
//
//   - podImages (images.go): the pull policy, pulls with the pod's image
//     pull secrets and the node's credentials, kubelet's per-image pull
//     back-off, and the image IDs the status reports;
//   - podNamespaces (podns.go): the pod's IPC and UTS namespaces and
//     /dev/shm, and the pause container holding the PID namespace of a
//     shareProcessNamespace pod;
//   - containerKiller (killer.go): kubelet's killContainer (Killing event,
//     preStop hook within the grace period, stop, sidecars in kubelet's
//     order: stopOrder in sidecar.go) and the postStart hook; it keeps no
//     state, so one pod's containers stop concurrently;
//   - podProbes (probes.go): the prober's view of the pod (what the probes
//     say for the status and the plan, the unhealthy containers to
//     restart);
//   - startTracker (stalestart.go, interruptedstart.go): the starts the
//     worker made, so that a status older than a start or a start cut off
//     by containerd's death is not taken for a container's exit.
//
// The rest of the worker is in worker.go (SyncPod, the pod's sandbox
// setup, starts, the status), terminate.go (SyncTerminatingPod,
// SyncTerminatedPod), finished.go (a finished pod's sync and the release
// of its sandbox), stoppods.go (stopping what runs while the status stays
// current), namefiles.go, envsrc.go, runtimeclass.go, specinputs.go and
// termination.go (termination messages).
//
// A container's runtime spec is built by package containerspec
// (containerspec.Build) from the pod, the container and what the worker
// resolved for it (specinputs.go): its environment's sources (envsrc.go:
// ConfigMaps and Secrets through package objcache, Services through an
// informer started on first use, the node's allocatable), volumes, pod
// IPs, runtime type, cgroups and shared namespaces. Every pod gets
// kubelet's /etc/hosts, resolv.conf and hostname (namefiles.go, contents
// from package network), written in its directory and bind-mounted into
// each container.
//
// A worker depends only on the narrow interfaces of deps.go (Runtime,
// PLEG, PodCache, StatusSink, MirrorClient, Volumes, NetNS, Recorder,
// Prober, HookRunner), so its lifecycle is unit-tested with fakes and a
// fake clock; the state machine is tested alone with a fake podSyncer.
//
// Run returns once every goroutine it started has ended; pods keep running
// in the runtime and the next Run adopts running containers whose spec
// hash matches (no restart after an agent restart or upgrade). Once every
// source has listed its pods, containers, directories and network
// namespaces of pods no source knows are cleaned up.
package pods
