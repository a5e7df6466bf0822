// Package csi is the node side of the Container Storage Interface, with
// kubelet's contract (pkg/kubelet/pluginmanager and pkg/volume/csi):
//
//   - Registry watches <rootDir>/plugins_registry (fsnotify, plus a
//     rescan every second as kubelet's plugin manager reconciler does) for
//     the registration sockets of node-driver-registrar and speaks
//     kubelet's plugin-registration API (k8s.io/kubelet
//     pkg/apis/pluginregistration/v1) to them: GetInfo, validation (type
//     CSIPlugin, a 1.x version), NodeGetInfo on the driver, then
//     NotifyRegistrationStatus. A socket that goes away deregisters its
//     driver; a socket replaced by a new one registers again.
//   - NodeInfo keeps the CSINode object of the node (driver name, node ID,
//     topology keys, allocatable volume count) and the Node's topology
//     labels and csi.volume.kubernetes.io/nodeid annotation, as kubelet's
//     nodeinfomanager does.
//   - Mounter sets up persistentVolumeClaim volumes (bound PV with a CSI
//     source, or a hostPath PV) and inline csi volumes for a pod:
//     VolumeAttachment wait when the CSIDriver says attachRequired,
//     NodeStageVolume once per volume at kubelet's global path, then
//     NodePublishVolume at kubelet's pod path, and the reverse on teardown
//     (unstage when the last pod leaves). What it mounted is described on
//     disk (kubelet's vol_data.json files), so teardown works after an
//     agent restart too, and a publish target that is still mounted is not
//     touched again (a restarted agent neither re-publishes nor unmounts the
//     volumes of running pods).
//
// Concurrency: every exported method is safe for concurrent use. Mounter
// serialises the operations on one volume (driver and volume handle), not
// across volumes, so a slow driver only holds the pods that use it.
package csi
