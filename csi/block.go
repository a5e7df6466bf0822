package csi

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	csipb "github.com/container-storage-interface/spec/lib/go/csi"
	"golang.org/x/sys/unix"
	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"

	"github.com/nodeagent/nodeagent/internal/loopdev"
)

// Raw block volumes (volumeMode: Block, a container's volumeDevices), as
// kubelet maps them (pkg/volume/csi/csi_block.go, pkg/volume/util
// MapBlockVolume/UnmapBlockVolume, volumepathhandler, the operation
// generator's MapVolume, UnmapVolume and UnmapDevice). For a CSI volume
// whose PV is named <spec>, under <rootDir>/plugins/kubernetes.io/csi/volumeDevices:
//
//	staging/<spec>            NodeStageVolume's staging path (a directory)
//	publish/<spec>/<pod UID>  NodePublishVolume's target: a file the driver
//	                          binds the device onto
//	<spec>/data/vol_data.json what teardown and reconstruction need
//	<spec>/dev/<pod UID>      a bind mount of the publish target, with a
//	                          loop device over it that keeps the device
//	                          open (kubelet's "descriptor lock")
//
// and <rootDir>/pods/<uid>/volumeDevices/kubernetes.io~csi/<spec>, a
// symlink to the publish target: what the container gets as a device
// (resolved), at its volumeDevices devicePath.
//
// Map: vol_data.json, [WaitForAttach], NodeStageVolume (when the driver
// stages and no pod has the volume mapped yet), NodePublishVolume, bind
// at dev/<uid>, symlink, loop device. Unmap, the reverse: loop device
// detached, bind unmounted, NodeUnpublishVolume; then, when no pod has
// the volume mapped any more, NodeUnstageVolume and the volume's
// directories go; the pod's symlink last (the record that its teardown is
// not finished, for an agent killed in between). A local PV of volumeMode Block is mapped the
// same way without a driver: its path is the device, the bind is at
// <rootDir>/plugins/kubernetes.io~local-volume/volumeDevices/<spec>/<uid>
// and the symlink at <podDir>/volumeDevices/kubernetes.io~local-volume/<spec>.
const (
	volumeDevicesDir  = "volumeDevices"
	localPluginDir    = "kubernetes.io~local-volume"
	blockStagingDir   = "staging"
	blockPublishDir   = "publish"
	blockDataDir      = "data"
	blockDevDir       = "dev"
	fsTypeBlockName   = "block" // kubelet's fsType for a block capability
	reasonFailedMap   = "FailedMapVolume"
	reasonMapSucceded = "SuccessfulMountVolume"
)

// blockHost is the host side of mapping a block volume (kubelet's
// BlockVolumePathHandler): bind mounts of device files and the loop
// devices over them. hostBlock is the real one; tests record the calls.
type blockHost interface {
	// bindDevice makes file (a regular file) and bind-mounts dev on it,
	// unless file is a device already.
	bindDevice(dev, file string) error
	// unbindDevice unmounts file when it is a device bind, and removes it.
	unbindDevice(file string) error
	// isDevice: path (not followed) is a device file.
	isDevice(path string) bool
	attachLoop(path string) error
	detachLoop(path string) error
	loopAttached(path string) bool
}

type hostBlock struct{}

func (hostBlock) bindDevice(dev, file string) error {
	fi, err := os.Lstat(file)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		f, err := os.OpenFile(file, os.O_CREATE|os.O_RDWR, 0o750)
		if err != nil {
			return fmt.Errorf("failed to open file %s: %v", file, err)
		}
		f.Close()
	case err != nil:
		return fmt.Errorf("failed to stat file %s: %v", file, err)
	case fi.Mode()&fs.ModeDevice != 0:
		return nil // mapped already
	}
	if err := unix.Mount(dev, file, "", unix.MS_BIND, ""); err != nil {
		return fmt.Errorf("failed to bind mount devicePath: %s to linkPath %s: %v", dev, file, err)
	}
	return nil
}

