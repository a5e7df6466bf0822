package pods

import (
	"fmt"
	"log/slog"

	"k8s.io/apimachinery/pkg/types"

	"github.com/nodeagent/nodeagent/pleg"
	"github.com/nodeagent/nodeagent/runtime"
)

// A container the worker started is never "created" again: once
// StartContainer returned, its task runs or has exited. A status that
// still shows it created is older than the start (the PLEG had not seen
// the start yet: its expectation expired while a slow start was still in
// progress, and an inspection made before the start returned is newer
// than the sync that began it). Planning with it would take the container
// for one the agent created but never started (plan.go: removed and
// started again as the next attempt): a running container killed and a
// restart counted, which the fault suite saw under load while the agent
// was being SIGKILLed. The worker waits for the PLEG to see the start
// instead.

// startTracker is what a worker remembers of the starts it made, so that
// neither a status older than a start (here) nor a start cut off by
// containerd's death (interruptedstart.go) is taken for a container's
// exit. It belongs to the pod's worker and is used from its goroutine.
type startTracker struct {
	uid  types.UID
	pleg PLEG // the expectations of the starts waited for
	log  *slog.Logger

	started     map[string]bool // containers this worker started
	interrupted map[string]bool // starts cut off by containerd's death (interruptedstart.go)
}

// noteStarted records that the worker started container id.
func (s *startTracker) noteStarted(id string) {
	if s.started == nil {
		s.started = map[string]bool{}
	}
	s.started[id] = true
}

// stale returns the containers rs shows as created although the worker
// started them.
func (s *startTracker) stale(rs pleg.PodStatus) []string {
	var out []string
	for _, c := range rs.Containers {
		if c.State == runtime.StateCreated && s.started[c.ID] {
			out = append(out, c.ID)
		}
	}
	return out
}

// waitForStarts makes the next sync wait until the PLEG saw the starts
// rs does not show yet (or inspected them once the expectation expired).
// It reports whether there was anything to wait for.
func (s *startTracker) waitForStarts(rs pleg.PodStatus) bool {
	ids := s.stale(rs)
	for _, id := range ids {
		s.pleg.ExpectWithin(s.uid, id, pleg.ContainerStarted, expectTTL)
	}
	if len(ids) > 0 {
		s.log.Info("the pod status does not show containers this worker started as started yet; waiting for the PLEG", "containerIDs", ids)
	}
	return len(ids) > 0
}

// pauseUnknown fails a sync while the state of one of the pod's pauses is
// unknown (containerd could not ask its shim in time): neither started
// again (a duplicate) nor removed (that kills the pod's PID namespace and
// every container in it), it is asked about again at the next sync. The
// fault suite saw a loaded host's slow shims make the agent remove one
// healthy pause after the other.
func pauseUnknown(ps []runtime.Pause) error {
	for _, p := range ps {
		if p.State == runtime.StateUnknown {
			return fmt.Errorf("pod PID namespace: the state of pause container %s is unknown; asking again", p.ID)
		}
	}
	return nil
}
