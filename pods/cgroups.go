package pods

import (
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// PodCgroups lays out pods' cgroups as kubelet does; *cm.Manager
// implements it.
type PodCgroups interface {
	// EnsurePod makes the pod's cgroup (once) and returns its containers'
	// cgroup parent.
	EnsurePod(pod *v1.Pod) (string, error)
	// RemovePod removes the pod's cgroup once its containers are gone.
	RemovePod(uid types.UID) error
	// OOMScoreAdj is the oom_score_adj of container c of pod.
	OOMScoreAdj(pod *v1.Pod, c *v1.Container) int
	// SwapMax is the swap container c of pod may use beyond its memory
	// (nil: the runtime's default).
	SwapMax(pod *v1.Pod, c *v1.Container) *int64
}

// removePodCgroup removes the pod's cgroup, wherever this or an older
// agent made it.
func (d *workerDeps) removePodCgroup(uid types.UID) error {
	if d.cgroups == nil {
		return d.rt.RemovePodCgroup(uid)
	}
	return d.cgroups.RemovePod(uid)
}
