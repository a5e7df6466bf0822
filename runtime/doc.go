// Package runtime is nodeagent's containerd adapter and the only package of
// the agent that imports containerd.
//
// # What it promises
//
// A Runtime talks to one containerd endpoint in one namespace (default
// "k8s.io"). Containers are grouped into pods by labels, with the keys CRI
// uses (LabelPodUID, LabelPodName, LabelPodNamespace, LabelContainerName,
// LabelContainerAttempt); containers without a pod UID label are not ours and
// are ignored by every list and inspection.
//
// Every call that reaches containerd runs under a timeout (Options.CallTimeout,
// default 10s, on top of any deadline the caller's context already has), so a
// hung daemon or shim can delay a caller but never block it forever.
// StopContainer additionally waits up to its grace period; CreateContainer
// and StartContainer run under Options.StartTimeout (default 2m: under load a
// start takes seconds, and giving up throws the work away). A pull has no
// deadline: it fails when no byte has arrived for
// Options.PullProgressTimeout (default 5m) while a request is open.
//
// Images: references are normalised as Docker and kubelet do
// (NormalizeImageRef: "busybox" is "docker.io/library/busybox:latest"), so a
// pod's short name finds an image stored under its full name; GetImage and
// CreateContainer accept either form. PullImage pulls anonymously,
// PullImageWithAuth with a registry's credentials, through the hosts
// containerd's hosts.toml files under Options.RegistryConfigPath configure
// (mirrors, CA, client certificates, skip_verify; containerd's own
// remotes/docker/config reads them), else the registry itself (HTTPS; HTTP
// only for loopback registries), and unpacks for the configured
// snapshotter.
//
// Networking: a container shares the host's network namespace
// (HostNetwork), joins an existing namespace by path (NetNSPath; pods share
// one), or gets a private one.
//
// State: a container is StateCreated until its task is started, StateRunning
// while its task runs, StateExited once the task stopped (exit code, reason
// and timestamps are reported). StopContainer records the exit status in the
// container's labels and deletes the task, so a stopped container does not
// keep a containerd shim alive; a container whose process exited by itself
// keeps its stopped task (and shim) until RemoveContainer, and its exit
// status is recorded in its labels too as soon as the TaskExit event arrives
// (before a subscriber sees that event). containerd 2.x deletes stopped tasks
// when it restarts; the labels then still tell the exit status. A process
// that exits while containerd is down is reported as exited with exit code
// -1 and reason Unknown by containerd 2.x (1.6 keeps the real status).
// A started container whose task a read does not show, without a recorded
// exit, has not necessarily exited (containerd 2.x leaves out of its task
// list a task whose shim is busy past its 2s state timeout, as while it
// starts the task): the task is asked for again, and a listing that still
// cannot tell reports the container Undetermined (StateUnknown), an
// inspection an error; only a task gone without any record is an exit with
// code -1 (containers.go, taskless). A task status UNKNOWN (containerd could
// not ask the shim) is undetermined the same way.
//
// Subscribe follows containerd's task and container events. The subscription
// survives containerd restarts: it reconnects with exponential backoff and
// reports every (re)connection and every break as an event (EventStreamUp,
// EventStreamDown) so that consumers can relist to cover the gap.
//
// # What it assumes
//
// runc through the io.containerd.runc.v2 shim; Linux. Registries need no
// credentials (no pull secrets yet).
//
// # Tested versions
//
// Built with the containerd v1.7.35 Go client. The real-containerd tests of
// this package and of pleg run against (both with runc 1.1.5 from Debian 12,
// cgroup v1/v2 hybrid host, shim io.containerd.runc.v2):
//   - Debian 12's containerd 1.6.20 (make test, default);
//   - containerd v2.4.2, a current release, built from the Go module proxy by
//     hack/build-containerd.sh (pinned in hack/containerd-current/go.mod) and
//     selected with NODEAGENT_CONTAINERD_BIN (a make test phase).
//
// Only the stable containerd services the 1.7 client shares with 2.x are
// used (containers, tasks, images, content, snapshots, events), with the
// event topics and types both versions publish.
package runtime
