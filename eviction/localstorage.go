package eviction

import (
	"context"
	"fmt"
	"path/filepath"

	v1 "k8s.io/api/core/v1"
	resourcehelper "k8s.io/component-helpers/resource"

	"github.com/nodeagent/nodeagent/runtime"
)

// LocalUsage is a pod's local ephemeral storage usage, as kubelet's
// localStorageEviction reads it, in bytes.
type LocalUsage struct {
	// EmptyDirs are the pod's disk-backed emptyDir volumes that have a
	// sizeLimit, by volume name.
	EmptyDirs map[string]int64
	// Containers are the running containers' logs and, unless the image
	// filesystem is a filesystem of its own, writable layers, by name.
	Containers map[string]int64
	// Pod is the pod's total: its volumes on the node filesystem, its
	// logs and its containers' writable layers.
	Pod int64
}

// hasLocalStorageLimit reports whether pod sets a limit kubelet's
// localStorageEviction enforces: an emptyDir sizeLimit on disk or an
// ephemeral-storage limit. Only such pods are measured.
func hasLocalStorageLimit(pod *v1.Pod) bool {
	for i := range pod.Spec.Volumes {
		if e := pod.Spec.Volumes[i].EmptyDir; e != nil && e.Medium != v1.StorageMediumMemory && e.SizeLimit != nil && e.SizeLimit.Sign() > 0 {
			return true
		}
	}
	_, ok := resourcehelper.PodLimits(pod, resourcehelper.PodResourcesOptions{})[v1.ResourceEphemeralStorage]
	return ok
}

// localStorageViolation returns kubelet's eviction message for the first
// local storage limit the pod exceeds, checked in kubelet's order: each
// emptyDir's sizeLimit, the pod's total against the sum of its
// containers' ephemeral-storage limits, each container's own limit. ""
// when it exceeds none. A memory-backed emptyDir is a tmpfs of its
// sizeLimit and cannot exceed it.
func localStorageViolation(pod *v1.Pod, u LocalUsage) string {
	for i := range pod.Spec.Volumes {
		vol := &pod.Spec.Volumes[i]
		e := vol.EmptyDir
		if e == nil || e.Medium == v1.StorageMediumMemory || e.SizeLimit == nil || e.SizeLimit.Sign() <= 0 {
			continue
		}
		if used, ok := u.EmptyDirs[vol.Name]; ok && used > e.SizeLimit.Value() {
			return fmt.Sprintf("Usage of EmptyDir volume %q exceeds the limit %q. ", vol.Name, e.SizeLimit.String())
		}
	}
	if limit, ok := resourcehelper.PodLimits(pod, resourcehelper.PodResourcesOptions{})[v1.ResourceEphemeralStorage]; ok && u.Pod > limit.Value() {
		return fmt.Sprintf("Pod ephemeral local storage usage exceeds the total limit of containers %s. ", limit.String())
	}
	for i := range pod.Spec.Containers {
		c := &pod.Spec.Containers[i]
		limit, ok := c.Resources.Limits[v1.ResourceEphemeralStorage]
		if !ok || limit.Value() == 0 {
			continue
		}
		if used, ok := u.Containers[c.Name]; ok && used > limit.Value() {
			return fmt.Sprintf("Container %s exceeded its local ephemeral storage limit %q. ", c.Name, limit.String())
		}
	}
	return ""
}

// LocalUsage measures the local storage of pods (those with a limit, see
// hasLocalStorageLimit): du of each sized emptyDir's directory, of the
// pod's directory and logs, and the snapshotter's usage of each running
// container's writable layer (through WritableLayer). The cost is a walk
// of what these pods wrote, nothing for pods without limits.
func (s Stats) LocalUsage(ctx context.Context, pods []*v1.Pod) map[string]LocalUsage {
	var cs []runtime.Container
	if s.Containers != nil {
		cs, _ = s.Containers(ctx) // without them: volumes and logs only
	}
	byPod := map[string][]runtime.Container{}
	for _, c := range cs {
		if c.State == runtime.StateRunning {
			byPod[string(c.Pod.UID)] = append(byPod[string(c.Pod.UID)], c)
		}
	}
	out := map[string]LocalUsage{}
	for _, p := range pods {
		uid := string(p.UID)
		podDir := filepath.Join(s.RootDir, "pods", uid)
		logs := s.podLogDirs(p)
		u := LocalUsage{EmptyDirs: map[string]int64{}, Containers: map[string]int64{}}
		for i := range p.Spec.Volumes {
			vol := &p.Spec.Volumes[i]
			if e := vol.EmptyDir; e != nil && e.Medium != v1.StorageMediumMemory && e.SizeLimit != nil {
				if d, err := diskUsage(filepath.Join(podDir, "volumes", "empty-dir", vol.Name)); err == nil {
					u.EmptyDirs[vol.Name] = d.bytes
				}
			}
		}
		for _, dir := range append([]string{podDir}, logs...) {
			d, _ := diskUsage(dir)
			u.Pod += d.bytes
		}
		for _, c := range byPod[uid] {
			var used int64
			for _, l := range logs {
				b, _ := diskUsage(filepath.Join(l, c.Name))
				used += b.bytes
			}
			if s.WritableLayer != nil {
				if w, err := s.WritableLayer(ctx, c.ID); err == nil {
					u.Pod += w
					if !s.DedicatedImageFS {
						used += w
					}
				}
			}
			u.Containers[c.Name] += used
		}
		out[uid] = u
	}
	return out
}
