package pods

import (
	"context"
	"errors"
	"time"

	"github.com/nodeagent/nodeagent/crilog"
	"github.com/nodeagent/nodeagent/pleg"
	"github.com/nodeagent/nodeagent/runtime"
)

// drainTimeout bounds the wait for an exited container's log writer to
// write what the container left in its pipes (sub-millisecond when it
// answers; past this the task is released instead).
const drainTimeout = 2 * time.Second

// podTasks is what a worker did to its pod's containers' tasks.
type podTasks struct {
	// reaped: containers this worker stopped or released.
	reaped map[string]bool
	// drained: exited containers whose logs settleExits completed (or
	// found it could not), asked once each.
	drained map[string]bool
	// stopping: containers stopRunning is stopping now; their exit is the
	// stop's, whose release waits for the log writer (statuses written
	// meanwhile, whileStopping's, do not drain them).
	stopping map[string]bool
}

// settleExits makes the log of every container that exited since the last
// status complete before a status reports the exit, as kubelet's does:
// containerd's CRI plugin reports an exit only once the container's output
// is copied. The termination message read from the log
// (FallbackToLogsOnError) and a `kubectl logs` issued on seeing the pod
// Succeeded or Failed then see the container's last line.
//
// The status does not wait for the task's release (a containerd call that
// took 0.7–1.6 s on a loaded host; issue 32): it asks the log writer to
// drain the pipes (DrainOutput), and the task is released after the
// status is written (reap). Where that cannot be done (stdin or a
// terminal, a writer from before the drain protocol still running after an
// upgrade, one that does not answer within drainTimeout), the task is
// released first, as before: the release waits for the writer to reach EOF
// and exit.
func (w *worker) settleExits(ctx context.Context, rs pleg.PodStatus) {
	// setStatus is called after steps the trace names and after some it
	// does not (syncFinished's release): drain is this call alone.
	tr := stepTraceFrom(ctx)
	start := tr.now()
	seen := make(map[string]bool, len(rs.Containers))
	for _, c := range rs.Containers {
		seen[c.ID] = true
		if c.State != runtime.StateExited || w.tasks.reaped[c.ID] || w.tasks.drained[c.ID] || w.tasks.stopping[c.ID] {
			continue
		}
		w.tasks.drained[c.ID] = true // once, whatever the outcome
		dctx, cancel := context.WithTimeout(ctx, drainTimeout)
		err := w.d.rt.DrainOutput(dctx, c)
		cancel()
		if err == nil {
			continue
		}
		switch {
		case errors.Is(err, runtime.ErrCannotDrain), errors.Is(err, crilog.ErrNoLogger):
			w.log.Debug("releasing an exited container's task before its status", "containerID", c.ID, "why", err)
		default:
			w.log.Info("releasing an exited container's task before its status: its log writer did not drain", "containerID", c.ID, "err", err)
		}
		if err := w.d.rt.StopContainer(ctx, c.ID, 0); err != nil {
			w.log.Debug("could not release an exited container's task", "containerID", c.ID, "err", err)
			continue
		}
		w.tasks.reaped[c.ID] = true
	}
	for id := range w.tasks.drained {
		if !seen[id] {
			delete(w.tasks.drained, id)
		}
	}
	tr.stepSince("drain", start)
}
