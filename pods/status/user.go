package status

import (
	v1 "k8s.io/api/core/v1"

	"github.com/nodeagent/nodeagent/runtime"
)

// containerUser is containerStatuses[].user as kubelet 1.34 reports it
// (SupplementalGroupsPolicy is on by default): the uid, gid and groups of
// the container's process, from its OCI spec; nil when the runtime does not
// know them.
func containerUser(c runtime.Container) *v1.ContainerUser {
	if c.User == nil {
		return nil
	}
	return &v1.ContainerUser{Linux: &v1.LinuxContainerUser{
		UID:                c.User.UID,
		GID:                c.User.GID,
		SupplementalGroups: append([]int64(nil), c.User.SupplementalGroups...),
	}}
}

// volumeMountStatuses is containerStatuses[].volumeMounts as kubelet 1.34
// reports it (RecursiveReadOnlyMounts is GA): the container's mounts from
// its spec, a read-only one with recursiveReadOnly Disabled (nodeagent
// refuses Enabled and IfPossible).
func volumeMountStatuses(spec *v1.Container) []v1.VolumeMountStatus {
	var out []v1.VolumeMountStatus
	for _, m := range spec.VolumeMounts {
		vs := v1.VolumeMountStatus{Name: m.Name, MountPath: m.MountPath, ReadOnly: m.ReadOnly}
		if m.ReadOnly {
			disabled := v1.RecursiveReadOnlyDisabled
			vs.RecursiveReadOnly = &disabled
		}
		out = append(out, vs)
	}
	return out
}

// withResources sets containerStatuses[].resources and allocatedResources
// of a container the runtime has, as kubelet 1.34 does
// (InPlacePodVerticalScaling is on by default): allocatedResources are the
// requests of spec (the container with its allocation), resources what
// the running container's cgroup has (applied, read back), else the
// allocation.
func withResources(st *v1.ContainerStatus, spec *v1.Container, applied v1.ResourceRequirements) {
	if applied.Requests != nil || applied.Limits != nil {
		st.Resources = applied.DeepCopy()
	} else {
		st.Resources = spec.Resources.DeepCopy()
	}
	st.Resources.Claims = nil
	if len(spec.Resources.Requests) > 0 {
		st.AllocatedResources = spec.Resources.Requests.DeepCopy()
	}
}
