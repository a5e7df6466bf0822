// Package csihostpath is a small CSI node plugin and registrar for tests,
// in the shape of the CSI host-path driver (kubernetes-csi
// csi-driver-host-path) and node-driver-registrar, whose Go modules the
// module proxy here does not serve (docs/storage.md): a volume is a directory under a data
// directory, staged with a bind mount at the staging path and published
// with a bind mount (read-only when asked) at the target path; inline
// (ephemeral) volumes get a directory of their own, removed at unpublish.
// A block volume (a Block access type) is a file of the requested size,
// as the host-path driver's: staged by attaching a loop device over it
// (detached at unstage), published by bind-mounting the loop device on
// the target file.
// A filesystem volume with an fsType (ext3, ext4) is a file too, formatted
// with mke2fs at its first staging and mounted with that type; mount
// options are applied to every mount the driver makes (fs.go).
// With EnableTopology (-enable-topology, the host-path driver's flag, on
// by default) it has VOLUME_ACCESSIBILITY_CONSTRAINTS: its node's segment
// (TopologyKey, the host-path driver's topology.hostpath.csi/node) in
// NodeGetInfo and on every volume it creates; MaxVolumes
// (-maxvolumespernode, the host-path driver's flag) is NodeGetInfo's
// volume limit.
// As the host-path driver it serves the Controller service too
// (CreateVolume makes the volume's directory, DeleteVolume removes it), for
// kubernetes-csi's external-provisioner to call (hack/csi-sidecars runs
// it beside the driver's controller, cmd/csihostpath -mode=controller),
// and reports
// volume stats (NodeGetVolumeStats: the statfs of the volume's filesystem,
// its used bytes and inodes counted in the volume's directory; a block
// volume's size), and expands volumes (ControllerExpandVolume, for
// kubernetes-csi's external-resizer, and NodeExpandVolume).
// With EnableAttach (-enable-attach, the host-path driver's flag) it
// attaches: ControllerPublishVolume and ControllerUnpublishVolume, for
// kubernetes-csi's external-attacher, keep a record of which node a volume
// is attached to and the publish context carries the attachment's ID,
// which the node side requires in NodeStageVolume and NodePublishVolume
// (attach.go). With NodeVolumesInUse (-check-in-use) the node side reads
// its Node at each NodeStageVolume and NodePublishVolume of a persistent
// volume and logs whether status.volumesInUse listed the volume, as
// kubelet guarantees for an attachable one (checkInUse).
// With PublishRecord (-record-publish) every NodePublishVolume is
// appended to a file as a JSON line (PublishRecord: volume ID, target
// path, volume context), for tests to see what the node agent passed
// (pod information, service account tokens) and how often (a driver with
// requiresRepublish is called again for a published volume).
// The registrar serves kubelet's plugin-registration API on a socket in
// <rootDir>/plugins_registry and, as node-driver-registrar, exits when the
// node agent reports that the registration failed.
//
// It is the driver side of the e2e test of package csi; cmd/csihostpath
// runs it (as a pod with a Bidirectional mount of the agent's rootDir).
package csihostpath

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"os"
	"path/filepath"
	"sync"

	csipb "github.com/container-storage-interface/spec/lib/go/csi"
	"golang.org/x/sys/unix"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/nodeagent/nodeagent/internal/loopdev"
	"github.com/nodeagent/nodeagent/internal/mountinfo"
)

// EphemeralKey is the volume context key kubelet sets for inline volumes
// of drivers with podInfoOnMount.
const EphemeralKey = "csi.storage.k8s.io/ephemeral"

// Driver is the CSI Identity and Node service.
type Driver struct {
	csipb.UnimplementedIdentityServer
	csipb.UnimplementedNodeServer
	csipb.UnimplementedControllerServer

	Name, NodeID, DataDir string
	// EnableTopology: the plugin capability VOLUME_ACCESSIBILITY_CONSTRAINTS,
	// NodeGetInfo's accessible topology and CreateVolume's, one segment
	// TopologyKey=NodeID, as the host-path driver's -enable-topology.
	EnableTopology bool
	MaxVolumes     int64  // NodeGetInfo's max_volumes_per_node (0: no limit), -maxvolumespernode
	EnableAttach   bool   // PUBLISH_UNPUBLISH_VOLUME (attach.go)
	PublishRecord  string // a file each NodePublishVolume is appended to; "": none
	// NodeVolumesInUse reads the Node's status.volumesInUse; set, every
	// NodeStageVolume and NodePublishVolume of a persistent volume logs
	// whether the volume was in it (checkInUse, attach.go). nil: not read.
	NodeVolumesInUse func() ([]string, error)

	mu sync.Mutex // serialises the mount operations
}

