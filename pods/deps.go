package pods

import (
	"context"
	"time"

	v1 "k8s.io/api/core/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"

	"github.com/nodeagent/nodeagent/network"
	"github.com/nodeagent/nodeagent/pleg"
	"github.com/nodeagent/nodeagent/pods/containerspec"
	"github.com/nodeagent/nodeagent/pods/prober"
	"github.com/nodeagent/nodeagent/pods/pullmanager"
	"github.com/nodeagent/nodeagent/runtime"
)

// The interfaces below are everything a worker calls. The Manager fills
// them with the real runtime, PLEG, status manager, mirror client, volume
// manager and event recorder; the worker's unit tests with fakes.

// Runtime is what the workers need from the container runtime;
// *runtime.Runtime implements it.
type Runtime interface {
	CreateContainer(ctx context.Context, spec runtime.ContainerSpec) (string, error)
	StartContainer(ctx context.Context, id string) error
	StopContainer(ctx context.Context, id string, grace time.Duration) error
	RemoveContainer(ctx context.Context, id string) error
	// DrainOutput returns once an exited container's output is in its
	// log file, its task kept (an error: it cannot tell; see exits.go).
	DrainOutput(ctx context.Context, c runtime.Container) error
	ListPods(ctx context.Context) ([]runtime.Pod, error)
	GetImage(ctx context.Context, ref string) (runtime.Image, error)
	PullImageWithAuth(ctx context.Context, ref string, auth *runtime.RegistryAuth) (runtime.Image, error)
	// RemovePodCgroup removes the pod's (empty) cgroup.
	RemovePodCgroup(uid types.UID) error
}

// PLEG is the event stream and the expectations of the PLEG; *pleg.PLEG
// implements it.
type PLEG interface {
	Watch() <-chan pleg.Event
	ExpectWithin(uid types.UID, containerID string, t pleg.EventType, ttl time.Duration)
	WaitExpected(ctx context.Context, uid types.UID) error
}

// PodCache is the PLEG's view of each pod's containers; *pleg.Cache
// implements it. The PLEG updates it before it emits an event.
type PodCache interface {
	Get(uid types.UID) (pleg.PodStatus, bool)
	// GetNewerThan waits until the pod's status is at least as new as t.
	GetNewerThan(ctx context.Context, uid types.UID, t time.Time) (pleg.PodStatus, error)
}

// StatusSink receives computed pod statuses and writes them to the API
// server; *status.Manager implements it.
type StatusSink interface {
	Set(pod *v1.Pod, st v1.PodStatus)
	// Flush writes the pod's status now and says whether it was written.
	Flush(ctx context.Context, uid types.UID) error
	Forget(uid types.UID)
	// DeletePod removes a stopped API pod (zero grace, its UID only).
	DeletePod(ctx context.Context, pod *v1.Pod) error
}

// MirrorClient keeps static pods' mirror pods; *mirror.Client implements
// it.
type MirrorClient interface {
	// Ensure reports false when the mirror pod could not be made yet.
	Ensure(ctx context.Context, pod *v1.Pod) bool
	Delete(ctx context.Context, pod *v1.Pod) error
}

// Volumes sets up and tears down a pod's volumes; *volume.Manager
// implements it.
type Volumes interface {
	// Setup returns each volume's host path by name and when projected
	// volumes need refreshing (zero: never).
	Setup(ctx context.Context, pod *v1.Pod, podDir string) (map[string]string, time.Time, error)
	Teardown(uid types.UID, podDir string) error
}

// NetNS creates and removes pods' network namespaces.
type NetNS interface {
	Create(path string) error
	Remove(path string) error
}

// PodNetwork attaches pods' network namespaces to the pod network (CNI);
// *network.Network implements it.
type PodNetwork interface {
	// Status is nil once a usable network configuration is loaded.
	Status() error
	SetUp(ctx context.Context, pod network.PodRef, netnsPath string, o network.Options) (network.Result, error)
	TearDown(ctx context.Context, pod network.PodRef, netnsPath string) error
}

// Recorder records Events (record.EventRecorder's part the agent uses).
type Recorder interface {
	Event(object k8sruntime.Object, eventtype, reason, message string)
	Eventf(object k8sruntime.Object, eventtype, reason, messageFmt string, args ...any)
}

// Prober runs the pods' probes; *prober.Manager implements it.
type Prober interface {
	SetPod(pod *v1.Pod, podIP string, cs []prober.Container)
	RemovePod(uid types.UID)
	Status(uid types.UID, name, id string) (prober.Probed, bool)
	Unhealthy(uid types.UID) []prober.Kill
}

// HookRunner runs lifecycle hooks; *prober.HookRunner implements it.
type HookRunner interface {
	Run(ctx context.Context, pod *v1.Pod, c *v1.Container, containerID, podIP string, h *v1.LifecycleHandler) (string, error)
}

// workerHost is what a worker asks of the manager that runs it.
type workerHost interface {
	// terminatingSibling reports whether another pod than uid with pod's
	// full name is still stopping (a static pod's previous version, a
	// deleted pod).
	terminatingSibling(uid types.UID, pod *v1.Pod) bool
	// workerDone is called once as the worker's goroutine ends.
	workerDone(w *podWorker)
}

