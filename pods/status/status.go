package status

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodeagent/nodeagent/kubetypes"
	"github.com/nodeagent/nodeagent/pleg"
	"github.com/nodeagent/nodeagent/runtime"
)

// Reasons and messages of pod conditions and synthesised container states
// (kubelet's vocabulary).
const (
	// ReasonContainersNotInitialized: Initialized is False because some init
	// containers have not succeeded.
	ReasonContainersNotInitialized = "ContainersNotInitialized"
	// ReasonContainersNotReady: ContainersReady and Ready are False because
	// some app containers are not ready.
	ReasonContainersNotReady = "ContainersNotReady"
	// ReasonPodCompleted: the pod succeeded (ContainersReady, Ready,
	// Initialized).
	ReasonPodCompleted = "PodCompleted"
	// ReasonPodFailed: the pod failed (ContainersReady, Ready).
	ReasonPodFailed = "PodFailed"
	// ReasonReadinessGatesNotReady: Ready is False because the condition
	// of a readiness gate is missing or not True.
	ReasonReadinessGatesNotReady = "ReadinessGatesNotReady"
	// ReasonContainerStatusUnknown: a container that ran is gone from the
	// runtime, or never reported an end state before its pod terminated.
	ReasonContainerStatusUnknown = "ContainerStatusUnknown"

	// rejectedMessagePrefix is how kubelet prefixes an admission
	// rejection's message.
	rejectedMessagePrefix = "Pod was rejected: "
	// exitCodeUnknown is the exit code kubelet reports for containers whose
	// end it could not observe (128 + SIGKILL).
	exitCodeUnknown = 137
)

// containerIDPrefix is the scheme of containerStatuses[].containerID.
const containerIDPrefix = "containerd://"

// conditionsOwned are the pod conditions Compute sets; the others in
// pod.Status (set by the scheduler, a controller, a readiness gate owner)
// are kept as they are.
var conditionsOwned = []v1.PodConditionType{
	v1.PodReadyToStartContainers,
	v1.PodInitialized,
	v1.PodReady,
	v1.ContainersReady,
	v1.PodScheduled,
	v1.PodResizePending,
	v1.PodResizeInProgress,
}