func (d *Driver) GetPluginInfo(context.Context, *csipb.GetPluginInfoRequest) (*csipb.GetPluginInfoResponse, error) {
	return &csipb.GetPluginInfoResponse{Name: d.Name, VendorVersion: "test"}, nil
}

// TopologyKey is the host-path driver's topology key: its segment's value
// is the node's ID.
const TopologyKey = "topology.hostpath.csi/node"

func (d *Driver) GetPluginCapabilities(context.Context, *csipb.GetPluginCapabilitiesRequest) (*csipb.GetPluginCapabilitiesResponse, error) {
	caps := []*csipb.PluginCapability{{
		Type: &csipb.PluginCapability_Service_{Service: &csipb.PluginCapability_Service{Type: csipb.PluginCapability_Service_CONTROLLER_SERVICE}},
	}, {
		// Expansion while the volume is published (and so, offline too).
		Type: &csipb.PluginCapability_VolumeExpansion_{VolumeExpansion: &csipb.PluginCapability_VolumeExpansion{Type: csipb.PluginCapability_VolumeExpansion_ONLINE}},
	}}
	if d.EnableTopology {
		caps = append(caps, &csipb.PluginCapability{
			Type: &csipb.PluginCapability_Service_{Service: &csipb.PluginCapability_Service{Type: csipb.PluginCapability_Service_VOLUME_ACCESSIBILITY_CONSTRAINTS}},
		})
	}
	return &csipb.GetPluginCapabilitiesResponse{Capabilities: caps}, nil
}

// topology is the driver's accessible topology (EnableTopology): its node.
func (d *Driver) topology() []*csipb.Topology {
	if !d.EnableTopology {
		return nil
	}
	return []*csipb.Topology{{Segments: map[string]string{TopologyKey: d.NodeID}}}
}

// accessible reports whether the driver's node satisfies the requisite
// topologies of a CreateVolumeRequest (none: any node does).
func (d *Driver) accessible(req *csipb.TopologyRequirement) bool {
	if !d.EnableTopology || len(req.GetRequisite()) == 0 {
		return true
	}
	for _, t := range req.GetRequisite() {
		if v, ok := t.Segments[TopologyKey]; ok && v == d.NodeID {
			return true
		}
	}
	return false
}

func (d *Driver) ControllerGetCapabilities(context.Context, *csipb.ControllerGetCapabilitiesRequest) (*csipb.ControllerGetCapabilitiesResponse, error) {
	var caps []*csipb.ControllerServiceCapability
	rpcs := []csipb.ControllerServiceCapability_RPC_Type{
		csipb.ControllerServiceCapability_RPC_CREATE_DELETE_VOLUME,
		csipb.ControllerServiceCapability_RPC_EXPAND_VOLUME,
	}
	if d.EnableAttach {
		rpcs = append(rpcs, csipb.ControllerServiceCapability_RPC_PUBLISH_UNPUBLISH_VOLUME)
	}
	for _, c := range rpcs {
		caps = append(caps, &csipb.ControllerServiceCapability{Type: &csipb.ControllerServiceCapability_Rpc{Rpc: &csipb.ControllerServiceCapability_RPC{Type: c}}})
	}
	return &csipb.ControllerGetCapabilitiesResponse{Capabilities: caps}, nil
}

