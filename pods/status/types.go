package status

import (
	"time"

	v1 "k8s.io/api/core/v1"
)

// Reasons of pod and container statuses (kubelet's vocabulary).
const (
	ReasonContainerCreating = "ContainerCreating"
	ReasonPodInitializing   = "PodInitializing"
	ReasonCrashLoopBackOff  = "CrashLoopBackOff"
	ReasonCompleted         = "Completed"
	ReasonError             = "Error"
	ReasonErrImagePull      = "ErrImagePull"
	ReasonImagePullBackOff  = "ImagePullBackOff"
	ReasonErrImageNeverPull = "ErrImageNeverPull"
	ReasonCreateContainer   = "CreateContainerError"
	ReasonRunContainer      = "RunContainerError"
)

// Waiting is why a container is not running now, as the worker knows it
// (the runtime does not: it only knows containers that exist).
type Waiting struct {
	Reason  string
	Message string
}

// Input is what the worker knows about a pod beyond the runtime's
// containers; Compute combines both.
type Input struct {
	// Rejected: admission refused the pod; Reason and Message say why. The
	// pod's phase is Failed and nothing runs.
	Rejected      bool
	RejectReason  string
	RejectMessage string

	// SandboxReady: the pod's network namespace and volumes are set up
	// (condition PodReadyToStartContainers).
	SandboxReady bool
	// Waiting holds the worker's reason for every container (init or app,
	// by name) that is not running and whose runtime state does not say
	// why: waiting for a restart back-off, an image pull error, a create
	// error. Containers absent here and absent in the runtime are
	// ContainerCreating (app containers wait with PodInitializing while
	// init containers run).
	Waiting map[string]Waiting
	// ImageIDs maps image references to their IDs ("sha256:...") for
	// containerStatuses[].imageID.
	ImageIDs map[string]string
	// Terminating: the pod is being stopped (deleted, or its source dropped
	// it); containers that are stopped stay terminated.
	Terminating bool

	HostIP string
	// PodIPs are the pod's addresses (status.podIPs, the first is
	// status.podIP): the host IP for hostNetwork pods, the CNI result's
	// otherwise, none without a pod network.
	PodIPs []string
	// StartTime is when the agent admitted the pod (status.startTime).
	StartTime time.Time

	// Probed holds, by runtime container ID, what the probes say of
	// running containers that have probes (containerStatuses[].started
	// and ready). A running container absent here is started and ready.
	Probed map[string]Probed
	// Messages are the termination messages of exited containers by
	// runtime container ID (state.terminated.message).
	Messages map[string]string
	// FailReason, when set, makes the pod Failed with it and FailMessage
	// (kubelet's eviction of a pod past its activeDeadlineSeconds).
	FailReason  string
	FailMessage string
	// Disruption, when set, is the message of the DisruptionTarget
	// condition (True, reason TerminationByKubelet) the agent adds when it
	// stops a pod on its own initiative (node-pressure eviction, node
	// shutdown), as kubelet.
	Disruption string

	// Resources holds, by runtime container ID, what running containers
	// really have (read back from their cgroups:
	// containerStatuses[].resources); a running container absent here
	// reports its spec's (the pod given to Compute carries the
	// allocation).
	Resources map[string]v1.ResourceRequirements
	// ResizeConditions are the PodResizePending and PodResizeInProgress
	// conditions of an in-place resize, as they are.
	ResizeConditions []v1.PodCondition
}

// Probed is what a container's probes say of it while it runs.
type Probed struct {
	// Started: its startup probe succeeded (or it has none).
	Started bool
	// Ready: started and its readiness probe succeeded (or it has none).
	Ready bool
}