// Compute returns the status of pod as kubelet would report it, from
// the runtime's containers of the pod (rs: every attempt of every
// container, running or exited) and what the pod's worker knows beyond the
// runtime (in). It is a pure function of its arguments: now is only used as
// the lastTransitionTime of conditions that changed and as the startTime of
// a pod that has none.
//
// pod.Status is the last status known in the API (for a static pod, its
// mirror pod's status, or empty). Compute uses it as kubelet does:
// conditions keep their lastTransitionTime while their status is unchanged,
// startTime and qosClass never change once set, a terminal phase is never
// left, the pod's reason and message are kept while the phase is unchanged,
// conditions it does not own are kept, and a container the runtime no
// longer has keeps its terminated state.
//
// The result is normalised as the API stores it: container statuses in
// spec order, every time truncated to whole seconds, so that computing the
// status again from the same inputs gives an equal value (see Equal).
//
// Semantics, all mirroring kubelet 1.34 (pkg/kubelet/kubelet_pods.go
// generateAPIPodStatus, getPhase, convertToAPIContainerStatuses;
// pkg/kubelet/status):
//
//   - A rejected pod (in.Rejected) is Failed with in.RejectReason and the
//     message "Pod was rejected: " + in.RejectMessage; it has no container
//     statuses, no IPs and no condition of ours (kubelet's rejectPod).
//   - For each spec container the runtime container with the highest
//     Attempt is the current one (restartCount = its Attempt); the next
//     one, if exited, is lastState.terminated.
//   - A container that is waiting to be (re)started shows the worker's
//     reason from in.Waiting (CrashLoopBackOff, ErrImagePull, ...), the
//     exited attempt moving to lastState; without one it is
//     ContainerCreating, or PodInitializing in a pod with init containers
//     (kubelet's default waiting state). A container that will not be
//     restarted (restart policy, an init container that succeeded, a
//     terminating pod) stays terminated.
//   - App containers are ready when running and started when running,
//     unless their probes say otherwise (in.Probed: not started until the
//     startup probe succeeded, not ready until started and the readiness
//     probe succeeded); init containers are ready when they exited 0.
//     Exited containers carry their termination message (in.Messages).
//   - Ready is ContainersReady, and then False with ReadinessGatesNotReady
//     while the condition of a readiness gate is missing or not True.
//   - in.FailReason makes a running pod Failed with that reason and
//     in.FailMessage (activeDeadlineSeconds).
//   - in.Disruption adds the DisruptionTarget condition (True,
//     TerminationByKubelet) with that message (node shutdown).
//   - While in.Terminating, once nothing runs any more the pod is
//     terminal: Succeeded if every app container exited 0, Failed
//     otherwise; containers that never reported an end are terminated with
//     ContainerStatusUnknown and exit code 137. Static pods (config source
//     "file") keep the restart-policy phase there, as in kubelet
//     (kubernetes#116484).
//   - Sidecars (init containers with restartPolicy Always) are reported as
//     kubelet does: started and ready like app containers (their probes
//     count), restarted whatever the restart policy; they count for
//     Initialized once started and for ContainersReady and Ready; the
//     phase ignores the ones that exited (kubelet's getPhase).
func Compute(pod *v1.Pod, rs pleg.PodStatus, in Input, now time.Time) v1.PodStatus {
	old := &pod.Status
	var s v1.PodStatus
	// As kubelet 1.34 with PodObservedGenerationTracking (beta, on): the
	// generation of the spec this status is about.
	s.ObservedGeneration = pod.Generation
	s.QOSClass = old.QOSClass
	if s.QOSClass == "" {
		s.QOSClass = kubetypes.PodQOSClass(pod)
	}
	s.StartTime = startTime(old, in, now)
	// Conditions that are not ours are kept, first and in their order.
	for _, c := range old.Conditions {
		if !slices.Contains(conditionsOwned, c.Type) {
			s.Conditions = append(s.Conditions, *c.DeepCopy())
		}
	}

	if in.Rejected {
		s.Phase = v1.PodFailed
		s.Reason = in.RejectReason
		s.Message = in.RejectMessage
		if !strings.HasPrefix(s.Message, rejectedMessagePrefix) {
			s.Message = rejectedMessagePrefix + s.Message
		}
		return s
	}

	s.HostIP = in.HostIP
	if in.HostIP != "" {
		s.HostIPs = []v1.HostIP{{IP: in.HostIP}}
	}
	s.PodIP, s.PodIPs = "", nil
	for i, ip := range in.PodIPs {
		if i == 0 {
			s.PodIP = ip
		}
		s.PodIPs = append(s.PodIPs, v1.PodIP{IP: ip})
	}

	byName := runtimeContainersByName(rs.Containers)
	b := statusBuilder{pod: pod, in: in, byName: byName}
	s.InitContainerStatuses = b.containerStatuses(pod.Spec.InitContainers, old.InitContainerStatuses, true, false)
	initDone := allInitContainersSucceeded(pod.Spec.InitContainers, s.InitContainerStatuses)
	s.ContainerStatuses = b.containerStatuses(pod.Spec.Containers, old.ContainerStatuses, false, initDone)
	s.EphemeralContainerStatuses = b.ephemeralStatuses(pod, old.EphemeralContainerStatuses)

	podIsTerminal := in.Terminating && !anyRunning(rs.Containers)
	if podIsTerminal {
		markUnfinishedTerminated(pod, &s)
	}
	s.Phase = podPhase(pod, s.InitContainerStatuses, s.ContainerStatuses, podIsTerminal && !kubetypes.IsStaticPod(pod), regularStarted(pod, byName))
	if podIsTerminal && !kubetypes.IsStaticPod(pod) && !PodIsTerminal(s) {
		// kubelet's TerminatePod: a pod whose containers all stopped
		// is terminal, whatever its containers say.
		s.Phase = v1.PodFailed
	}
	// A terminal phase is never left (kubelet refuses the transition).
	if PodIsTerminal(*old) {
		s.Phase = old.Phase
	}
	if s.Phase == old.Phase {
		s.Reason, s.Message = old.Reason, old.Message
	}
	// As kubelet's mergePodStatus, the failure the agent decided (deadline,
	// eviction, node shutdown) becomes the phase only once no container
	// runs: a terminal pod never has running containers.
	if in.FailReason != "" && !PodIsTerminal(*old) && !anyRunning(rs.Containers) {
		s.Phase, s.Reason, s.Message = v1.PodFailed, in.FailReason, in.FailMessage
	}

	s.Conditions = append(s.Conditions, ownConditions(pod, &s, in)...)
	s.Conditions = withDisruption(s.Conditions, old.Conditions, in.Disruption, now)
	n := len(s.Conditions)
	for _, c := range in.ResizeConditions {
		if !PodIsTerminal(s) {
			s.Conditions = append(s.Conditions, *c.DeepCopy())
		}
	}
	for i := range s.Conditions[:n] {
		c := &s.Conditions[i]
		if c.Type == v1.DisruptionTarget && in.Disruption != "" {
			c.ObservedGeneration = pod.Generation
		}
		if !slices.Contains(conditionsOwned, c.Type) {
			continue
		}
		c.ObservedGeneration = pod.Generation
		c.LastTransitionTime = apiTime(now)
		if oc := findCondition(old.Conditions, c.Type); oc != nil && oc.Status == c.Status {
			c.LastTransitionTime = apiTime(oc.LastTransitionTime.Time)
		}
	}
	return s
}