func (h hostBlock) unbindDevice(file string) error {
	if h.isDevice(file) {
		if err := unix.Unmount(file, 0); err != nil && !errors.Is(err, unix.EINVAL) {
			return fmt.Errorf("failed to unmount linkPath %s: %v", file, err)
		}
	}
	if err := os.Remove(file); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("failed to remove file %s: %v", file, err)
	}
	return nil
}

func (hostBlock) isDevice(path string) bool {
	fi, err := os.Lstat(path)
	return err == nil && fi.Mode()&fs.ModeDevice != 0
}

func (hostBlock) attachLoop(path string) error {
	_, err := loopdev.Attach(path)
	return err
}

func (hostBlock) detachLoop(path string) error { return loopdev.Detach(path) }

func (hostBlock) loopAttached(path string) bool {
	_, err := loopdev.Find(path)
	return err == nil
}

func (m *Mounter) blockHost() blockHost {
	if m.block != nil {
		return m.block
	}
	return hostBlock{}
}

// blockPaths are one volume's places on the node.
type blockPaths struct {
	volDir, globalMap, data, staging, publishDir string
	podLinkDir                                   string // under a pod's directory: volumeDevices/<plugin dir>
}

// escapeQualifiedName is kubelet's utilstrings.EscapeQualifiedName.
func escapeQualifiedName(s string) string { return strings.ReplaceAll(s, "/", "~") }

func (m *Mounter) csiBlockPaths(spec string) blockPaths {
	base := filepath.Join(m.RootDir, "plugins", pluginName, volumeDevicesDir)
	vol := filepath.Join(base, escapeQualifiedName(spec))
	return blockPaths{
		volDir: vol, globalMap: filepath.Join(vol, blockDevDir), data: filepath.Join(vol, blockDataDir),
		staging: filepath.Join(base, blockStagingDir, spec), publishDir: filepath.Join(base, blockPublishDir, spec),
		podLinkDir: filepath.Join(volumeDevicesDir, podPluginDir),
	}
}

func (m *Mounter) localBlockPaths(spec string) blockPaths {
	g := filepath.Join(m.RootDir, "plugins", localPluginDir, volumeDevicesDir, spec)
	return blockPaths{volDir: g, globalMap: g, podLinkDir: filepath.Join(volumeDevicesDir, localPluginDir)}
}

func (p blockPaths) publish(uid string) string { return filepath.Join(p.publishDir, uid) }
func (p blockPaths) link(podDir, spec string) string {
	return filepath.Join(podDir, p.podLinkDir, spec)
}

// mapped reports whether the pod's map of the volume is complete (a
// resync, or an agent restart while the pod runs): its symlink points to
// devicePath, which is a device, and dev/<uid> is a device bind with a
// loop device over it.
func (m *Mounter) mapped(p blockPaths, podDir, spec, devicePath string) bool {
	h, uid := m.blockHost(), filepath.Base(podDir)
	target, err := os.Readlink(p.link(podDir, spec))
	if err != nil || !h.isDevice(devicePath) {
		return false
	}
	if resolved, err := filepath.EvalSymlinks(devicePath); err != nil || (target != devicePath && target != resolved) {
		return false
	}
	bind := filepath.Join(p.globalMap, uid)
	return h.isDevice(bind) && h.loopAttached(bind)
}

