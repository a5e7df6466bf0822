package pods

import (
	"fmt"

	v1 "k8s.io/api/core/v1"

	"github.com/nodeagent/nodeagent/pods/status"
	"github.com/nodeagent/nodeagent/runtime"
)

// Ephemeral containers (`kubectl debug`): the API server adds them to a
// running pod's spec through the pods/ephemeralcontainers subresource; the
// worker starts each once, as soon as it appears (init containers need
// not have finished), and never restarts it, whatever its exit and the
// pod's restartPolicy. With targetContainerName it joins that container's
// PID namespace (of its running attempt when it starts, as containerd's
// CRI does). It has no probes, ports or lifecycle (the API server refuses
// them) and does not count for the pod's phase or readiness.

// ephemeralContainer is an ephemeral container as a v1.Container (the
// same fields, by the API's construction).
func ephemeralContainer(ec *v1.EphemeralContainer) *v1.Container {
	c := v1.Container(ec.EphemeralContainerCommon)
	return &c
}

// startEphemeral starts the ephemeral containers that have not run yet.
func (p *plan) startEphemeral(pod *v1.Pod, named map[string]*attempts) {
	for i := range pod.Spec.EphemeralContainers {
		ec := &pod.Spec.EphemeralContainers[i]
		if named[ec.Name] != nil {
			continue // started once: never again
		}
		s := startAction{container: ephemeralContainer(ec), ephemeral: true}
		if t := ec.TargetContainerName; t != "" && !pod.Spec.HostPID {
			a := named[t]
			if a == nil || a.cur.State != runtime.StateRunning || a.cur.Pid == 0 {
				// Its start wakes the worker (a PLEG event).
				if p.waiting == nil {
					p.waiting = map[string]status.Waiting{}
				}
				p.waiting[ec.Name] = status.Waiting{Reason: status.ReasonContainerCreating,
					Message: fmt.Sprintf("waiting for target container %q to run", t)}
				continue
			}
			s.pidNSOf = a.cur.Pid
		}
		p.start = append(p.start, s)
	}
}