// PodIsTerminal reports whether st is a terminal phase (Succeeded or
// Failed): the pod's containers will not run again.
func PodIsTerminal(st v1.PodStatus) bool {
	return st.Phase == v1.PodSucceeded || st.Phase == v1.PodFailed
}

// Equal reports whether a and b are the same status for the API, so
// that no patch is needed to turn one into the other. Times are compared
// at the API's precision (whole seconds), conditions by type and container
// statuses by name whatever their order, and nil and empty lists are
// equal.
func Equal(a, b v1.PodStatus) bool {
	return equality.Semantic.DeepEqual(normalizeStatus(a), normalizeStatus(b))
}

// statusBuilder converts the runtime's containers of one pod into API
// container statuses.
type statusBuilder struct {
	pod    *v1.Pod
	in     Input
	byName map[string][]runtime.Container // newest attempt first
}

// containerStatuses returns the statuses of specs, in spec order. old are
// the statuses in the API; initDone says whether the init containers have
// all succeeded (it only matters for app containers).
func (b statusBuilder) containerStatuses(specs []v1.Container, old []v1.ContainerStatus, isInit, initDone bool) []v1.ContainerStatus {
	if len(specs) == 0 {
		return nil
	}
	out := make([]v1.ContainerStatus, 0, len(specs))
	for i := range specs {
		out = append(out, b.containerStatus(&specs[i], findContainerStatus(old, specs[i].Name), isInit, initDone))
	}
	return out
}