// workerDeps are a worker's collaborators and settings, shared by all
// workers of a Manager and read-only.
type workerDeps struct {
	rt      Runtime
	cache   PodCache
	pleg    PLEG
	status  StatusSink
	mirror  MirrorClient // nil: no API server
	rec     Recorder     // nil: no API server
	volumes Volumes
	netns   NetNS
	podNS   PodNamespaceHolder // nil: containers keep their own IPC/UTS
	pauses  PauseRuntime       // nil: no shareProcessNamespace
	net     PodNetwork         // nil: loopback only
	host    workerHost
	probes  Prober     // nil: no probes
	hooks   HookRunner // nil: no lifecycle hooks
	clock   clock.WithTicker
	met     *metrics

	nodeName   string
	rootDir    string
	podLogsDir string // kubelet's podLogsDir
	netnsDir   string
	podNSDir   string
	resync     time.Duration // sync this often without news
	hostIP     func() string
	// jitter spreads an idle worker's resync as kubelet's pod workers
	// do (resyncJitter); nil: none (tests that want exact periods).
	jitter func(time.Duration) time.Duration

	// Environment and name service (env.go, envsrc.go, namefiles.go).
	hostIPs    func() []string                         // status.hostIPs
	nodeAnyway func(context.Context) (*v1.Node, error) // allocatable for resourceFieldRef
	configMaps ObjectGetter[*v1.ConfigMap]             // nil: no API server
	secrets    ObjectGetter[*v1.Secret]                // nil: no API server
	services   Services                                // nil: no API server
	names      NameSettings

	security SecurityOptions
	// runtimeClass looks up RuntimeClass handlers (nil: no API server);
	// runtimeHandlers maps handlers to containerd runtime types.
	runtimeClass    runtimeClassHandler
	runtimeHandlers map[string]string

	// nodeKeyring is the node's registry credentials (nil: none).
	nodeKeyring NodeKeyring
	// pulls is KubeletEnsureSecretPulledImages (nil: off).
	pulls *pullmanager.Manager
	// puller is the node's image pulls under kubelet's limits
	// (imagepulls.go); nil: each pod pulls without limits.
	puller  *imagePuller
	cgroups PodCgroups // nil: the runtime's default cgroup parent
	devices Devices    // nil: no device plugins
	cpus    CPUs       // nil: no CPU manager
	// noCPUQuota: cpuCFSQuota is false (Options.NoCPUQuota).
	noCPUQuota bool
	userns     UserNamespaces // nil: hostUsers: false pods are refused
	// resize is the in-place pod resize (resize.go; nil: none).
	resize *podResizer
	// imageVols mounts image volumes (imagevolumes.go; nil: the runtime
	// cannot, or the ImageVolume feature gate is off).
	imageVols ImageVolumeRuntime
}

// Devices are the device plugins' resources (*devicemanager.Manager
// through an adapter in cmd/nodeagent).
type Devices interface {
	// Allocate allocates the devices pod's containers request (the
	// plugins' Allocate) at admission; active are the other pods whose
	// containers may still run, those being deleted included (devices of
	// pods no longer among them are freed).
	Allocate(pod *v1.Pod, active []*v1.Pod) error
	// SanitizeAllocatable raises allocatable to what is already
	// allocated for each device resource (kubelet's UpdatePluginResources).
	SanitizeAllocatable(allocatable v1.ResourceList) v1.ResourceList
	// RunOptions are container c's devices, mounts, envs, annotations and
	// CDI devices, after the plugin's PreStartContainer when it asks for it.
	RunOptions(ctx context.Context, pod *v1.Pod, c *v1.Container) (containerspec.Devices, error)
}

// CPUs is the CPU manager (*cpumanager.Manager through an adapter in
// cmd/nodeagent).
type CPUs interface {
	// Allocate assigns the exclusive CPUs of pod's containers at
	// admission (after the devices, as kubelet's topology manager calls
	// its providers); active are the pods whose containers may still run.
	Allocate(pod *v1.Pod, active []*v1.Pod) error
	// CPUSet is the cpuset container c is created with ("": the parent's).
	CPUSet(pod *v1.Pod, c *v1.Container) string
	// Static: the policy gives exclusive CPUs (a Guaranteed pod's CPU
	// resize is then infeasible, as in kubelet 1.34).
	Static() bool
	// ContainerExclusive and PodExclusive: the container, or a container
	// of the pod, has exclusive CPUs; its CFS quota, or the pod cgroup's,
	// is then disabled (kubelet's DisableCPUQuotaWithExclusiveCPUs, on by
	// default in 1.34).
	ContainerExclusive(pod *v1.Pod, c *v1.Container) bool
	PodExclusive(pod *v1.Pod) bool
}

// Topology is kubelet's topology manager (*topologymanager.Manager):
// Admit runs allocate, the devices' and CPUs' allocation of pod at
// admission, whose providers ask it with each container's NUMA hints
// (with the pod scope it asks them for the pod's first); active are the
// pods whose resources stay allocated, pod included. An error with a
// Type() (TopologyAffinityError) rejects the pod with that reason and
// message.
type Topology interface {
	Admit(pod *v1.Pod, active []*v1.Pod, allocate func() error) error
}

// eventFunc records an Event about a pod (workerDeps.event).
type eventFunc func(pod *v1.Pod, typ, reason, msg string)

func (d *workerDeps) event(pod *v1.Pod, typ, reason, msg string) {
	if d.rec != nil {
		d.rec.Event(pod, typ, reason, msg)
	}
}

// ensureMirror reports false when the mirror pod could not be made yet.
func (d *workerDeps) ensureMirror(ctx context.Context, pod *v1.Pod) bool {
	return d.mirror == nil || d.mirror.Ensure(ctx, pod)
}

func (d *workerDeps) deleteMirror(ctx context.Context, pod *v1.Pod) error {
	if d.mirror == nil {
		return nil
	}
	return d.mirror.Delete(ctx, pod)
}