// ControllerExpandVolume grows a volume, as the host-path driver's: a
// filesystem volume (a directory of the data directory's filesystem) has
// no size of its own to grow; a block volume's file is extended to the
// required size (sparse). Either way the node must expand it too
// (NodeExpandVolume: a block volume's loop device learns its new size),
// as the host-path driver answers.
func (d *Driver) ControllerExpandVolume(_ context.Context, r *csipb.ControllerExpandVolumeRequest) (*csipb.ControllerExpandVolumeResponse, error) {
	if r.VolumeId == "" || r.CapacityRange == nil {
		return nil, status.Error(codes.InvalidArgument, "volume ID and capacity range are required")
	}
	size := r.CapacityRange.GetRequiredBytes()
	if l := r.CapacityRange.GetLimitBytes(); l > 0 && size > l {
		return nil, status.Errorf(codes.OutOfRange, "required %d bytes exceed the limit of %d", size, l)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	fi, err := os.Stat(d.volumeDir(r.VolumeId))
	if err != nil {
		return nil, status.Errorf(codes.NotFound, "volume %s: %v", r.VolumeId, err)
	}
	if fi.Mode().IsRegular() && r.GetVolumeCapability().GetMount() != nil {
		// A formatted volume (fs.go): growing it would need resize2fs,
		// which the driver's image does not have.
		return nil, status.Errorf(codes.InvalidArgument, "volume %s has an fsType of its own (a formatted file): the driver does not expand those", r.VolumeId)
	}
	if fi.Mode().IsRegular() {
		if fi.Size() < size {
			if err := os.Truncate(d.volumeDir(r.VolumeId), size); err != nil {
				return nil, status.Error(codes.Internal, err.Error())
			}
		} else {
			size = fi.Size()
		}
	}
	log.Printf("controller-expanded volume %s to %d bytes", r.VolumeId, size)
	return &csipb.ControllerExpandVolumeResponse{CapacityBytes: size, NodeExpansionRequired: true}, nil
}

// CreateVolume makes the volume's directory, or for a block volume or one
// with an fsType its file (fs.go); the volume ID is the
// requested name (idempotent, as CSI wants: the provisioner retries with
// the same name). With EnableTopology the volume is accessible from the
// driver's node only, and a request whose requisite topologies do not
// include it is refused with RESOURCE_EXHAUSTED, as CSI specifies.
func (d *Driver) CreateVolume(_ context.Context, r *csipb.CreateVolumeRequest) (*csipb.CreateVolumeResponse, error) {
	if r.Name == "" || len(r.VolumeCapabilities) == 0 {
		return nil, status.Error(codes.InvalidArgument, "name and volume capabilities are required")
	}
	block := false
	for _, c := range r.VolumeCapabilities {
		block = block || c.GetBlock() != nil
	}
	fsType, err := fsTypeOf(r.VolumeCapabilities)
	if err != nil {
		return nil, err
	}
	if !d.accessible(r.AccessibilityRequirements) {
		return nil, status.Errorf(codes.ResourceExhausted, "volume %s: the driver's node %s is not among the requisite topologies %v", r.Name, d.NodeID, r.AccessibilityRequirements.GetRequisite())
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	size := r.GetCapacityRange().GetRequiredBytes()
	if block || fsType != "" {
		if fsType != "" && size < minFormattedSize {
			size = minFormattedSize
		}
		if l := r.GetCapacityRange().GetLimitBytes(); l > 0 && size > l {
			return nil, status.Errorf(codes.OutOfRange, "volume %s: %d bytes exceed the limit of %d", r.Name, size, l)
		}
		if err := makeBlockFile(d.volumeDir(r.Name), size); err != nil {
			return nil, err
		}
		if fi, err := os.Stat(d.volumeDir(r.Name)); err == nil {
			size = fi.Size()
		}
	} else if fi, err := os.Stat(d.volumeDir(r.Name)); err == nil && !fi.IsDir() {
		return nil, status.Errorf(codes.AlreadyExists, "volume %s exists as a block volume", r.Name)
	} else if err := os.MkdirAll(d.volumeDir(r.Name), 0o777); err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	log.Printf("created volume %s (%d bytes, fsType %q, block %v)", r.Name, size, fsType, block)
	return &csipb.CreateVolumeResponse{Volume: &csipb.Volume{
		VolumeId: r.Name, CapacityBytes: size, VolumeContext: r.Parameters,
		AccessibleTopology: d.topology(),
	}}, nil
}

// DeleteVolume removes the volume's directory (a volume that is not there
// is deleted already).
func (d *Driver) DeleteVolume(_ context.Context, r *csipb.DeleteVolumeRequest) (*csipb.DeleteVolumeResponse, error) {
	if r.VolumeId == "" {
		return nil, status.Error(codes.InvalidArgument, "volume ID is required")
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := os.RemoveAll(d.volumeDir(r.VolumeId)); err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	log.Printf("deleted volume %s", r.VolumeId)
	return &csipb.DeleteVolumeResponse{}, nil
}

func (d *Driver) Probe(context.Context, *csipb.ProbeRequest) (*csipb.ProbeResponse, error) {
	return &csipb.ProbeResponse{}, nil
}

func (d *Driver) NodeGetInfo(context.Context, *csipb.NodeGetInfoRequest) (*csipb.NodeGetInfoResponse, error) {
	r := &csipb.NodeGetInfoResponse{NodeId: d.NodeID, MaxVolumesPerNode: d.MaxVolumes}
	if t := d.topology(); t != nil {
		r.AccessibleTopology = t[0]
	}
	return r, nil
}

func (d *Driver) NodeGetCapabilities(context.Context, *csipb.NodeGetCapabilitiesRequest) (*csipb.NodeGetCapabilitiesResponse, error) {
	var caps []*csipb.NodeServiceCapability
	for _, c := range []csipb.NodeServiceCapability_RPC_Type{
		csipb.NodeServiceCapability_RPC_STAGE_UNSTAGE_VOLUME,
		csipb.NodeServiceCapability_RPC_GET_VOLUME_STATS,
		csipb.NodeServiceCapability_RPC_VOLUME_CONDITION,
		csipb.NodeServiceCapability_RPC_EXPAND_VOLUME,
	} {
		caps = append(caps, &csipb.NodeServiceCapability{Type: &csipb.NodeServiceCapability_Rpc{Rpc: &csipb.NodeServiceCapability_RPC{Type: c}}})
	}
	return &csipb.NodeGetCapabilitiesResponse{Capabilities: caps}, nil
}

// NodeGetVolumeStats reports the volume's filesystem (statfs of the path:
// total and available bytes and inodes) and what the volume's directory
// holds (used bytes and inodes, as the host-path driver counts them), and
// the volume's condition: abnormal when the path is not a mount point.
// For a block volume (the path is a device: kubelet asks for its bind of
// the device) it reports the device's size as the total bytes, nothing
// else: a raw device has no free space or inodes to count.
func (d *Driver) NodeGetVolumeStats(_ context.Context, r *csipb.NodeGetVolumeStatsRequest) (*csipb.NodeGetVolumeStatsResponse, error) {
	if r.VolumeId == "" || r.VolumePath == "" {
		return nil, status.Error(codes.InvalidArgument, "volume ID and volume path are required")
	}
	if fi, err := os.Stat(r.VolumePath); err == nil && fi.Mode()&os.ModeDevice != 0 {
		return blockStats(r.VolumePath)
	}
	var st unix.Statfs_t
	if err := unix.Statfs(r.VolumePath, &st); err != nil {
		if errors.Is(err, unix.ENOENT) {
			return nil, status.Errorf(codes.NotFound, "volume path %s: %v", r.VolumePath, err)
		}
		return nil, status.Error(codes.Internal, err.Error())
	}
	var used, inodes int64
	_ = filepath.WalkDir(r.VolumePath, func(_ string, e os.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		inodes++
		if fi, err := e.Info(); err == nil && !fi.IsDir() {
			used += fi.Size()
		}
		return nil
	})
	cond := &csipb.VolumeCondition{Message: "volume is mounted"}
	if !mounted(r.VolumePath) {
		cond = &csipb.VolumeCondition{Abnormal: true, Message: "volume path is not mounted"}
	}
	bs := int64(st.Bsize)
	return &csipb.NodeGetVolumeStatsResponse{Usage: []*csipb.VolumeUsage{
		{Unit: csipb.VolumeUsage_BYTES, Total: int64(st.Blocks) * bs, Available: int64(st.Bavail) * bs, Used: used},
		{Unit: csipb.VolumeUsage_INODES, Total: int64(st.Files), Available: int64(st.Ffree), Used: inodes},
	}, VolumeCondition: cond}, nil
}

// blockStats are a block volume's stats: the size of the device at path.
func blockStats(path string) (*csipb.NodeGetVolumeStatsResponse, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, status.Errorf(codes.NotFound, "volume path %s: %v", path, err)
	}
	defer f.Close()
	size, err := f.Seek(0, io.SeekEnd)
	if err != nil {
		return nil, status.Errorf(codes.Internal, "size of %s: %v", path, err)
	}
	return &csipb.NodeGetVolumeStatsResponse{
		Usage:           []*csipb.VolumeUsage{{Unit: csipb.VolumeUsage_BYTES, Total: size}},
		VolumeCondition: &csipb.VolumeCondition{Message: "device is mapped"},
	}, nil
}

func (d *Driver) volumeDir(id string) string    { return filepath.Join(d.DataDir, "volumes", id) }
func (d *Driver) ephemeralDir(id string) string { return filepath.Join(d.DataDir, "ephemeral", id) }

func (d *Driver) NodeStageVolume(_ context.Context, r *csipb.NodeStageVolumeRequest) (*csipb.NodeStageVolumeResponse, error) {
	if r.VolumeId == "" || r.StagingTargetPath == "" || r.VolumeCapability == nil {
		return nil, status.Error(codes.InvalidArgument, "volume ID, staging target path and capability are required")
	}
	d.checkInUse("NodeStageVolume", r.VolumeId)
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.checkAttached(r.VolumeId, r.PublishContext); err != nil {
		return nil, err
	}
	src := d.volumeDir(r.VolumeId)
	if r.VolumeCapability.GetBlock() != nil {
		dev, err := d.attachBlock(r.VolumeId)
		if err != nil {
			return nil, err
		}
		if err := d.markStaged(r.VolumeId, true); err != nil {
			return nil, status.Error(codes.Internal, err.Error())
		}
		log.Printf("staged block volume %s on %s (publish context %v)", r.VolumeId, dev, r.PublishContext)
		return &csipb.NodeStageVolumeResponse{}, nil
	}
	m := r.VolumeCapability.GetMount()
	if err := checkFsType(m.GetFsType()); err != nil {
		return nil, err
	}
	if m.GetFsType() != "" {
		if fi, err := os.Stat(src); err != nil || !fi.Mode().IsRegular() {
			return nil, status.Errorf(codes.InvalidArgument, "volume %s was not made with an fsType (fsType %q asked for now): %v", r.VolumeId, m.GetFsType(), err)
		}
		if err := d.stageFormatted(r.VolumeId, m.GetFsType(), r.StagingTargetPath, m.GetMountFlags()); err != nil {
			return nil, err
		}
		if err := d.markStaged(r.VolumeId, true); err != nil {
			return nil, status.Error(codes.Internal, err.Error())
		}
		log.Printf("staged %s (%s, options %q) at %s (publish context %v)", r.VolumeId, m.GetFsType(), m.GetMountFlags(), r.StagingTargetPath, r.PublishContext)
		return &csipb.NodeStageVolumeResponse{}, nil
	}
	if fi, err := os.Stat(src); err == nil && !fi.IsDir() {
		return nil, status.Errorf(codes.InvalidArgument, "volume %s is a block volume or has an fsType (none asked for)", r.VolumeId)
	}
	if err := os.MkdirAll(src, 0o777); err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	if err := bindOpts(src, r.StagingTargetPath, false, m.GetMountFlags()); err != nil {
		return nil, errStatus(err)
	}
	if err := d.markStaged(r.VolumeId, true); err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	log.Printf("staged %s at %s (publish context %v)", r.VolumeId, r.StagingTargetPath, r.PublishContext)
	return &csipb.NodeStageVolumeResponse{}, nil
}

func (d *Driver) NodeUnstageVolume(_ context.Context, r *csipb.NodeUnstageVolumeRequest) (*csipb.NodeUnstageVolumeResponse, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := unmount(r.StagingTargetPath); err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	// A block or formatted volume: its loop device goes.
	if err := d.detachFile(r.VolumeId); err != nil {
		return nil, err
	}
	if err := d.markStaged(r.VolumeId, false); err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	log.Printf("unstaged %s from %s", r.VolumeId, r.StagingTargetPath)
	return &csipb.NodeUnstageVolumeResponse{}, nil
}

func (d *Driver) NodePublishVolume(_ context.Context, r *csipb.NodePublishVolumeRequest) (*csipb.NodePublishVolumeResponse, error) {
	if r.VolumeId == "" || r.TargetPath == "" || r.VolumeCapability == nil {
		return nil, status.Error(codes.InvalidArgument, "volume ID, target path and capability are required")
	}
	if r.VolumeContext[EphemeralKey] != "true" {
		d.checkInUse("NodePublishVolume", r.VolumeId)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.recordPublish(r); err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	if r.VolumeContext[EphemeralKey] != "true" {
		// An inline volume is not attached (kubelet does not attach
		// them); a persistent one must be, here.
		if err := d.checkAttached(r.VolumeId, r.PublishContext); err != nil {
			return nil, err
		}
	}
	if r.VolumeCapability.GetBlock() != nil {
		return d.publishBlock(r)
	}
	src := r.StagingTargetPath
	switch {
	case r.VolumeContext[EphemeralKey] == "true":
		src = d.ephemeralDir(r.VolumeId)
		if err := os.MkdirAll(src, 0o777); err != nil {
			return nil, status.Error(codes.Internal, err.Error())
		}
	case src == "":
		return nil, status.Error(codes.FailedPrecondition, "the volume is not staged")
	}
	if err := bindOpts(src, r.TargetPath, r.Readonly, r.VolumeCapability.GetMount().GetMountFlags()); err != nil {
		return nil, errStatus(err)
	}
	log.Printf("published %s at %s (readonly %v, options %q, publish context %v)", r.VolumeId, r.TargetPath, r.Readonly, r.VolumeCapability.GetMount().GetMountFlags(), r.PublishContext)
	return &csipb.NodePublishVolumeResponse{}, nil
}

// PublishRecord is one NodePublishVolume call, a line of the
// -record-publish file.
type PublishRecord struct {
	VolumeID      string            `json:"volumeID"`
	TargetPath    string            `json:"targetPath"`
	VolumeContext map[string]string `json:"volumeContext"`
}

func (d *Driver) recordPublish(r *csipb.NodePublishVolumeRequest) error {
	if d.PublishRecord == "" {
		return nil
	}
	b, err := json.Marshal(PublishRecord{VolumeID: r.VolumeId, TargetPath: r.TargetPath, VolumeContext: r.VolumeContext})
	if err != nil {
		return err
	}
	f, err := os.OpenFile(d.PublishRecord, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	if _, err := f.Write(append(b, '\n')); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func (d *Driver) NodeUnpublishVolume(_ context.Context, r *csipb.NodeUnpublishVolumeRequest) (*csipb.NodeUnpublishVolumeResponse, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := unmount(r.TargetPath); err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	if err := os.Remove(r.TargetPath); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, status.Error(codes.Internal, err.Error())
	}
	if err := os.RemoveAll(d.ephemeralDir(r.VolumeId)); err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	log.Printf("unpublished %s from %s", r.VolumeId, r.TargetPath)
	return &csipb.NodeUnpublishVolumeResponse{}, nil
}

// errStatus is err as a gRPC status: its own code if it has one, else
// Internal.
func errStatus(err error) error {
	if _, ok := status.FromError(err); ok {
		return err
	}
	return status.Error(codes.Internal, err.Error())
}

func unmount(target string) error {
	if !mounted(target) {
		return nil
	}
	if err := unix.Unmount(target, 0); err != nil {
		return fmt.Errorf("unmount %s: %w", target, err)
	}
	return nil
}

func mounted(p string) bool {
	ms, err := mountinfo.Read()
	if err != nil {
		return false
	}
	for _, m := range ms {
		if m.MountPoint == filepath.Clean(p) {
			return true
		}
	}
	return false
}

// NodeExpandVolume has nothing to grow (a volume is a directory of the
// data directory's filesystem, as the host-path driver's): it checks the
// volume is published at the path and reports the requested size. A
// block volume's path must be its device, as the host-path driver checks.
func (d *Driver) NodeExpandVolume(_ context.Context, r *csipb.NodeExpandVolumeRequest) (*csipb.NodeExpandVolumeResponse, error) {
	if r.VolumeId == "" || r.VolumePath == "" {
		return nil, status.Error(codes.InvalidArgument, "volume ID and volume path are required")
	}
	if r.GetVolumeCapability().GetBlock() != nil {
		fi, err := os.Stat(r.VolumePath)
		if err != nil {
			return nil, status.Errorf(codes.NotFound, "volume %s: %v", r.VolumeId, err)
		}
		if fi.Mode()&os.ModeDevice == 0 {
			return nil, status.Errorf(codes.InvalidArgument, "volume %s: %s is not a block device", r.VolumeId, r.VolumePath)
		}
		// The staged loop device over the volume's file takes the file's
		// new size (losetup --set-capacity).
		if dev, err := loopdev.Find(d.volumeDir(r.VolumeId)); err == nil {
			if err := setLoopCapacity(dev); err != nil {
				return nil, status.Errorf(codes.Internal, "volume %s: %v", r.VolumeId, err)
			}
		}
	} else if !mounted(r.VolumePath) {
		return nil, status.Errorf(codes.NotFound, "volume %s is not published at %s", r.VolumeId, r.VolumePath)
	}
	log.Printf("expanded %s at %s to %d bytes", r.VolumeId, r.VolumePath, r.GetCapacityRange().GetRequiredBytes())
	return &csipb.NodeExpandVolumeResponse{CapacityBytes: r.GetCapacityRange().GetRequiredBytes()}, nil
}

// setLoopCapacity makes the loop device dev re-read its backing file's
// size (LOOP_SET_CAPACITY).
func setLoopCapacity(dev string) error {
	f, err := os.OpenFile(dev, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := unix.IoctlSetInt(int(f.Fd()), unix.LOOP_SET_CAPACITY, 0); err != nil {
		return fmt.Errorf("LOOP_SET_CAPACITY on %s: %w", dev, err)
	}
	return nil
}

// minBlockSize is the size of a block volume created without a capacity.
const minBlockSize = 1 << 20

// makeBlockFile makes a block volume's backing file of size bytes
// (sparse); an existing one is kept (CreateVolume is idempotent).
func makeBlockFile(path string, size int64) error {
	if fi, err := os.Stat(path); err == nil {
		if fi.IsDir() {
			return status.Errorf(codes.AlreadyExists, "volume %s exists as a filesystem volume", filepath.Base(path))
		}
		return nil
	}
	if size < minBlockSize {
		size = minBlockSize
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o777); err != nil {
		return status.Error(codes.Internal, err.Error())
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR|os.O_EXCL, 0o600)
	if err != nil {
		return status.Error(codes.Internal, err.Error())
	}
	defer f.Close()
	if err := f.Truncate(size); err != nil {
		return status.Error(codes.Internal, err.Error())
	}
	return nil
}

// attachBlock returns the loop device over the block volume's file,
// attaching one when there is none.
func (d *Driver) attachBlock(id string) (string, error) {
	file := d.volumeDir(id)
	fi, err := os.Stat(file)
	if err != nil {
		return "", status.Errorf(codes.NotFound, "volume %s: %v", id, err)
	}
	if !fi.Mode().IsRegular() {
		return "", status.Errorf(codes.InvalidArgument, "volume %s is not a block volume", id)
	}
	dev, err := loopdev.Attach(file)
	if err != nil {
		return "", status.Error(codes.Internal, err.Error())
	}
	return dev, nil
}

// publishBlock binds the volume's loop device on the target file
// (read-only when asked); a target that is a device already is left.
func (d *Driver) publishBlock(r *csipb.NodePublishVolumeRequest) (*csipb.NodePublishVolumeResponse, error) {
	dev, err := d.attachBlock(r.VolumeId)
	if err != nil {
		return nil, err
	}
	if fi, err := os.Lstat(r.TargetPath); err == nil && fi.Mode()&os.ModeDevice != 0 {
		return &csipb.NodePublishVolumeResponse{}, nil
	}
	if err := os.MkdirAll(filepath.Dir(r.TargetPath), 0o750); err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	f, err := os.OpenFile(r.TargetPath, os.O_CREATE|os.O_RDWR, 0o640)
	if err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	f.Close()
	if err := unix.Mount(dev, r.TargetPath, "", unix.MS_BIND, ""); err != nil {
		return nil, status.Errorf(codes.Internal, "bind %s on %s: %v", dev, r.TargetPath, err)
	}
	if r.Readonly {
		if err := unix.Mount("", r.TargetPath, "", unix.MS_BIND|unix.MS_REMOUNT|unix.MS_RDONLY, ""); err != nil {
			_ = unix.Unmount(r.TargetPath, 0)
			return nil, status.Errorf(codes.Internal, "remount %s read-only: %v", r.TargetPath, err)
		}
	}
	log.Printf("published block volume %s (%s) at %s (readonly %v)", r.VolumeId, dev, r.TargetPath, r.Readonly)
	return &csipb.NodePublishVolumeResponse{}, nil
}