func (b statusBuilder) containerStatus(spec *v1.Container, old *v1.ContainerStatus, isInit, initDone bool) v1.ContainerStatus {
	attempts := b.byName[spec.Name]
	var st v1.ContainerStatus
	if len(attempts) == 0 {
		st = b.absentStatus(spec, old, isInit, initDone)
	} else {
		cur := attempts[0]
		st = v1.ContainerStatus{
			Name:         spec.Name,
			Image:        spec.Image,
			ImageID:      b.in.ImageIDs[cur.Image],
			ContainerID:  containerIDPrefix + cur.ID,
			RestartCount: int32(cur.Attempt),
			State:        runtimeState(cur, old),
			User:         containerUser(cur),
		}
		if len(attempts) > 1 && attempts[1].State == runtime.StateExited {
			st.LastTerminationState = runtimeState(attempts[1], nil)
			b.withMessage(st.LastTerminationState.Terminated, attempts[1].ID)
		}
		b.withMessage(st.State.Terminated, cur.ID)
		if w, ok := b.in.Waiting[spec.Name]; ok && b.willRestart(cur, isInit, kubetypes.IsSidecar(spec)) {
			if st.State.Terminated != nil {
				st.LastTerminationState = st.State
			}
			st.State = v1.ContainerState{Waiting: &v1.ContainerStateWaiting{Reason: w.Reason, Message: w.Message}}
		} else if st.State.Waiting != nil && st.State.Waiting.Reason == "" && cur.State == runtime.StateCreated {
			st.State.Waiting.Reason = ReasonContainerCreating
		}
	}
	st.VolumeMounts = volumeMountStatuses(spec)
	if len(attempts) > 0 {
		withResources(&st, spec, b.in.Resources[attempts[0].ID])
	}
	running := st.State.Running != nil
	st.Started = &running
	if isInit && !kubetypes.IsSidecar(spec) {
		st.Ready = st.State.Terminated != nil && st.State.Terminated.ExitCode == 0
	} else {
		st.Ready = running
	}
	if p, ok := b.in.Probed[strings.TrimPrefix(st.ContainerID, containerIDPrefix)]; ok && running {
		started := p.Started
		st.Started = &started
		st.Ready = p.Ready
	}
	return st
}

// withMessage sets the termination message of the runtime container id.
func (b statusBuilder) withMessage(t *v1.ContainerStateTerminated, id string) {
	if t != nil && t.Message == "" {
		t.Message = b.in.Messages[id]
	}
}

// absentStatus is the status of a container the runtime has no container
// for: never created yet, or removed.
func (b statusBuilder) absentStatus(spec *v1.Container, old *v1.ContainerStatus, isInit, initDone bool) v1.ContainerStatus {
	// Kubelet's default waiting state: PodInitializing in a pod with
	// init containers (for its init containers too: the second one waits
	// with it while the first runs or fails), else ContainerCreating.
	reason := ReasonContainerCreating
	if len(b.pod.Spec.InitContainers) > 0 {
		reason = ReasonPodInitializing
	}
	st := v1.ContainerStatus{
		Name:  spec.Name,
		Image: spec.Image,
		State: v1.ContainerState{Waiting: &v1.ContainerStateWaiting{Reason: reason}},
	}
	switch {
	case old == nil:
	case old.State.Terminated != nil:
		// Removed after it ended (garbage collection): it stays as it
		// was last reported.
		st = *normalizeContainerStatus(*old)
	case old.State.Running != nil:
		// It ran and is gone without an end state.
		st.RestartCount = old.RestartCount
		st.LastTerminationState = v1.ContainerState{Terminated: &v1.ContainerStateTerminated{
			ExitCode: exitCodeUnknown,
			Reason:   ReasonContainerStatusUnknown,
			Message:  "The container could not be located when the pod was deleted.  The container used to be Running",
		}}
		if !b.in.Terminating {
			st.RestartCount++
		}
	default:
		st.RestartCount = old.RestartCount
		st.LastTerminationState = *normalizeContainerState(*old.LastTerminationState.DeepCopy())
	}
	if w, ok := b.in.Waiting[spec.Name]; ok && !b.in.Terminating {
		if st.State.Terminated != nil {
			st.LastTerminationState = st.State
		}
		st.State = v1.ContainerState{Waiting: &v1.ContainerStateWaiting{Reason: w.Reason, Message: w.Message}}
	}
	return st
}