// mapBlockVolume is kubelet's MapBlockVolume: devicePath bound at
// <globalMap>/<uid>, the pod's symlink to devicePath, the loop device
// over the bind.
func (m *Mounter) mapBlockVolume(p blockPaths, podDir, spec, devicePath string) error {
	h, uid := m.blockHost(), filepath.Base(podDir)
	if err := os.MkdirAll(p.globalMap, 0o750); err != nil {
		return fmt.Errorf("blkUtil.MapDevice failed. devicePath: %s, globalMapPath:%s, podUID: %s, bindMount: true: failed to mkdir %s: %v", devicePath, p.globalMap, uid, p.globalMap, err)
	}
	if err := h.bindDevice(devicePath, filepath.Join(p.globalMap, uid)); err != nil {
		return fmt.Errorf("blkUtil.MapDevice failed. devicePath: %s, globalMapPath:%s, podUID: %s, bindMount: true: %v", devicePath, p.globalMap, uid, err)
	}
	linkDir := filepath.Join(podDir, p.podLinkDir)
	link := filepath.Join(linkDir, spec)
	err := os.MkdirAll(linkDir, 0o750)
	if err == nil {
		if err = os.Remove(link); errors.Is(err, fs.ErrNotExist) {
			err = nil
		}
	}
	if err == nil {
		err = os.Symlink(devicePath, link)
	}
	if err != nil {
		return fmt.Errorf("blkUtil.MapDevice failed. devicePath: %s, podVolumeMapPath:%s, volumeMapName: %s, bindMount: false: %v", devicePath, linkDir, spec, err)
	}
	if err := h.attachLoop(filepath.Join(p.globalMap, uid)); err != nil {
		return fmt.Errorf("blkUtil.AttachFileDevice failed. globalMapPath:%s, podUID: %s: %v", p.globalMap, uid, err)
	}
	return nil
}

// unmapBlockVolume is kubelet's UnmapBlockVolume but for the symlink: the
// loop device detached, the bind unmounted. Each step is a no-op when
// done already, so an unmap cut short is finished by the next. The pod's
// symlink goes last (removeLink), after the driver's steps: kubelet
// removes it here, but it keeps its state in memory; the symlink is what
// tells a restarted agent that the pod's teardown is not finished.
func (m *Mounter) unmapBlockVolume(p blockPaths, podDir string) error {
	h, uid := m.blockHost(), filepath.Base(podDir)
	bind := filepath.Join(p.globalMap, uid)
	if err := h.detachLoop(bind); err != nil {
		return fmt.Errorf("blkUtil.DetachFileDevice failed. globalUnmapPath:%s, podUID: %s: %v", p.globalMap, uid, err)
	}
	if err := h.unbindDevice(bind); err != nil {
		return fmt.Errorf("blkUtil.DetachFileDevice failed. globalUnmapPath:%s, podUID: %s, bindMount: true: %v", p.globalMap, uid, err)
	}
	return nil
}

func removeLink(p blockPaths, podDir, spec string) error {
	if err := os.Remove(p.link(podDir, spec)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("blkUtil.UnmapDevice failed. podDeviceUnmapPath:%s, volumeMapName: %s, bindMount: false: %v", filepath.Join(podDir, p.podLinkDir), spec, err)
	}
	return nil
}

// deviceRefs lists the pods (UIDs) whose bind is in globalMap, but the
// one in skip (kubelet's GetDeviceBindMountRefs).
func (m *Mounter) deviceRefs(globalMap, skip string) []string {
	es, err := os.ReadDir(globalMap)
	if err != nil {
		return nil
	}
	var out []string
	for _, e := range es {
		if e.Name() != skip && m.blockHost().isDevice(filepath.Join(globalMap, e.Name())) {
			out = append(out, e.Name())
		}
	}
	return out
}

// podVolumeUse reports whether the pod's containers (of every kind) use
// volume name as a volumeMount and as a volumeDevice.
func podVolumeUse(pod *v1.Pod, name string) (mount, device bool) {
	visit := func(mounts []v1.VolumeMount, devs []v1.VolumeDevice) {
		for _, vm := range mounts {
			mount = mount || vm.Name == name
		}
		for _, d := range devs {
			device = device || d.Name == name
		}
	}
	for _, c := range pod.Spec.InitContainers {
		visit(c.VolumeMounts, c.VolumeDevices)
	}
	for _, c := range pod.Spec.Containers {
		visit(c.VolumeMounts, c.VolumeDevices)
	}
	for _, c := range pod.Spec.EphemeralContainers {
		visit(c.VolumeMounts, c.VolumeDevices)
	}
	return mount, device
}

