package pods

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"

	v1 "k8s.io/api/core/v1"

	"github.com/nodeagent/nodeagent/pods/status"
	"github.com/nodeagent/nodeagent/pods/volume"
)

// Image volumes (volumes[].image, feature ImageVolume) as kubelet 1.34
// runs them with the gate on: before a container that mounts one is
// created, the volume's image is made present as its pullPolicy says,
// through the same puller as container images (the pod's pull secrets,
// the node's credentials and credential providers, kubelet's back-off,
// events and reasons); a failed pull leaves that container waiting with
// ErrImagePull or ImagePullBackOff and kubelet's "Failed" event, the
// pod's other containers start. The image's filesystem is mounted
// read-only on the host once per pod (ImageVolumeRuntime) and
// bind-mounted read-only into the containers, subPath included; it is
// unmounted and its snapshot removed when the pod's sandbox is released.

// ImageVolumeRuntime mounts an image's filesystem read-only for a pod;
// *runtime.Runtime implements it.
type ImageVolumeRuntime interface {
	MountImageVolume(ctx context.Context, ref, key, podUID, target string) error
	UnmountImageVolume(ctx context.Context, key, target string) error
}

// errImageVolumesUnavailable: the runtime cannot mount image volumes.
var errImageVolumesUnavailable = errors.New("image volumes are not supported by this runtime")

// imageVolumeKey names the view snapshot of a pod's image volume.
func imageVolumeKey(uid, name string) string { return "nodeagent-image-volume-" + uid + "-" + name }

// mountImageVolumes makes the image volumes container c mounts present
// and mounted, and returns vols with their host paths added (a copy when
// there are any). On failure it returns the container's waiting state.
func (w *worker) mountImageVolumes(ctx context.Context, pod *v1.Pod, c *v1.Container, vols map[string]string) (map[string]string, *status.Waiting, error) {
	var out map[string]string
	for _, m := range c.VolumeMounts {
		src := imageVolumeSource(pod, m.Name)
		if src == nil {
			continue
		}
		if out == nil {
			out = maps.Clone(vols)
			if out == nil {
				out = map[string]string{}
			}
		}
		target := volume.ImageVolumeDir(w.podDir(), m.Name)
		if w.images.volumes[m.Name] {
			out[m.Name] = target
			continue
		}
		if w.d.imageVols == nil {
			return nil, &status.Waiting{Reason: status.ReasonCreateContainer, Message: errImageVolumesUnavailable.Error()}, errImageVolumesUnavailable
		}
		policy := src.PullPolicy
		if policy == "" {
			policy = v1.PullIfNotPresent
		}
		ref, reason, err := w.images.ensure(ctx, pod, &v1.Container{Image: src.Reference, ImagePullPolicy: policy})
		if err != nil {
			// kubelet's toKubeContainerImageVolumes: a Failed event on the
			// container, which waits with the pull's reason.
			w.d.event(pod, v1.EventTypeWarning, "Failed", fmt.Sprintf("Error: %v", err))
			return nil, &status.Waiting{Reason: reason, Message: err.Error()}, fmt.Errorf("image volume %s: %w", m.Name, err)
		}
		if err := w.d.imageVols.MountImageVolume(ctx, ref, imageVolumeKey(string(w.uid), m.Name), string(w.uid), target); err != nil {
			w.d.event(pod, v1.EventTypeWarning, "Failed", fmt.Sprintf("Error: %v", err))
			return nil, &status.Waiting{Reason: status.ReasonCreateContainer, Message: err.Error()}, fmt.Errorf("image volume %s: %w", m.Name, err)
		}
		if w.images.volumes == nil {
			w.images.volumes = map[string]bool{}
		}
		w.images.volumes[m.Name] = true
		out[m.Name] = target
	}
	if out == nil {
		return vols, nil, nil
	}
	return out, nil, nil
}

// unmountImageVolumes unmounts every image volume of pod and removes its
// snapshot (those never mounted too: it is idempotent), and those the
// pod's directory holds, so that an orphan (a pod removed while the agent
// was down, known by its UID only) releases its image volumes too.
func (w *worker) unmountImageVolumes(ctx context.Context, pod *v1.Pod) error {
	if w.d.imageVols == nil {
		return nil
	}
	names := map[string]bool{}
	for i := range pod.Spec.Volumes {
		if pod.Spec.Volumes[i].Image != nil {
			names[pod.Spec.Volumes[i].Name] = true
		}
	}
	es, _ := os.ReadDir(filepath.Dir(volume.ImageVolumeDir(w.podDir(), "x")))
	for _, e := range es {
		names[e.Name()] = true
	}
	var errs []error
	for _, name := range slices.Sorted(maps.Keys(names)) {
		if err := w.d.imageVols.UnmountImageVolume(ctx, imageVolumeKey(string(w.uid), name), volume.ImageVolumeDir(w.podDir(), name)); err != nil {
			errs = append(errs, err)
			continue
		}
		delete(w.images.volumes, name)
	}
	return errors.Join(errs...)
}

// imageVolumeSource is the image source of the pod's volume name (nil
// when it is another kind).
func imageVolumeSource(pod *v1.Pod, name string) *v1.ImageVolumeSource {
	for i := range pod.Spec.Volumes {
		if pod.Spec.Volumes[i].Name == name {
			return pod.Spec.Volumes[i].Image
		}
	}
	return nil
}