// willRestart reports whether the worker will start another attempt of a
// container whose current attempt is cur, so that a waiting reason of the
// worker applies to it (kubelet's ShouldContainerBeRestarted).
func (b statusBuilder) willRestart(cur runtime.Container, isInit, sidecar bool) bool {
	if b.in.Terminating {
		return false
	}
	switch cur.State {
	case runtime.StateRunning:
		return false
	case runtime.StateExited:
		if sidecar {
			return true
		}
		if isInit && cur.ExitCode == 0 {
			return false
		}
		switch b.pod.Spec.RestartPolicy {
		case v1.RestartPolicyNever:
			return false
		case v1.RestartPolicyOnFailure:
			return cur.ExitCode != 0
		}
	}
	return true
}

// runtimeState is the API state of one runtime container. A container in
// an unknown state that was last reported running is reported terminated
// with an unknown end, as kubelet does, so that it does not look like it
// never ran.
func runtimeState(c runtime.Container, old *v1.ContainerStatus) v1.ContainerState {
	switch c.State {
	case runtime.StateRunning:
		return v1.ContainerState{Running: &v1.ContainerStateRunning{StartedAt: apiTime(c.StartedAt)}}
	case runtime.StateExited:
		reason := c.Reason
		if reason == "" {
			reason = runtime.ReasonCompleted
			if c.ExitCode != 0 {
				reason = runtime.ReasonError
			}
		}
		return v1.ContainerState{Terminated: &v1.ContainerStateTerminated{
			ExitCode:    c.ExitCode,
			Reason:      reason,
			StartedAt:   apiTime(c.StartedAt),
			FinishedAt:  apiTime(c.FinishedAt),
			ContainerID: containerIDPrefix + c.ID,
		}}
	case runtime.StateUnknown:
		if old != nil && old.State.Running != nil && old.ContainerID == containerIDPrefix+c.ID {
			return v1.ContainerState{Terminated: &v1.ContainerStateTerminated{
				ExitCode: exitCodeUnknown,
				Reason:   ReasonContainerStatusUnknown,
				Message:  "The container could not be located when the pod was terminated",
			}}
		}
	}
	return v1.ContainerState{Waiting: &v1.ContainerStateWaiting{}}
}

// markUnfinishedTerminated reports the containers of a terminated pod that
// have no end state as terminated with an unknown end (kubelet's
// TerminatePod): app containers once the pod has initialized, and init
// containers up to the last one that showed any sign of a start.
func markUnfinishedTerminated(pod *v1.Pod, s *v1.PodStatus) {
	unknown := v1.ContainerState{Terminated: &v1.ContainerStateTerminated{
		ExitCode: exitCodeUnknown,
		Reason:   ReasonContainerStatusUnknown,
		Message:  "The container could not be located when the pod was terminated",
	}}
	initialized := len(pod.Spec.InitContainers) == 0
	for _, cs := range s.ContainerStatuses {
		if cs.LastTerminationState.Terminated != nil || cs.State.Waiting == nil {
			initialized = true
		}
	}
	if initialized {
		for i := range s.ContainerStatuses {
			if s.ContainerStatuses[i].State.Terminated == nil {
				s.ContainerStatuses[i].State = *unknown.DeepCopy()
			}
		}
	}
	last := 0 // always at least the first init container
	for i, cs := range s.InitContainerStatuses {
		if cs.State.Waiting == nil || cs.LastTerminationState.Terminated != nil {
			last = i
		}
	}
	for i := range s.InitContainerStatuses {
		if i <= last && s.InitContainerStatuses[i].State.Terminated == nil {
			s.InitContainerStatuses[i].State = *unknown.DeepCopy()
		}
	}
}

