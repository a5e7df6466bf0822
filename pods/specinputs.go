package pods

import (
	"context"

	v1 "k8s.io/api/core/v1"
	utilptr "k8s.io/utils/ptr"

	"github.com/nodeagent/nodeagent/pods/containerspec"
)

// specInputs gathers what containerspec.Build needs besides the pod and
// the container from what the worker resolved for the pod (its volumes,
// directory, network namespace, name-service files, runtime type, shared
// namespaces) and from its collaborators (the environment's sources, the
// pod's cgroups, the image users).
func (w *worker) specInputs(ctx context.Context, pod *v1.Pod, s startAction, vols map[string]string) (containerspec.Inputs, error) {
	c := s.container
	env, err := w.envOf(ctx, pod, c)
	if err != nil {
		return containerspec.Inputs{}, err
	}
	in := containerspec.Inputs{
		Attempt:     s.attempt,
		PodDir:      w.podDir(),
		LogPath:     containerLogPath(w.d.podLogsDir, pod, c.Name, s.attempt),
		Volumes:     vols,
		Env:         env,
		Labels:      map[string]string{LabelContainerHash: containerHash(c)},
		NameFiles:   w.names.hosts != nil,
		Hostname:    w.names.utsHostname,
		NetNSPath:   w.netnsPath(),
		RuntimeType: utilptr.Deref(w.runtimeType, ""),
		Cgroups:     w.d.cgroups,
		Security:    w.d.security,
	}
	if w.d.devices != nil {
		if in.Devices, err = w.d.devices.RunOptions(ctx, pod, c); err != nil {
			return containerspec.Inputs{}, err
		}
	}
	if w.d.cpus != nil {
		in.CPUSet = w.d.cpus.CPUSet(pod, c)
		in.Exclusive = w.d.cpus.ContainerExclusive(pod, c)
	}
	in.NoCPUQuota = w.d.noCPUQuota
	if images, ok := w.d.rt.(containerspec.ImageUsers); ok {
		in.Images = images
	}
	in.PodNamespaces, in.PIDNSPath = w.ns.of(pod, w.names.utsHostname)
	if s.ephemeral && s.pidNSOf != 0 {
		// An ephemeral container joins its target's PID namespace.
		in.PIDNSPath = pidNSPath(s.pidNSOf)
	}
	return in, nil
}