// checkVolumeMode is the desired state of world populator's check of a
// claim's volume mode against the pod's use of it.
func checkVolumeMode(pod *v1.Pod, name string, block bool) error {
	mount, device := podVolumeUse(pod, name)
	mode := v1.PersistentVolumeFilesystem
	if block {
		mode = v1.PersistentVolumeBlock
	}
	if mount && block {
		return fmt.Errorf("volume %s has volumeMode %s, but is specified in volumeMounts", name, mode)
	}
	if device && !block {
		return fmt.Errorf("volume %s has volumeMode %s, but is specified in volumeDevices", name, mode)
	}
	return nil
}

// mapCSI maps a CSI block volume for the pod and returns the pod's
// symlink to the device (kubelet's MapVolume for the csi plugin).
func (m *Mounter) mapCSI(ctx context.Context, pod *v1.Pod, podDir string, cv *csiVolume) (string, error) {
	p := m.csiBlockPaths(cv.specName)
	uid := string(pod.UID)
	link := p.link(podDir, cv.specName)
	drv, err := m.getCSIDriver(ctx, cv.driver)
	if m.mapped(p, podDir, cv.specName, p.publish(uid)) {
		if err == nil {
			m.noteInUse(cv, podDir, attachRequired(drv))
		}
		// Online expansion, as kubelet's in-use expansion of a block
		// volume: a failure is logged and retried at the next sync.
		if devicePath, err := filepath.EvalSymlinks(p.publish(uid)); err == nil {
			if err := m.expandMounted(ctx, pod, cv, devicePath); err != nil {
				m.log().Warn("volume expansion failed", "pod", pod.Namespace+"/"+pod.Name, "podUID", pod.UID, "volume", cv.specName, "err", err)
				m.event(pod, v1.EventTypeWarning, "VolumeResizeFailed", err.Error())
			}
		}
		return link, nil
	}
	if err != nil {
		return "", &opError{op: "MapVolume.SetUpDevice", err: fmt.Errorf("kubernetes.io/csi: blockMapper.SetupDevice failed to check CSIDriver for %s: %v", cv.driver, err)}
	}
	if !slices.Contains(lifecycleModes(drv), storagev1.VolumeLifecyclePersistent) {
		return "", &opError{op: "MapVolume.MapPodDevice", err: fmt.Errorf("volume mode %q not supported by driver %s (only supports %q)", storagev1.VolumeLifecyclePersistent, cv.driver, lifecycleModes(drv))}
	}
	if len(cv.accessModes) == 1 && cv.accessModes[0] == v1.ReadWriteOncePod && len(m.deviceRefs(p.globalMap, uid)) > 0 {
		return "", &opError{op: "MapVolume.SetUpDevice", err: errors.New("volume uses the ReadWriteOncePod access mode and is already in use by another pod")}
	}
	attach := attachRequired(drv)
	m.noteInUse(cv, podDir, attach)
	if attach {
		if err := m.waitReportedInUse(ctx, cv); err != nil {
			return "", err
		}
	}
	d, ok := m.Drivers.Driver(cv.driver)
	if !ok {
		return "", &opError{op: "MapVolume.SetUpDevice", err: fmt.Errorf("kubernetes.io/csi: blockMapper.SetUpDevice failed to get CSI client: driver name %s not found in the list of registered CSI drivers", cv.driver)}
	}
	defer m.lock(cv.driver, cv.handle)()

	var publishContext map[string]string
	if attach {
		if publishContext, err = m.attachment(ctx, cv); err != nil {
			return "", &opError{op: "MapVolume.WaitForAttach", err: err}
		}
	}
	// kubelet's NewBlockVolumeMapper saves the volume's data first.
	if err := os.MkdirAll(p.data, 0o750); err != nil {
		return "", fmt.Errorf("kubernetes.io/csi: failed to create data dir %s:  %v", p.data, err)
	}
	if err := writeVolData(p.data, volData{
		SpecVolID: cv.specName, VolumeHandle: cv.handle, DriverName: cv.driver, NodeName: m.NodeName,
		AttachmentID: attachmentName(cv.handle, cv.driver, m.NodeName),
	}); err != nil {
		return "", fmt.Errorf("kubernetes.io/csi: csi.NewBlockVolumeMapper failed to save volume info data: %v", err)
	}
	caps, err := nodeCapabilities(ctx, d)
	if err != nil {
		return "", &opError{op: "MapVolume.SetUpDevice", err: err}
	}
	capability, err := blockCapability(cv, caps)
	if err != nil {
		return "", &opError{op: "MapVolume.SetUpDevice", err: err}
	}
	// Staged once: a volume some pod has mapped is staged.
	if caps[csipb.NodeServiceCapability_RPC_STAGE_UNSTAGE_VOLUME] && len(m.deviceRefs(p.globalMap, "")) == 0 {
		if err := m.stageBlock(ctx, d, cv, p, publishContext, capability); err != nil {
			return "", &opError{op: "MapVolume.SetUpDevice", err: err}
		}
	}
	publish := p.publish(uid)
	if err := m.publishBlock(ctx, d, cv, drv, pod, p, publish, publishContext, capability); err != nil {
		return "", &opError{op: "MapVolume.MapPodDevice", err: err}
	}
	devicePath, err := filepath.EvalSymlinks(publish)
	if err != nil {
		return "", &opError{op: "MapVolume.EvalHostSymlinks", err: err}
	}
	if err := m.mapBlockVolume(p, podDir, cv.specName, devicePath); err != nil {
		return "", &opError{op: "MapVolume.MapBlockVolume", err: err}
	}
	m.event(pod, v1.EventTypeNormal, reasonMapSucceded, fmt.Sprintf("MapVolume.MapPodDevice succeeded for volume %q globalMapPath %q", cv.specName, p.globalMap))
	m.event(pod, v1.EventTypeNormal, reasonMapSucceded, fmt.Sprintf("MapVolume.MapPodDevice succeeded for volume %q volumeMapPath %q", cv.specName, filepath.Join(podDir, p.podLinkDir)))
	// A volume expanded while no pod had it (offline expansion): grown
	// now, for the device (kubelet's DevicePath) and the staging path,
	// and the map fails if that fails, as kubelet's MapVolume.
	staging := ""
	if caps[csipb.NodeServiceCapability_RPC_STAGE_UNSTAGE_VOLUME] {
		staging = p.staging
	}
	if err := m.expandIfNeeded(ctx, pod, d, cv, caps, devicePath, staging); err != nil {
		return "", &opError{op: "MapVolume.MarkVolumeAsMounted", prefix: "MapVolume.MarkVolumeAsMounted failed while expanding volume", err: err}
	}
	return link, nil
}