// podPhase is kubelet's getPhase. terminal: the pod's containers will not
// be restarted whatever the restart policy (the pod is being stopped and
// nothing runs). initialized: a regular container exists in the runtime
// (sidecars that restart then do not make the pod Pending again).
func podPhase(pod *v1.Pod, initStatuses, statuses []v1.ContainerStatus, terminal, initialized bool) v1.PodPhase {
	pendingInit, failedInit := 0, 0
	for _, spec := range pod.Spec.InitContainers {
		if kubetypes.IsSidecar(&spec) {
			continue
		}
		cs := findContainerStatus(initStatuses, spec.Name)
		switch {
		case cs == nil, cs.State.Running != nil:
			pendingInit++
		case cs.State.Terminated != nil:
			if cs.State.Terminated.ExitCode != 0 {
				failedInit++
			}
		case cs.LastTerminationState.Terminated != nil:
			if cs.LastTerminationState.Terminated.ExitCode != 0 {
				failedInit++
			}
		default:
			pendingInit++
		}
	}
	unknown, running, waiting, stopped, succeeded := 0, 0, 0, 0, 0
	// Sidecars: running ones count as running (pending until started),
	// exited ones not at all.
	pendingSidecars := 0
	for _, spec := range pod.Spec.InitContainers {
		if !kubetypes.IsSidecar(&spec) {
			continue
		}
		cs := findContainerStatus(initStatuses, spec.Name)
		switch {
		case cs == nil:
			unknown++
		case cs.State.Running != nil:
			if cs.Started == nil || !*cs.Started {
				pendingSidecars++
			}
			running++
		case cs.State.Terminated != nil:
		case cs.State.Waiting != nil && cs.LastTerminationState.Terminated != nil:
		case cs.State.Waiting != nil:
			pendingSidecars++
			waiting++
		default:
			pendingSidecars++
			unknown++
		}
	}
	for _, spec := range pod.Spec.Containers {
		cs := findContainerStatus(statuses, spec.Name)
		switch {
		case cs == nil:
			unknown++
		case cs.State.Running != nil:
			running++
		case cs.State.Terminated != nil:
			stopped++
			if cs.State.Terminated.ExitCode == 0 {
				succeeded++
			}
		case cs.State.Waiting != nil && cs.LastTerminationState.Terminated != nil:
			stopped++
		case cs.State.Waiting != nil:
			waiting++
		default:
			unknown++
		}
	}

	if failedInit > 0 && pod.Spec.RestartPolicy == v1.RestartPolicyNever {
		return v1.PodFailed
	}
	switch {
	case pendingInit > 0, pendingSidecars > 0 && !initialized, waiting > 0:
		return v1.PodPending
	case running > 0 && unknown == 0:
		return v1.PodRunning
	case running == 0 && stopped > 0 && unknown == 0:
		if terminal {
			if stopped == succeeded {
				return v1.PodSucceeded
			}
			return v1.PodFailed
		}
		switch {
		case pod.Spec.RestartPolicy == v1.RestartPolicyAlways:
			return v1.PodRunning // restarting
		case stopped == succeeded:
			return v1.PodSucceeded
		case pod.Spec.RestartPolicy == v1.RestartPolicyNever:
			return v1.PodFailed
		default:
			return v1.PodRunning // OnFailure, restarting the failed ones
		}
	default:
		return v1.PodPending
	}
}

