package csi

import (
	"context"
	"log/slog"
	"path/filepath"
	"time"

	storagev1 "k8s.io/api/storage/v1"
)

// reconstructLookupTimeout bounds the CSIDriver reads of Reconstruct (one
// per driver): an API server that does not answer leaves a volume
// counted as attachable rather than holding the agent's start.
const reconstructLookupTimeout = 2 * time.Second

// ReconstructedVolume is a CSI volume found published in a pod's
// directory at the agent's start.
type ReconstructedVolume struct {
	PodUID   string
	SpecName string // the PV's name, or the inline volume's
	Driver   string
	Handle   string
	Mounted  bool // its publish target is a mount point
}

// Reconstruct is kubelet's volume reconstruction (volumemanager
// reconciler reconstructVolumes), run once at the agent's start before
// any pod syncs: it rebuilds, from the pods' volume directories
// (<rootDir>/pods/<uid>/volumes/kubernetes.io~csi/<name>/vol_data.json)
// and the mount table, which CSI volumes pods have published, so that
//
//   - an attachable one is in VolumesInUse at once, whether its pod still
//     runs or is gone and not torn down yet: the attach/detach controller
//     does not detach a volume still mounted here (until Reconstruct has
//     run, Synced is false and the Node's status.volumesInUse is left as
//     it was, as kubelet's setter waits for its reconciler);
//   - a running pod's volume is not published or unmounted again (its
//     SetUp finds the mounted target);
//   - a gone pod's volume is unpublished and unstaged by the pod's
//     teardown (the agent's orphan cleanup once its pod sources synced),
//     through the driver, never unmounted behind it.
//
// A volume is attachable when its driver's CSIDriver says so (kubelet's
// CanAttach); when the CSIDriver cannot be read it is counted attachable
// (listing a volume that needs no attachment is harmless, dropping one
// that does is not). Inline (ephemeral) volumes are never attachable.
func (m *Mounter) Reconstruct(ctx context.Context, log *slog.Logger) []ReconstructedVolume {
	defer func() {
		m.mu.Lock()
		m.synced = true
		m.mu.Unlock()
	}()
	dataFiles, err := filepath.Glob(filepath.Join(m.RootDir, "pods", "*", "volumes", podPluginDir, "*", volDataFileName))
	if err != nil {
		log.Error("volume reconstruction: cannot list pod volume directories", "err", err)
		return nil
	}
	attachable := map[string]bool{}
	var out []ReconstructedVolume
	for _, f := range dataFiles {
		dir := filepath.Dir(f)
		podDir := filepath.Dir(filepath.Dir(filepath.Dir(dir)))
		data, err := readVolData(dir)
		if err != nil {
			log.Warn("volume reconstruction: unreadable volume data", "path", f, "err", err)
			continue
		}
		mounted, _ := isMountPoint(filepath.Join(dir, podMountDir))
		rv := ReconstructedVolume{PodUID: filepath.Base(podDir), SpecName: filepath.Base(dir), Driver: data.DriverName, Handle: data.VolumeHandle, Mounted: mounted}
		out = append(out, rv)
		log.Info("reconstructed volume", "podUID", rv.PodUID, "volume", rv.SpecName, "driver", rv.Driver, "handle", rv.Handle, "mounted", mounted)
		if storagev1.VolumeLifecycleMode(data.VolumeLifecycleMode) == storagev1.VolumeLifecycleEphemeral {
			continue
		}
		a, ok := attachable[data.DriverName]
		if !ok {
			lctx, cancel := context.WithTimeout(ctx, reconstructLookupTimeout)
			drv, err := m.getCSIDriver(lctx, data.DriverName)
			cancel()
			a = err != nil || attachRequired(drv)
			attachable[data.DriverName] = a
		}
		if a {
			m.noteInUse(&csiVolume{driver: data.DriverName, handle: data.VolumeHandle}, podDir, true)
		}
	}
	return out
}

// Synced reports whether Reconstruct has run: until then VolumesInUse may
// miss volumes of pods set up before the agent's start.
func (m *Mounter) Synced() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.synced
}