// blockCapability is kubelet's capability for fsType "block": a block
// access type, the access mode as for a mount (volumeCapability).
func blockCapability(cv *csiVolume, caps map[csipb.NodeServiceCapability_RPC_Type]bool) (*csipb.VolumeCapability, error) {
	c, err := volumeCapability(&csiVolume{accessModes: cv.accessModes}, caps, &v1.Pod{})
	if err != nil {
		return nil, err
	}
	c.AccessType = &csipb.VolumeCapability_Block{Block: &csipb.VolumeCapability_BlockVolume{}}
	return c, nil
}

func (m *Mounter) stageBlock(ctx context.Context, d *Driver, cv *csiVolume, p blockPaths, publishContext map[string]string, capability *csipb.VolumeCapability) error {
	secrets, err := m.secrets(ctx, cv.stageSecret)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(p.staging, 0o750); err != nil {
		return fmt.Errorf("kubernetes.io/csi: blockMapper.stageVolumeForBlock failed to create dir %s: %v", p.staging, err)
	}
	sctx, cancel := context.WithTimeout(ctx, csiTimeout)
	defer cancel()
	if _, err := d.Node.NodeStageVolume(sctx, &csipb.NodeStageVolumeRequest{
		VolumeId: cv.handle, PublishContext: publishContext, StagingTargetPath: p.staging,
		VolumeCapability: capability, Secrets: secrets, VolumeContext: cv.attrs,
	}); err != nil {
		return rpcError(err)
	}
	return nil
}

