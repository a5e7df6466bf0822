package pods

import (
	"context"
	"errors"
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/nodeagent/nodeagent/pleg"
	"github.com/nodeagent/nodeagent/pods/status"
)

// finished reports whether the pod is terminal (Succeeded or Failed): as
// last computed, or as the API has it (an agent restarted after the pod
// ended). Nothing of a finished pod starts again (plan.go).
func (w *worker) finished(pod *v1.Pod) bool {
	return w.terminal.Load() || status.PodIsTerminal(pod.Status)
}

// releaseFinished releases what the containers of a finished pod shared,
// as kubelet stops a finished pod's sandbox (StopPodSandbox: the pause
// process, the network torn down, the network namespace removed) and then
// (SyncTerminatedPod) unmounts its volumes and removes its pod cgroup. The
// pod's containers, directory and logs stay for its status and logs until
// the pod is deleted (cleanup). Without this, a pod that completed, was
// evicted, passed its deadline or was stopped for a node shutdown kept its
// pod IP reserved, its veth, its network namespace and /dev/shm mounts and
// its memory-backed volumes for as long as its API object lived (evicted
// pods may stay for days). It is idempotent; a worker releases once.
func (w *worker) releaseFinished(ctx context.Context, pod *v1.Pod) error {
	if w.ended.released {
		return nil
	}
	if err := w.releaseSandbox(ctx, pod); err != nil {
		return fmt.Errorf("releasing a finished pod: %w", err)
	}
	w.ended.released = true
	w.ns.pausePID = 0
	w.log.Info("released the sandbox of a finished pod")
	return nil
}

// releaseSandbox releases what the pod's containers shared: its pause
// containers and IPC/UTS/PID namespaces, its volumes, its network (the
// plugins first: they find what they made through the pod's interface, and
// a namespace removed first leaks the bridge's rules), its network
// namespace and its pod cgroup. Both a finished pod (releaseFinished) and a
// removed one (cleanup) go through it.
func (w *worker) releaseSandbox(ctx context.Context, pod *v1.Pod) error {
	var errs []error
	if err := w.ns.teardown(ctx, pod); err != nil {
		errs = append(errs, err)
	}
	if err := w.unmountImageVolumes(ctx, pod); err != nil {
		errs = append(errs, err)
	}
	if err := w.teardownVolumes(); err != nil {
		errs = append(errs, err)
	}
	if !pod.Spec.HostNetwork {
		w.ns.attached = false
		if w.d.net != nil {
			if err := w.d.net.TearDown(ctx, netRef(pod), w.netnsPath()); err != nil {
				errs = append(errs, fmt.Errorf("pod network: %w", err))
			}
		}
		if len(errs) == 0 {
			if err := w.d.netns.Remove(w.netnsPath()); err != nil {
				errs = append(errs, err)
			}
		}
	}
	if len(errs) == 0 {
		if err := w.d.removePodCgroup(w.uid); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// teardownVolumes unmounts (unpublishes, unstages) the pod's volumes,
// once: a deleted pod's are torn down before its API delete, and its
// sandbox's release later does not repeat it.
func (w *worker) teardownVolumes() error {
	if w.ended.volumesDown {
		return nil
	}
	if err := w.d.volumes.Teardown(w.uid, w.podDir()); err != nil {
		return err
	}
	w.ended.volumesDown = true
	return nil
}

// syncFinished is a finished pod's sync: whatever still runs of it is
// stopped (nothing should), its exited containers' tasks are released,
// then its sandbox, and its status is kept current.
func (w *worker) syncFinished(ctx context.Context, pod *v1.Pod, rs pleg.PodStatus, now, retryAt time.Time) (bool, time.Time, error) {
	if running := w.toStop(rs); len(running) > 0 {
		w.log.Info("stopping the containers of a finished pod", "containers", len(running))
		return true, time.Time{}, w.stopRunning(ctx, pod, running, gracePeriod(pod))
	}
	w.reap(ctx, rs)
	stepTraceFrom(ctx).step("reap")
	err := w.releaseFinished(ctx, pod)
	stepTraceFrom(ctx).step("releaseSandbox")
	w.setStatus(ctx, pod, rs, nil, !w.ended.released, now)
	return false, retryAt, err
}
