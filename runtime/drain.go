package runtime

import (
	"context"
	"errors"
	"fmt"

	"github.com/nodeagent/nodeagent/crilog"
)

// ErrCannotDrain: DrainOutput cannot tell when the container's output is in
// its log. Release the task instead (StopContainer): containerd's shim then
// closes the container's output and waits for the log writer to exit.
var ErrCannotDrain = errors.New("the container's output cannot be drained")

// DrainOutput returns once everything an exited container wrote to stdout
// and stderr is in its log file (LogPath), without releasing its task.
//
// The shim keeps its ends of the container's output pipes until the task
// is deleted, so the log writer (crilog) sees no EOF before that; instead
// it answers a drain request (crilog.Drain) once it has written what the
// pipes held, which, the container's processes being gone, is all its
// output. That holds where the container's processes write straight into
// the writer's pipes: not with stdin or a terminal (the shim copies the
// output on its own), nor without a log writer (the shim writes the file):
// those are ErrCannotDrain. A writer that does not answer (one from before
// the drain protocol, still running after an upgrade) is
// crilog.ErrNoLogger. A container without a log path has nothing to wait
// for. ctx bounds the wait.
func (r *Runtime) DrainOutput(ctx context.Context, c Container) error {
	l := c.Labels
	switch {
	case c.LogPath == "":
		return nil
	case r.opts.ContainerLogger == "":
		return fmt.Errorf("runtime: drain %s: %w: the shim writes its log", c.ID, ErrCannotDrain)
	case l[labelStdin] == "true" || l[labelTTY] == "true":
		return fmt.Errorf("runtime: drain %s: %w: the shim copies the output of a container with stdin or a terminal", c.ID, ErrCannotDrain)
	}
	if err := crilog.Drain(ctx, c.ID); err != nil {
		return fmt.Errorf("runtime: %w", err)
	}
	return nil
}
