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
	Mounted  bool // its publish target is a mount point (block: its bind under dev/ is a device)
	Block    bool // a raw block volume (block.go)
}

// Reconstruct is kubelet's volume reconstruction (volumemanager
// reconciler reconstructVolumes), run once at the agent's start before
// any pod syncs: it rebuilds, from the pods' volume directories
// (<rootDir>/pods/<uid>/volumes/kubernetes.io~csi/<name>/vol_data.json,
// and for raw block volumes the symlinks
// <rootDir>/pods/<uid>/volumeDevices/kubernetes.io~csi/<name> with the
// volume's data under plugins/kubernetes.io/csi/volumeDevices/<name>/data)
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
	// Raw block volumes: the pods' symlinks
	// (<rootDir>/pods/<uid>/volumeDevices/kubernetes.io~csi/<spec>) and
	// the volume's data under plugins/kubernetes.io/csi/volumeDevices.
	links, err := filepath.Glob(filepath.Join(m.RootDir, "pods", "*", volumeDevicesDir, podPluginDir, "*"))
	if err != nil {
		log.Error("volume reconstruction: cannot list pod volumeDevices directories", "err", err)
	}
	type found struct {
		podDir, spec, dataDir string
		block                 bool
	}
	var all []found
	for _, f := range dataFiles {
		dir := filepath.Dir(f)
		all = append(all, found{podDir: filepath.Dir(filepath.Dir(filepath.Dir(dir))), spec: filepath.Base(dir), dataDir: dir})
	}
	for _, l := range links {
		spec := filepath.Base(l)
		all = append(all, found{podDir: filepath.Dir(filepath.Dir(filepath.Dir(l))), spec: spec, dataDir: m.csiBlockPaths(spec).data, block: true})
	}
	attachable := map[string]bool{}
	var out []ReconstructedVolume
	for _, fv := range all {
		podDir := fv.podDir
		data, err := readVolData(fv.dataDir)
		if err != nil {
			log.Warn("volume reconstruction: unreadable volume data", "path", filepath.Join(fv.dataDir, volDataFileName), "err", err)
			continue
		}
		var mounted bool
		if fv.block {
			mounted = m.blockHost().isDevice(filepath.Join(m.csiBlockPaths(fv.spec).globalMap, filepath.Base(podDir)))
		} else {
			mounted, _ = isMountPoint(filepath.Join(fv.dataDir, podMountDir))
		}
		rv := ReconstructedVolume{PodUID: filepath.Base(podDir), SpecName: fv.spec, Driver: data.DriverName, Handle: data.VolumeHandle, Mounted: mounted, Block: fv.block}
		out = append(out, rv)
		log.Info("reconstructed volume", "podUID", rv.PodUID, "volume", rv.SpecName, "driver", rv.Driver, "handle", rv.Handle, "mounted", mounted, "block", fv.block)
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
