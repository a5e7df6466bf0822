package pods

import (
	"fmt"

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

// startTracker is what a worker remembers of the starts it made.
type startTracker struct {
	started     map[string]bool // containers this worker started
	interrupted map[string]bool // starts cut off by containerd's death (interruptedstart.go)
}

// noteStarted records that the worker started container id.
func (w *worker) noteStarted(id string) {
	if w.starts.started == nil {
		w.starts.started = map[string]bool{}
	}
	w.starts.started[id] = true
}

// staleStarts returns the containers rs shows as created although the
// worker started them.
func (w *worker) staleStarts(rs pleg.PodStatus) []string {
	var out []string
	for _, c := range rs.Containers {
		if c.State == runtime.StateCreated && w.starts.started[c.ID] {
			out = append(out, c.ID)
		}
	}
	return out
}

// waitForStarts makes the next sync wait until the PLEG saw the starts
// of ids (or inspected them once the expectation expired). It reports
// whether there was anything to wait for.
func (w *worker) waitForStarts(rs pleg.PodStatus) bool {
	ids := w.staleStarts(rs)
	for _, id := range ids {
		w.d.pleg.ExpectWithin(w.uid, id, pleg.ContainerStarted, expectTTL)
	}
	if len(ids) > 0 {
		w.log.Info("the pod status does not show containers this worker started as started yet; waiting for the PLEG", "containerIDs", ids)
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
