package admission

import (
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// unsupportedRestartPolicy adds the containers' restartPolicy fields
// nodeagent does not run: only Always on an init container (a sidecar) is
// supported; a restartPolicy on a regular container (the alpha
// ContainerRestartRules feature) is not.
func unsupportedRestartPolicy(s *v1.PodSpec, spec *field.Path, add func(*field.Path)) {
	for i := range s.InitContainers {
		if rp := s.InitContainers[i].RestartPolicy; rp != nil && *rp != v1.ContainerRestartPolicyAlways {
			add(spec.Child("initContainers").Index(i).Child("restartPolicy"))
		}
	}
	for i := range s.Containers {
		if s.Containers[i].RestartPolicy != nil {
			add(spec.Child("containers").Index(i).Child("restartPolicy"))
		}
	}
}
