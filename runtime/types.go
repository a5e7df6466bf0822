package runtime

import (
	"errors"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// Label keys that tie a container to its pod. They are the keys CRI
// implementations use, so tools that know CRI conventions read them too.
const (
	LabelPodUID           = "io.kubernetes.pod.uid"
	LabelPodName          = "io.kubernetes.pod.name"
	LabelPodNamespace     = "io.kubernetes.pod.namespace"
	LabelContainerName    = "io.kubernetes.container.name"
	LabelContainerAttempt = "io.kubernetes.container.attempt"

	// Labels this adapter keeps for its own bookkeeping.
	labelPrefix      = "io.nodeagent."
	labelCgroupsPath = labelPrefix + "cgroups-path"
	labelLogPath     = labelPrefix + "log-path"
	labelStartedAt   = labelPrefix + "started-at"
	labelFinishedAt  = labelPrefix + "finished-at"
	labelExitCode    = labelPrefix + "exit-code"
	labelReason      = labelPrefix + "reason"
	labelOOMKilled   = labelPrefix + "oom-killed"
)

// Errors returned by the adapter; match them with errors.Is.
var (
	// ErrNotFound: the container (or image) does not exist or is not ours.
	ErrNotFound = errors.New("not found")
	// ErrInvalidSpec: a ContainerSpec failed validation.
	ErrInvalidSpec = errors.New("invalid container spec")
	// ErrFailedPrecondition: the container is not in a state that allows
	// the operation (for example starting a container that already ran).
	ErrFailedPrecondition = errors.New("failed precondition")
)

// State is the lifecycle state of a container.
type State string

const (
	StateCreated State = "created"
	StateRunning State = "running"
	StateExited  State = "exited"
	StateUnknown State = "unknown"
)

// Reasons reported for exited containers (kubelet's vocabulary).
const (
	ReasonCompleted = "Completed"
	ReasonError     = "Error"
	ReasonOOMKilled = "OOMKilled"
	ReasonUnknown   = "Unknown"
)

// PodRef identifies the pod a container belongs to.
type PodRef struct {
	UID       types.UID
	Name      string
	Namespace string
}

// Container is one container's identity and observed state.
type Container struct {
	ID      string
	Pod     PodRef
	Name    string // container name within the pod
	Attempt uint32 // restart attempt
	Image   string

	State      State
	Pid        uint32 // 0 unless running
	ExitCode   int32  // valid when State == StateExited
	Reason     string // set when State == StateExited
	CreatedAt  time.Time
	StartedAt  time.Time // zero until started
	FinishedAt time.Time // zero until exited
	// Undetermined: a listing could not tell this container's state
	// (containerd answered its task's status UNKNOWN, or left a started
	// container's task out and asking for it again failed: its shim did
	// not answer in time). State is then StateUnknown; it is neither an
	// exit nor a state: ask again (the PLEG keeps what it observed last
	// and inspects the container on its own; InspectContainer returns an
	// error instead).
	Undetermined bool

	// CgroupsPath is linux.cgroupsPath of the container's OCI spec: either a
	// path relative to the cgroup root(s) ("/nodeagent/<pod>/<id>") or, for
	// the systemd driver, "slice:prefix:name".
	CgroupsPath string
	LogPath     string
	Labels      map[string]string
	// User is the user its process runs as (nil: unknown).
	User *ProcessUser
}

// Pod groups the containers that carry the same pod UID label.
type Pod struct {
	PodRef
	Containers []Container
}

// GroupPods groups containers into pods, keeping the input order of
// containers within a pod and ordering pods by first appearance.
func GroupPods(cs []Container) []Pod {
	idx := map[types.UID]int{}
	var pods []Pod
	for _, c := range cs {
		i, ok := idx[c.Pod.UID]
		if !ok {
			i = len(pods)
			idx[c.Pod.UID] = i
			pods = append(pods, Pod{PodRef: c.Pod})
		}
		pods[i].Containers = append(pods[i].Containers, c)
	}
	return pods
}

// Mount is a bind mount from the host into the container.
type Mount struct {
	HostPath      string
	ContainerPath string
	ReadOnly      bool
	// Propagation of mount events between the host and the container
	// (zero: private). See ociMounts for what the source must be.
	Propagation Propagation
}

// Resources are the cgroup limits of a container. Zero means "not set".
type Resources struct {
	CPUShares        uint64
	CPUQuota         int64  // microseconds per CPUPeriod
	CPUPeriod        uint64 // microseconds; default 100000 when CPUQuota is set
	MemoryLimitBytes int64
	// CPUSetCPUs is the container's cpuset.cpus ("0-1,4"): the CPU
	// manager's exclusive CPUs or shared pool; "" leaves the parent's.
	// Only creation uses it (UpdateContainerCPUSet changes it).
	CPUSetCPUs string
	// SwapMax is the swap the container may use beyond its memory: cgroup
	// v2 memory.swap.max; on v1 only 0 is applied, as memory+swap equal
	// to the memory limit (none without one). nil leaves the default.
	SwapMax *int64
}

// ContainerSpec is what CreateContainer needs to create one container of a pod.
type ContainerSpec struct {
	Pod     PodRef
	Name    string
	Attempt uint32

	// Image is a reference to an image present in containerd, short
	// ("busybox:1.36") or fully qualified (see NormalizeImageRef).
	Image string
	// Command replaces the image's entrypoint, Args its cmd (as in a Pod spec).
	Command    []string
	Args       []string
	Env        []string // KEY=VALUE
	WorkingDir string
	Mounts     []Mount
	Resources  Resources
	// LogPath, when set, receives the container's stdout and stderr,
	// written outside the agent (by the Options.ContainerLogger process the
	// shim starts, in the CRI format with rotation; or by the shim itself,
	// raw), so logs survive an agent restart. Must be absolute.
	LogPath string
	// HostNetwork shares the host's network namespace (and /etc/hosts,
	// /etc/resolv.conf). Otherwise the container joins the network
	// namespace at NetNSPath, or gets a namespace of its own when
	// NetNSPath is empty.
	HostNetwork bool
	// NetNSPath is a network namespace file (a bind mount of
	// /proc/<pid>/ns/net, see internal/netns) the container joins, so that
	// all containers of a pod share one network. Must be absolute and must
	// exist when the container is created; not allowed with HostNetwork.
	NetNSPath string
	// CgroupParent is the cgroup (cgroupfs path) the container is created
	// under; default Options.CgroupParent + "/" + pod UID. With
	// Options.SystemdCgroup it is the pod's slice unit
	// ("kubepods-burstable-pod<uid>.slice").
	CgroupParent string
	// OOMScoreAdj is the container process's oom_score_adj; nil leaves
	// the runtime's default.
	OOMScoreAdj *int
	// Labels are extra labels; pod labels override them.
	Labels map[string]string
	// Hostname is set in the container's UTS namespace (default: the pod
	// name); ignored with HostNetwork.
	Hostname string
	// PodNamespaces are the pod's IPC and UTS namespaces and /dev/shm the
	// container joins (see sandbox.go).
	PodNamespaces PodNamespaces
	// Security is the container's user, capabilities, seccomp, sysctls
	// and namespaces (see Security).
	Security Security
	// RuntimeType is the containerd runtime (shim) that runs the
	// container; default DefaultRuntimeType.
	RuntimeType string
	// Stdin keeps the container's stdin open for attach sessions;
	// StdinOnce closes it when the first one ends. TTY gives the
	// container a terminal (its output is one stream, logged as stdout).
	// With either, StdioDir (absolute) holds the container's stdio FIFOs,
	// and LogPath and Options.ContainerLogger are required. See stdio.go.
	Stdin, StdinOnce, TTY bool
	StdioDir              string
	// Devices are host device nodes made available in the container (and
	// allowed in its devices cgroup), from device plugins' Allocate.
	Devices []Device
	// Annotations are OCI spec annotations (device plugins' Allocate).
	Annotations map[string]string
	// CDIDevices are fully qualified CDI device names
	// (vendor.com/class=name), resolved from the CDI spec files in
	// Options.CDISpecDirs when the container is created (see cdi.go); a
	// name no spec defines fails the creation.
	CDIDevices []string
	// UserNamespace, when set, runs the container in a user namespace of
	// its own with these mappings (a pod with hostUsers: false): its
	// rootfs is owned by the namespace's IDs and its mounts are idmapped.
	// The runtime must support it (SupportsUserNamespaces).
	UserNamespace *UserNamespace
}

// Device is a host device node in a container, as a device plugin's
// DeviceSpec gives it: Permissions is a cgroup permission string ("rwm").
type Device struct {
	HostPath, ContainerPath, Permissions string
}

// DefaultRuntimeType is the runtime of containers that name none: runc.
const DefaultRuntimeType = "io.containerd.runc.v2"

// Image is an image known to containerd.
type Image struct {
	ID    string   // config digest
	Names []string // references
	Size  int64    // bytes of content (compressed layers + config + manifest)
	// Pinned: a name of it has the label io.cri-containerd.pinned=pinned
	// (never garbage-collected, as in containerd's CRI).
	Pinned bool
}

// Version describes the connected containerd.
type Version struct {
	RuntimeName    string
	RuntimeVersion string
	Revision       string
}

// EventType is the kind of a runtime event.
type EventType string

const (
	EventTaskStart       EventType = "TaskStart"
	EventTaskExit        EventType = "TaskExit"
	EventTaskDelete      EventType = "TaskDelete"
	EventTaskOOM         EventType = "TaskOOM"
	EventContainerCreate EventType = "ContainerCreate"
	EventContainerDelete EventType = "ContainerDelete"

	// EventStreamUp: the subscription is (re)established. Events may have
	// been missed before it (at start, after a break or an overflow):
	// consumers should relist.
	EventStreamUp EventType = "StreamUp"
	// EventStreamDown: the subscription broke (Err says why); events are
	// being missed until the next EventStreamUp.
	EventStreamDown EventType = "StreamDown"
)

// Event is one runtime event. ContainerID is empty for stream events.
type Event struct {
	Type        EventType
	ContainerID string
	Time        time.Time // when containerd published it (or observed, for stream events)
	ExitCode    uint32    // TaskExit
	Pid         uint32    // TaskStart, TaskExit
	Err         error     // EventStreamDown
	// ExitedAt is when the process exited (TaskExit), as containerd
	// reports the stopped task's exit time.
	ExitedAt time.Time
	// Reason is a TaskExit's exit reason (ReasonCompleted, ReasonError,
	// ReasonOOMKilled) when the event alone decides it as an inspection
	// of the container would: OOMKilled when this subscription delivered
	// the container's TaskOOM before, "" when an inspection must decide
	// (a SIGKILL on cgroup v2, which may be an OOM kill whose TaskOOM was
	// lost: oomkill.go). An inspection may still find OOMKilled later (a
	// TaskOOM after the TaskExit).
	Reason string
}