// ownConditions are the conditions Compute owns, without
// lastTransitionTime, for a pod whose phase and container statuses are in s.
func ownConditions(pod *v1.Pod, s *v1.PodStatus, in Input) []v1.PodCondition {
	sandbox := v1.PodCondition{Type: v1.PodReadyToStartContainers, Status: v1.ConditionFalse}
	if in.SandboxReady {
		sandbox.Status = v1.ConditionTrue
	}

	initialized := v1.PodCondition{Type: v1.PodInitialized, Status: v1.ConditionTrue}
	var incomplete []string
	for i, cs := range s.InitContainerStatuses {
		// A sidecar has done its part once started.
		sidecar := i < len(pod.Spec.InitContainers) && kubetypes.IsSidecar(&pod.Spec.InitContainers[i])
		if (sidecar && (cs.Started == nil || !*cs.Started)) || (!sidecar && !cs.Ready) {
			incomplete = append(incomplete, cs.Name)
		}
	}
	switch {
	case s.Phase == v1.PodSucceeded:
		initialized.Reason = ReasonPodCompleted
	case anyStarted(s.ContainerStatuses):
		// An app container ran, so the pod initialized once, even if
		// its init containers' statuses are gone.
	case len(incomplete) > 0:
		initialized.Status = v1.ConditionFalse
		initialized.Reason = ReasonContainersNotInitialized
		initialized.Message = fmt.Sprintf("containers with incomplete status: %s", incomplete)
	}

	ready := v1.PodCondition{Type: v1.ContainersReady, Status: v1.ConditionTrue}
	var unready []string
	for i, cs := range s.InitContainerStatuses {
		// Sidecars count, first.
		if i < len(pod.Spec.InitContainers) && kubetypes.IsSidecar(&pod.Spec.InitContainers[i]) && !cs.Ready {
			unready = append(unready, cs.Name)
		}
	}
	for _, cs := range s.ContainerStatuses {
		if !cs.Ready {
			unready = append(unready, cs.Name)
		}
	}
	switch {
	case s.Phase == v1.PodSucceeded:
		ready.Status, ready.Reason = v1.ConditionFalse, ReasonPodCompleted
	case s.Phase == v1.PodFailed:
		ready.Status, ready.Reason = v1.ConditionFalse, ReasonPodFailed
	case len(unready) > 0:
		ready.Status = v1.ConditionFalse
		ready.Reason = ReasonContainersNotReady
		ready.Message = fmt.Sprintf("containers with unready status: %s", unready)
	}
	podReady := ready
	podReady.Type = v1.PodReady
	if podReady.Status == v1.ConditionTrue {
		podReady = readinessGates(pod, s.Conditions, podReady)
	}

	scheduled := v1.PodCondition{Type: v1.PodScheduled, Status: v1.ConditionTrue}
	return []v1.PodCondition{sandbox, initialized, podReady, ready, scheduled}
}

// readinessGates is kubelet's Ready condition for a pod whose containers
// are ready: True only if the condition of every readiness gate is True
// in the status (conditions the agent does not own are kept in it).
func readinessGates(pod *v1.Pod, conds []v1.PodCondition, ready v1.PodCondition) v1.PodCondition {
	var msgs []string
	for _, g := range pod.Spec.ReadinessGates {
		c := findCondition(conds, g.ConditionType)
		switch {
		case c == nil:
			msgs = append(msgs, fmt.Sprintf("corresponding condition of pod readiness gate %q does not exist.", string(g.ConditionType)))
		case c.Status != v1.ConditionTrue:
			msgs = append(msgs, fmt.Sprintf("the status of pod readiness gate %q is not \"True\", but %v", string(g.ConditionType), c.Status))
		}
	}
	if len(msgs) == 0 {
		return ready
	}
	ready.Status = v1.ConditionFalse
	ready.Reason = ReasonReadinessGatesNotReady
	ready.Message = strings.Join(msgs, ", ")
	return ready
}

// runtimeContainersByName groups containers by name, newest attempt first
// (the highest Attempt; the latest created among equal attempts).
func runtimeContainersByName(cs []runtime.Container) map[string][]runtime.Container {
	m := make(map[string][]runtime.Container, len(cs))
	for _, c := range cs {
		m[c.Name] = append(m[c.Name], c)
	}
	for _, list := range m {
		slices.SortStableFunc(list, func(a, b runtime.Container) int {
			if c := cmp.Compare(b.Attempt, a.Attempt); c != 0 {
				return c
			}
			return b.CreatedAt.Compare(a.CreatedAt)
		})
	}
	return m
}

// regularStarted reports whether a regular container of the pod exists in
// the runtime (kubelet's HasAnyActiveRegularContainerStarted).
func regularStarted(pod *v1.Pod, byName map[string][]runtime.Container) bool {
	for _, c := range pod.Spec.Containers {
		if len(byName[c.Name]) > 0 {
			return true
		}
	}
	return false
}