func (m *Mounter) publishBlock(ctx context.Context, d *Driver, cv *csiVolume, drv *storagev1.CSIDriver, pod *v1.Pod, p blockPaths, publish string, publishContext map[string]string, capability *csipb.VolumeCapability) error {
	secrets, err := m.secrets(ctx, cv.publishSecret)
	if err != nil {
		return err
	}
	// The driver makes the target itself; kubelet makes its directory.
	if err := os.MkdirAll(p.publishDir, 0o750); err != nil {
		return fmt.Errorf("kubernetes.io/csi: blockMapper.publishVolumeForBlock failed to create dir %s:  %v", p.publishDir, err)
	}
	pctx, cancel := context.WithTimeout(ctx, csiTimeout)
	defer cancel()
	// kubelet passes the staging path whether or not the driver stages.
	if _, err := d.Node.NodePublishVolume(pctx, &csipb.NodePublishVolumeRequest{
		VolumeId: cv.handle, PublishContext: publishContext, StagingTargetPath: p.staging, TargetPath: publish,
		VolumeCapability: capability, Readonly: cv.readOnly, Secrets: secrets, VolumeContext: volumeContext(cv, drv, pod),
	}); err != nil {
		return rpcError(err)
	}
	return nil
}

// mapLocal maps a local PV of volumeMode Block (kubelet's local volume
// plugin: its path is the device; no staging, no driver).
func (m *Mounter) mapLocal(pod *v1.Pod, podDir string, d *directPV) (string, error) {
	p := m.localBlockPaths(d.pv.Name)
	link := p.link(podDir, d.pv.Name)
	devicePath, err := filepath.EvalSymlinks(d.pv.Spec.Local.Path)
	if err != nil {
		return "", &opError{op: "MapVolume.EvalHostSymlinks", err: err}
	}
	if m.mapped(p, podDir, d.pv.Name, devicePath) {
		return link, nil
	}
	if !m.blockHost().isDevice(devicePath) {
		return "", &opError{op: "MapVolume.MapBlockVolume", err: fmt.Errorf("local volume %s: %s is not a block device", d.pv.Name, devicePath)}
	}
	if err := m.mapBlockVolume(p, podDir, d.pv.Name, devicePath); err != nil {
		return "", &opError{op: "MapVolume.MapBlockVolume", err: err}
	}
	m.event(pod, v1.EventTypeNormal, reasonMapSucceded, fmt.Sprintf("MapVolume.MapPodDevice succeeded for volume %q globalMapPath %q", d.pv.Name, p.globalMap))
	m.event(pod, v1.EventTypeNormal, reasonMapSucceded, fmt.Sprintf("MapVolume.MapPodDevice succeeded for volume %q volumeMapPath %q", d.pv.Name, filepath.Join(podDir, p.podLinkDir)))
	return link, nil
}

