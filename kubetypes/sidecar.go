package kubetypes

import v1 "k8s.io/api/core/v1"

// IsSidecar reports whether an init container is restartable (a "sidecar":
// restartPolicy Always), as kubelet's podutil.IsRestartableInitContainer.
// Such a container starts in the init sequence and then runs, restarted
// whenever it exits, next to the pod's regular containers.
func IsSidecar(c *v1.Container) bool {
	return c != nil && c.RestartPolicy != nil && *c.RestartPolicy == v1.ContainerRestartPolicyAlways
}

// HasSidecar reports whether one of the pod's init containers is a sidecar.
func HasSidecar(pod *v1.Pod) bool {
	for i := range pod.Spec.InitContainers {
		if IsSidecar(&pod.Spec.InitContainers[i]) {
			return true
		}
	}
	return false
}

// ProbedContainers are the containers of pod that may have probes: its
// sidecars and its regular containers (the API refuses probes on other
// init containers).
func ProbedContainers(pod *v1.Pod) []*v1.Container {
	var out []*v1.Container
	for i := range pod.Spec.InitContainers {
		if IsSidecar(&pod.Spec.InitContainers[i]) {
			out = append(out, &pod.Spec.InitContainers[i])
		}
	}
	for i := range pod.Spec.Containers {
		out = append(out, &pod.Spec.Containers[i])
	}
	return out
}
