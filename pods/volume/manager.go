package volume

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Manager sets up and tears down all of a pod's volumes.
type Manager struct {
	projector *Projector // nil: no secret, configMap, downwardAPI or projected volumes
}

// NewManager returns a Manager; p writes secret, configMap, downwardAPI and
// projected volumes.
func NewManager(p *Projector) *Manager { return &Manager{projector: p} }

// Setup makes the pod's volumes under podDir (idempotent) and returns each
// volume's host path by name, and when projected volumes need refreshing
// (zero: never). A volume that cannot be set up is a *MountError (see
// MountErrors; several are joined).
func (m *Manager) Setup(ctx context.Context, pod *v1.Pod, podDir string) (map[string]string, time.Time, error) {
	vols, err := SetupVolumes(podDir, pod)
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("volumes: %w", err)
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

// Teardown unmounts and removes the pod's volumes and forgets its tokens.
func (m *Manager) Teardown(uid types.UID, podDir string) error {
	if err := TeardownVolumes(podDir); err != nil {
		return err
	}
	if m.projector != nil {
		m.projector.Forget(uid)
	}
	return nil
}