// podBlockVolumes lists the CSI block volumes (spec names) the pod in
// podDir has any trace of: its symlinks, and, should a teardown have been
// cut short after the symlink went, its bind under dev/ or its publish
// target. So the teardown finds every step that is left.
func (m *Mounter) podBlockVolumes(podDir string) []string {
	uid := filepath.Base(podDir)
	base := filepath.Join(m.RootDir, "plugins", pluginName, volumeDevicesDir)
	names := map[string]bool{}
	if es, err := os.ReadDir(filepath.Join(podDir, volumeDevicesDir, podPluginDir)); err == nil {
		for _, e := range es {
			names[e.Name()] = true
		}
	}
	binds, _ := filepath.Glob(filepath.Join(base, "*", blockDevDir, uid))
	for _, b := range binds {
		names[filepath.Base(filepath.Dir(filepath.Dir(b)))] = true
	}
	pubs, _ := filepath.Glob(filepath.Join(base, blockPublishDir, "*", uid))
	for _, p := range pubs {
		names[filepath.Base(filepath.Dir(p))] = true
	}
	out := make([]string, 0, len(names))
	for n := range names {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

// unmapCSI tears down the pod's map of one CSI block volume: kubelet's
// UnmapVolume (unmapBlockVolume, NodeUnpublishVolume) and, when no other
// pod has the volume mapped, its UnmapDevice (NodeUnstageVolume, the
// volume's directories removed, vol_data.json last).
func (m *Mounter) unmapCSI(ctx context.Context, podDir, spec string) error {
	p := m.csiBlockPaths(spec)
	uid := filepath.Base(podDir)
	data, err := readVolData(p.data)
	if errors.Is(err, fs.ErrNotExist) {
		// Never got as far as its data file (written first): nothing the
		// driver made; the host's steps, if any, are undone.
		if m.blockHost().isDevice(p.publish(uid)) {
			return fmt.Errorf("kubernetes.io/csi: %s is published but %s has no %s", p.publish(uid), p.data, volDataFileName)
		}
		if err := m.unmapBlockVolume(p, podDir); err != nil {
			return fmt.Errorf("UnmapVolume.UnmapBlockVolume failed for volume %q : %w", spec, err)
		}
		_ = os.Remove(p.publish(uid))
		return removeLink(p, podDir, spec)
	}
	if err != nil {
		return fmt.Errorf("kubernetes.io/csi: unmapper failed to load volume data file [%s]: %v", p.data, err)
	}
	d, ok := m.Drivers.Driver(data.DriverName)
	if !ok {
		return fmt.Errorf("kubernetes.io/csi: blockMapper.UnmapPodDevice failed to get CSI client: driver name %s not found in the list of registered CSI drivers", data.DriverName)
	}
	defer m.lock(data.DriverName, data.VolumeHandle)()
	if err := m.unmapBlockVolume(p, podDir); err != nil {
		return fmt.Errorf("UnmapVolume.UnmapBlockVolume failed for volume %q : %w", spec, err)
	}
	publish := p.publish(uid)
	uctx, cancel := context.WithTimeout(ctx, csiTimeout)
	defer cancel()
	if _, err := d.Node.NodeUnpublishVolume(uctx, &csipb.NodeUnpublishVolumeRequest{VolumeId: data.VolumeHandle, TargetPath: publish}); err != nil {
		return fmt.Errorf("UnmapVolume.UnmapPodDevice failed for volume %q : kubernetes.io/csi: blockMapper.unpublishVolumeForBlock failed: %w", spec, rpcError(err))
	}
	if m.blockHost().isDevice(publish) {
		return fmt.Errorf("UnmapVolume.UnmapPodDevice failed for volume %q : kubernetes.io/csi: %s is still a device after NodeUnpublishVolume", spec, publish)
	}
	// The driver removes its target; one it left (empty) would keep the
	// publish directory.
	_ = os.Remove(publish)
	pubs, _ := os.ReadDir(p.publishDir)
	// Unstaged when no other pod has it mapped (or a map under way, or
	// left half-done: its publish target).
	if len(m.deviceRefs(p.globalMap, "")) == 0 && len(pubs) == 0 {
		if err := m.unmapDevice(ctx, d, data, p, spec); err != nil {
			return err
		}
	}
	if err := removeLink(p, podDir, spec); err != nil {
		return err
	}
	m.forget(data.DriverName, data.VolumeHandle, podDir)
	return nil
}

// unmapDevice is kubelet's UnmapDevice for a CSI block volume:
// NodeUnstageVolume when the staging path is there and the driver stages,
// then the volume's directories go (its vol_data.json last, so a
// teardown cut short is found again).
func (m *Mounter) unmapDevice(ctx context.Context, d *Driver, data volData, p blockPaths, spec string) error {
	if _, err := os.Stat(p.staging); err == nil {
		caps, err := nodeCapabilities(ctx, d)
		if err != nil {
			return fmt.Errorf("UnmapDevice.TearDownDevice failed for volume %q : %w", spec, err)
		}
		if caps[csipb.NodeServiceCapability_RPC_STAGE_UNSTAGE_VOLUME] {
			uctx, cancel := context.WithTimeout(ctx, csiTimeout)
			_, err := d.Node.NodeUnstageVolume(uctx, &csipb.NodeUnstageVolumeRequest{VolumeId: data.VolumeHandle, StagingTargetPath: p.staging})
			cancel()
			if err != nil {
				return fmt.Errorf("UnmapDevice.TearDownDevice failed for volume %q : kubernetes.io/csi: blockMapper.unstageVolumeForBlock failed: %w", spec, rpcError(err))
			}
		}
		if mounted, _ := isMountPoint(p.staging); mounted {
			return fmt.Errorf("UnmapDevice.TearDownDevice failed for volume %q : kubernetes.io/csi: %s is still mounted after NodeUnstageVolume", spec, p.staging)
		}
		if err := os.RemoveAll(p.staging); err != nil {
			return err
		}
	}
	if err := os.Remove(p.publishDir); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("UnmapDevice failed for volume %q : failed to remove publish directory [%s]: %v", spec, p.publishDir, err)
	}
	// dev/ holds no bind (deviceRefs): only empty files and directories
	// are left besides data/.
	if err := os.RemoveAll(p.globalMap); err != nil {
		return fmt.Errorf("UnmapDevice.RemoveMapPath failed for volume %q : %v", spec, err)
	}
	return os.RemoveAll(p.volDir)
}

// unmapLocal tears down the pod's map of a local block PV, and the
// volume's directory when no pod maps it any more.
func (m *Mounter) unmapLocal(podDir, spec string) error {
	p := m.localBlockPaths(spec)
	if err := m.unmapBlockVolume(p, podDir); err != nil {
		return fmt.Errorf("UnmapVolume.UnmapBlockVolume failed for volume %q : %w", spec, err)
	}
	if len(m.deviceRefs(p.globalMap, "")) == 0 {
		if err := os.RemoveAll(p.globalMap); err != nil {
			return fmt.Errorf("UnmapDevice.RemoveMapPath failed for volume %q : %v", spec, err)
		}
	}
	return removeLink(p, podDir, spec)
}

// tearDownBlock unmaps every block volume of the pod in podDir, then
// removes its volumeDevices directory.
func (m *Mounter) tearDownBlock(ctx context.Context, podDir string) error {
	var errs []error
	for _, spec := range m.podBlockVolumes(podDir) {
		if err := m.unmapCSI(ctx, podDir, spec); err != nil {
			errs = append(errs, err)
		}
	}
	uid := filepath.Base(podDir)
	localLinks, _ := os.ReadDir(filepath.Join(podDir, volumeDevicesDir, localPluginDir))
	locals := map[string]bool{}
	for _, e := range localLinks {
		locals[e.Name()] = true
	}
	binds, _ := filepath.Glob(filepath.Join(m.RootDir, "plugins", localPluginDir, volumeDevicesDir, "*", uid))
	for _, b := range binds {
		locals[filepath.Base(filepath.Dir(b))] = true
	}
	for spec := range locals {
		if err := m.unmapLocal(podDir, spec); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	for _, dir := range []string{filepath.Join(podDir, volumeDevicesDir, podPluginDir), filepath.Join(podDir, volumeDevicesDir, localPluginDir), filepath.Join(podDir, volumeDevicesDir)} {
		if err := os.Remove(dir); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	}
	return nil
}
