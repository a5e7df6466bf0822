package pods

import (
	"time"

	"github.com/nodeagent/nodeagent/pleg"
	"github.com/nodeagent/nodeagent/runtime"
)

// A start cut off by containerd's death is not a restart. When containerd
// is SIGKILLed while StartContainer is creating or starting the task, the
// call fails with "unavailable", and after containerd's restart the half
// made task may be reported stopped (the shim ended what it was doing when
// its caller went away) although the container's process never ran.
// Planned as an exit, that counted a restart (attempt 1, restartCount 1),
// and an init container of a restartPolicy: Never pod would have failed the
// pod. The soak saw it twice in 37 minutes. Such a container is planned as
// one created but never started (plan.go): removed and created again under
// the same attempt, as after an agent SIGKILL between create and start.
//
// Only unavailability counts: a start that containerd refused or failed
// (a missing executable, a bad mount) is a failed start that kubelet
// counts as a restart (reason StartError), and so does nodeagent. A
// container seen running once is forgotten: it ran, and its exit is real.
// The risk left: a process that did start before containerd died, and
// exited before the agent saw it running, is restarted without a count.

// noteInterruptedStart records that the start of container id failed
// because containerd went away.
func (s *startTracker) noteInterruptedStart(id string, err error) {
	if !runtime.IsUnavailable(err) {
		return
	}
	if s.interrupted == nil {
		s.interrupted = map[string]bool{}
	}
	s.interrupted[id] = true
	s.log.Info("starting a container was cut off by containerd becoming unavailable; it never ran and will be replaced under the same attempt", "containerID", id)
}

// unstarted returns rs with the containers whose start was interrupted, and
// that did not run since, shown as created (never started); it forgets the
// ones that are gone or were seen running.
func (s *startTracker) unstarted(rs pleg.PodStatus) pleg.PodStatus {
	if len(s.interrupted) == 0 {
		return rs
	}
	out, keep := asUnstarted(rs, s.interrupted)
	s.interrupted = keep
	return out
}

// asUnstarted is unstarted's decision: rs with the exited containers of
// interrupted shown as created (a copy; rs is the PLEG's), and the IDs
// still worth remembering (those present and not running).
func asUnstarted(rs pleg.PodStatus, interrupted map[string]bool) (pleg.PodStatus, map[string]bool) {
	keep := map[string]bool{}
	out := rs
	out.Containers = make([]runtime.Container, len(rs.Containers))
	for i, c := range rs.Containers {
		if interrupted[c.ID] {
			switch c.State {
			case runtime.StateExited:
				c.State, c.ExitCode, c.Reason, c.Pid = runtime.StateCreated, 0, "", 0
				c.StartedAt, c.FinishedAt = time.Time{}, time.Time{}
				keep[c.ID] = true
			case runtime.StateCreated, runtime.StateUnknown:
				keep[c.ID] = true
			}
		}
		out.Containers[i] = c
	}
	return out, keep
}
