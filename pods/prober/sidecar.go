package prober

import (
	v1 "k8s.io/api/core/v1"

	"github.com/nodeagent/nodeagent/pods/kubetypes"
)

// probedContainers are the containers of pod that may have probes: its
// regular containers and its sidecars (the API refuses probes on other
// init containers).
func probedContainers(pod *v1.Pod) []*v1.Container {
	var out []*v1.Container
	for i := range pod.Spec.InitContainers {
		if kubetypes.IsSidecar(&pod.Spec.InitContainers[i]) {
			out = append(out, &pod.Spec.InitContainers[i])
		}
	}
	for i := range pod.Spec.Containers {
		out = append(out, &pod.Spec.Containers[i])
	}
	return out
}
