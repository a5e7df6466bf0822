package pods

import (
	"time"

	v1 "k8s.io/api/core/v1"
)

// Annotations kubelet puts on pods it takes from sources; nodeagent uses the
// same keys so that tools that know kubelet's conventions read them.
const (
	// AnnotationConfigSource is the source a pod came from: SourceFile or
	// SourceAPI.
	AnnotationConfigSource = "kubernetes.io/config.source"
	// AnnotationConfigHash is a hash of a static pod's manifest (its UID).
	AnnotationConfigHash = "kubernetes.io/config.hash"
	// AnnotationConfigMirror marks a mirror pod; its value is the static
	// pod's config hash.
	AnnotationConfigMirror = "kubernetes.io/config.mirror"
)

// Pod sources.
const (
	SourceFile = "file"
	SourceAPI  = "api"
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

	// Admission refusal of fields outside the supported subset. Resource
	// refusals are "OutOf" + the resource name (OutOfpods, OutOfcpu), as
	// kubelet spells them (FitsNode).
	ReasonUnsupportedPodSpec = "UnsupportedPodSpec"
	// The node's allocatable could not be read (kubelet's reason).
	ReasonInvalidNodeInfo = "InvalidNodeInfo"
)

// Waiting is why a container is not running now, as the worker knows it
// (the runtime does not: it only knows containers that exist).
type Waiting struct {
	Reason  string
	Message string
}

// StatusInput is what the worker knows about a pod beyond the runtime's
// containers; ComputeStatus combines both.
type StatusInput struct {
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
	// PodIP is the host IP for hostNetwork pods, "" otherwise (no CNI yet).
	PodIP string
	// StartTime is when the agent admitted the pod (status.startTime).
	StartTime time.Time
}

// ManifestError is a static pod file that could not be used.
type ManifestError struct {
	Path string
	Err  error
}

func (e *ManifestError) Error() string { return e.Path + ": " + e.Err.Error() }
func (e *ManifestError) Unwrap() error { return e.Err }

// fullName is namespace/name, the key kubelet uses for a pod across its
// sources (a static pod and its mirror pod share it).
func fullName(p *v1.Pod) string { return p.Namespace + "/" + p.Name }
