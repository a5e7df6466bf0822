package runtime

import (
	"context"
	"errors"
	"os"
	"path/filepath"

	"github.com/nodeagent/nodeagent/crilog"
)

// Container log symlinks (Options.ContainerLogsDir), as kubelet's
// kuberuntime keeps /var/log/containers: a link named
// <pod>_<namespace>_<container>-<id>.log to the container's log file is
// made once the container has started and removed before the container
// is, whoever removes it (the pod's worker, dead-container reclaim, the
// clean-up of an orphan).

// logSymlink is the container's symlink, or "" when there is none to keep
// (no symlink directory, or a container without a log file or pod).
func (r *Runtime) logSymlink(id string, labels map[string]string) string {
	if r.opts.ContainerLogsDir == "" || labels[labelLogPath] == "" || labels[LabelPodName] == "" {
		return ""
	}
	return crilog.SymlinkPath(r.opts.ContainerLogsDir, labels[LabelPodName], labels[LabelPodNamespace], labels[LabelContainerName], id)
}

// linkLog makes the container's symlink. As in kubelet a failure is
// logged, not returned: the container runs and its log is written.
func (r *Runtime) linkLog(id string, labels map[string]string) {
	link := r.logSymlink(id, labels)
	if link == "" {
		return
	}
	if err := crilog.LinkContainerLog(link, labels[labelLogPath]); err != nil {
		r.opts.Logger.Error("cannot create the container log symlink", "containerID", id, "path", link, "err", err)
	}
}

// unlinkLog removes the container's symlink.
func (r *Runtime) unlinkLog(id string, labels map[string]string) error {
	if link := r.logSymlink(id, labels); link != "" {
		return crilog.UnlinkContainerLog(link)
	}
	return nil
}

// SyncLogSymlinks converges Options.ContainerLogsDir with the containers
// once, as the agent starts: a started container without its symlink gets
// one (containers started by an agent that kept none, e.g. before an
// upgrade, or with another symlink directory), and a symlink whose target
// is gone is removed unless its container still runs (kubelet's container
// GC rule: a running container's live file briefly does not exist while
// it rotates).
func (r *Runtime) SyncLogSymlinks(ctx context.Context) error {
	if r.opts.ContainerLogsDir == "" {
		return nil
	}
	cs, err := r.ListContainers(ctx)
	if err != nil {
		return err
	}
	running := map[string]bool{}
	var errs []error
	for _, c := range cs {
		if c.State == StateRunning || c.State == StateUnknown {
			running[c.ID] = true
		}
		if c.StartedAt.IsZero() {
			continue // created, not started: linked when it starts
		}
		link := r.logSymlink(c.ID, c.Labels)
		if link == "" {
			continue
		}
		if _, err := os.Lstat(link); errors.Is(err, os.ErrNotExist) {
			if err := crilog.LinkContainerLog(link, c.LogPath); err != nil {
				errs = append(errs, err)
			}
		}
	}
	links, _ := filepath.Glob(filepath.Join(r.opts.ContainerLogsDir, "*.log"))
	for _, l := range links {
		if _, err := os.Stat(l); !errors.Is(err, os.ErrNotExist) {
			continue
		}
		if id := crilog.ContainerIDFromSymlink(l); id != "" && running[id] {
			continue
		}
		if err := crilog.UnlinkContainerLog(l); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
