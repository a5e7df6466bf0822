package volume

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// External sets up the volumes that resolve through the API server and a
// CSI driver: persistentVolumeClaim, generic ephemeral and csi volumes
// (*csi.Mounter implements it).
type External interface {
	// SetUp returns the volume's host path; an error is a *MountError.
	// It is called concurrently for the volumes of one pod.
	SetUp(ctx context.Context, pod *v1.Pod, podDir string, v *v1.Volume) (string, error)
	// TearDown releases every such volume of the pod in podDir. Until it
	// succeeds the pod's other volumes stay too.
	TearDown(ctx context.Context, podDir string) error
}

// externalTeardownTimeout bounds one TearDown (its CSI calls have their
// own, longer, timeouts in kubelet; a pod's removal is retried).
const externalTeardownTimeout = 2 * time.Minute

// isExternalVolume: persistentVolumeClaim, generic ephemeral and csi
// volumes, and the in-tree sources mounted through CSI migration (set up
// by the External).
func isExternalVolume(v *v1.Volume) bool {
	return v.PersistentVolumeClaim != nil || v.Ephemeral != nil || v.CSI != nil || IsMigratedInTree(v)
}

// IsMigratedInTree reports whether v has one of the in-tree sources kubelet
// 1.34 mounts through CSI migration (package csi translates them):
// awsElasticBlockStore, gcePersistentDisk, azureDisk, azureFile,
// vsphereVolume, cinder, portworxVolume.
func IsMigratedInTree(v *v1.Volume) bool {
	return v.AWSElasticBlockStore != nil || v.GCEPersistentDisk != nil || v.AzureDisk != nil || v.AzureFile != nil ||
		v.VsphereVolume != nil || v.Cinder != nil || v.PortworxVolume != nil
}

// inTreeReadOnly is the readOnly of a migrated in-tree source: what its
// translated CSI source's readOnly is, which kubelet's CSI mounter
// reports (vsphereVolume has none).
func inTreeReadOnly(v *v1.Volume) bool {
	switch {
	case v.AWSElasticBlockStore != nil:
		return v.AWSElasticBlockStore.ReadOnly
	case v.GCEPersistentDisk != nil:
		return v.GCEPersistentDisk.ReadOnly
	case v.AzureDisk != nil:
		return v.AzureDisk.ReadOnly != nil && *v.AzureDisk.ReadOnly
	case v.AzureFile != nil:
		return v.AzureFile.ReadOnly
	case v.Cinder != nil:
		return v.Cinder.ReadOnly
	case v.PortworxVolume != nil:
		return v.PortworxVolume.ReadOnly
	}
	return false
}

// Manager sets up and tears down all of a pod's volumes.
type Manager struct {
	projector *Projector // nil: no secret, configMap, downwardAPI or projected volumes
	external  External   // nil: no persistentVolumeClaim or csi volumes
}

// NewManager returns a Manager; p writes secret, configMap, downwardAPI and
// projected volumes, ext (may be nil) sets up persistentVolumeClaim and
// csi volumes.
func NewManager(p *Projector, ext External) *Manager { return &Manager{projector: p, external: ext} }

// Setup makes the pod's volumes under podDir (idempotent) and returns each
// volume's host path by name, and when projected volumes need refreshing
// (zero: never). A volume that cannot be set up is a *MountError (see
// MountErrors; several are joined): every volume is tried, so each one
// that fails has its FailedMount.
func (m *Manager) Setup(ctx context.Context, pod *v1.Pod, podDir string) (map[string]string, time.Time, error) {
	vols, err := SetupVolumes(podDir, pod)
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("volumes: %w", err)
	}
	// The external volumes are set up side by side, as kubelet's
	// operation executor mounts a pod's volumes: one waiting for its
	// attachment or its driver does not hold back the others, and the
	// attachable ones are listed in volumesInUse together (one node
	// status write rather than one each). Errors keep the volumes' order.
	var ext []int
	for i := range pod.Spec.Volumes {
		if isExternalVolume(&pod.Spec.Volumes[i]) {
			ext = append(ext, i)
		}
	}
	type setUp struct {
		path string
		err  error
	}
	done := make([]setUp, len(pod.Spec.Volumes))
	one := func(i int) {
		v := &pod.Spec.Volumes[i]
		if m.external == nil {
			done[i].err = &MountError{Volume: v.Name, Err: errors.New("persistentVolumeClaim, ephemeral, csi and CSI-migrated in-tree volumes need the API server")}
			return
		}
		done[i].path, done[i].err = m.external.SetUp(ctx, pod, podDir, v)
	}
	if len(ext) == 1 {
		one(ext[0])
	} else {
		var wg sync.WaitGroup
		for _, i := range ext {
			wg.Go(func() { one(i) })
		}
		wg.Wait()
	}
	var errs []error
	for _, i := range ext {
		if done[i].err != nil {
			errs = append(errs, done[i].err)
			continue
		}
		vols[pod.Spec.Volumes[i].Name] = done[i].path
	}
	if len(errs) > 0 {
		return nil, time.Time{}, errors.Join(errs...)
	}
	var refreshAt time.Time
	if hasPayloadVolumes(pod) {
		if m.projector == nil {
			return nil, time.Time{}, errors.New("secret, configMap, downwardAPI and projected volumes are not available")
		}
		pv, at, err := m.projector.Setup(ctx, pod, podDir)
		if err != nil {
			return nil, time.Time{}, err
		}
		maps.Copy(vols, pv)
		refreshAt = at
	}
	return vols, refreshAt, nil
}

// Teardown releases the pod's persistentVolumeClaim and csi volumes (the
// driver unmounts them), then unmounts and removes the other volumes and
// forgets its tokens.
func (m *Manager) Teardown(uid types.UID, podDir string) error {
	if m.external != nil {
		ctx, cancel := context.WithTimeout(context.Background(), externalTeardownTimeout)
		err := m.external.TearDown(ctx, podDir)
		cancel()
		if err != nil {
			return fmt.Errorf("volumes: %w", err)
		}
	}
	if err := TeardownVolumes(podDir); err != nil {
		return err
	}
	if m.projector != nil {
		m.projector.Forget(uid)
	}
	return nil
}

// MustMountReadOnly reports whether the pod's volume name is mounted
// read-only into every container whatever its volumeMount says, as
// kubelet does for a volume whose mounter says ReadOnly (makeMounts'
// mustMountRO): a persistentVolumeClaim or csi volume with readOnly, and
// every image volume (its plugin's attributes are ReadOnly). The
// driver's read-only mount on the host does not carry over to the
// container's bind mount of it (mount flags do not propagate), so the
// container's mount must be read-only itself.
func MustMountReadOnly(pod *v1.Pod, name string) bool {
	for i := range pod.Spec.Volumes {
		v := &pod.Spec.Volumes[i]
		if v.Name != name {
			continue
		}
		switch {
		case v.PersistentVolumeClaim != nil:
			return v.PersistentVolumeClaim.ReadOnly
		case v.CSI != nil:
			return v.CSI.ReadOnly != nil && *v.CSI.ReadOnly
		case IsMigratedInTree(v):
			return inTreeReadOnly(v)
		case v.Image != nil:
			return true
		}
	}
	return false
}