func anyRunning(cs []runtime.Container) bool {
	return slices.ContainsFunc(cs, func(c runtime.Container) bool {
		return c.State == runtime.StateRunning || c.State == runtime.StateUnknown
	})
}

func anyStarted(statuses []v1.ContainerStatus) bool {
	return slices.ContainsFunc(statuses, func(cs v1.ContainerStatus) bool {
		return cs.State.Running != nil || cs.State.Terminated != nil
	})
}

func allInitContainersSucceeded(specs []v1.Container, statuses []v1.ContainerStatus) bool {
	for _, spec := range specs {
		cs := findContainerStatus(statuses, spec.Name)
		if cs == nil || cs.State.Terminated == nil || cs.State.Terminated.ExitCode != 0 {
			return false
		}
	}
	return true
}

// startTime never changes once in the API; before, it is when the worker
// admitted the pod, or now if the worker did not say.
func startTime(old *v1.PodStatus, in Input, now time.Time) *metav1.Time {
	t := now
	switch {
	case old.StartTime != nil && !old.StartTime.IsZero():
		t = old.StartTime.Time
	case !in.StartTime.IsZero():
		t = in.StartTime
	}
	at := apiTime(t)
	return &at
}

func findContainerStatus(list []v1.ContainerStatus, name string) *v1.ContainerStatus {
	for i := range list {
		if list[i].Name == name {
			return &list[i]
		}
	}
	return nil
}

func findCondition(list []v1.PodCondition, t v1.PodConditionType) *v1.PodCondition {
	for i := range list {
		if list[i].Type == t {
			return &list[i]
		}
	}
	return nil
}

// apiTime is t at the API's precision (whole seconds); the zero time stays
// zero.
func apiTime(t time.Time) metav1.Time {
	if t.IsZero() {
		return metav1.Time{}
	}
	return metav1.NewTime(time.Unix(t.Unix(), 0))
}

// normalizeStatus returns a copy of s with times at the API's precision and
// conditions and container statuses sorted by type and name.
func normalizeStatus(s v1.PodStatus) v1.PodStatus {
	s = *s.DeepCopy()
	if s.StartTime != nil {
		t := apiTime(s.StartTime.Time)
		s.StartTime = &t
	}
	for i := range s.Conditions {
		c := &s.Conditions[i]
		c.LastProbeTime = apiTime(c.LastProbeTime.Time)
		c.LastTransitionTime = apiTime(c.LastTransitionTime.Time)
	}
	slices.SortStableFunc(s.Conditions, func(a, b v1.PodCondition) int { return cmp.Compare(a.Type, b.Type) })
	for _, list := range [][]v1.ContainerStatus{s.InitContainerStatuses, s.ContainerStatuses, s.EphemeralContainerStatuses} {
		for i := range list {
			list[i] = *normalizeContainerStatus(list[i])
		}
		slices.SortStableFunc(list, func(a, b v1.ContainerStatus) int { return cmp.Compare(a.Name, b.Name) })
	}
	return s
}

// normalizeContainerStatus returns a copy of cs with times at the API's
// precision.
func normalizeContainerStatus(cs v1.ContainerStatus) *v1.ContainerStatus {
	out := cs.DeepCopy()
	out.State = *normalizeContainerState(out.State)
	out.LastTerminationState = *normalizeContainerState(out.LastTerminationState)
	return out
}

// normalizeContainerState sets the times of st to the API's precision and
// returns it. st's pointers are the caller's: pass a copy.
func normalizeContainerState(st v1.ContainerState) *v1.ContainerState {
	if st.Running != nil {
		st.Running.StartedAt = apiTime(st.Running.StartedAt.Time)
	}
	if st.Terminated != nil {
		st.Terminated.StartedAt = apiTime(st.Terminated.StartedAt.Time)
		st.Terminated.FinishedAt = apiTime(st.Terminated.FinishedAt.Time)
	}
	return &st
}
