package csihostpath

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"log"
	"os"
	"path/filepath"
	"slices"
	"strings"

	csipb "github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// AttachmentKey is the publish context key of an attach-enabled driver's
// ControllerPublishVolume: the attachment's ID, which NodeStageVolume and
// NodePublishVolume must be given back (through the VolumeAttachment's
// status.attachmentMetadata, which external-attacher writes and the node
// agent reads), as a disk driver's node side needs the device path its
// controller's attach returned.
const AttachmentKey = "hostpath.csi.test/attachment"

// Attachments (EnableAttach): the controller's ControllerPublishVolume
// "attaches" a volume to a node by writing a record,
// <DataDir>/attachments/<volume>/<node>, holding a new attachment ID, and
// returns the ID as the publish context; ControllerUnpublishVolume removes
// the record. The node side refuses to stage or publish a volume whose
// record for its node is not there or holds another ID than the publish
// context's (the volume is not attached here), and while the volume is
// staged it keeps a marker, <record>.staged, so that the controller
// refuses to detach a volume still staged on the node (a real disk
// detached under a mounted filesystem loses writes; the node agent must
// unstage before the attach/detach controller detaches). The controller
// and the node plugin share the data directory (a directory of the node's
// host), as the host-path driver's do.

func (d *Driver) attachmentRecord(volume, node string) string {
	return filepath.Join(d.DataDir, "attachments", volume, node)
}

// ControllerPublishVolume attaches the volume to the node: idempotent (an
// existing record's ID is returned again).
func (d *Driver) ControllerPublishVolume(_ context.Context, r *csipb.ControllerPublishVolumeRequest) (*csipb.ControllerPublishVolumeResponse, error) {
	if !d.EnableAttach {
		return nil, status.Error(codes.Unimplemented, "ControllerPublishVolume: the driver runs without -enable-attach")
	}
	if r.VolumeId == "" || r.NodeId == "" || r.VolumeCapability == nil {
		return nil, status.Error(codes.InvalidArgument, "volume ID, node ID and capability are required")
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if _, err := os.Stat(d.volumeDir(r.VolumeId)); err != nil {
		return nil, status.Errorf(codes.NotFound, "volume %s: %v", r.VolumeId, err)
	}
	rec := d.attachmentRecord(r.VolumeId, r.NodeId)
	if b, err := os.ReadFile(rec); err == nil {
		log.Printf("volume %s is attached to node %s already (attachment %s)", r.VolumeId, r.NodeId, b)
		return &csipb.ControllerPublishVolumeResponse{PublishContext: map[string]string{AttachmentKey: string(b)}}, nil
	}
	var id [8]byte
	if _, err := rand.Read(id[:]); err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	aid := hex.EncodeToString(id[:])
	if err := os.MkdirAll(filepath.Dir(rec), 0o755); err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	if err := os.WriteFile(rec+".tmp", []byte(aid), 0o644); err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	if err := os.Rename(rec+".tmp", rec); err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	log.Printf("attached volume %s to node %s (attachment %s, readonly %v)", r.VolumeId, r.NodeId, aid, r.Readonly)
	return &csipb.ControllerPublishVolumeResponse{PublishContext: map[string]string{AttachmentKey: aid}}, nil
}

// ControllerUnpublishVolume detaches the volume from the node: refused
// (FailedPrecondition) while the node has it staged; a volume not attached
// there is detached already.
func (d *Driver) ControllerUnpublishVolume(_ context.Context, r *csipb.ControllerUnpublishVolumeRequest) (*csipb.ControllerUnpublishVolumeResponse, error) {
	if !d.EnableAttach {
		return nil, status.Error(codes.Unimplemented, "ControllerUnpublishVolume: the driver runs without -enable-attach")
	}
	if r.VolumeId == "" || r.NodeId == "" {
		return nil, status.Error(codes.InvalidArgument, "volume ID and node ID are required")
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	rec := d.attachmentRecord(r.VolumeId, r.NodeId)
	if _, err := os.Stat(rec + ".staged"); err == nil {
		log.Printf("refused to detach volume %s from node %s: it is staged there", r.VolumeId, r.NodeId)
		return nil, status.Errorf(codes.FailedPrecondition, "volume %s is still staged on node %s", r.VolumeId, r.NodeId)
	}
	if err := os.Remove(rec); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, status.Error(codes.Internal, err.Error())
	}
	_ = os.Remove(filepath.Dir(rec)) // the volume's last attachment
	log.Printf("detached volume %s from node %s", r.VolumeId, r.NodeId)
	return &csipb.ControllerUnpublishVolumeResponse{}, nil
}

// checkAttached is the node side's check (EnableAttach, persistent
// volumes): the publish context's attachment is the volume's record for
// this node.
func (d *Driver) checkAttached(volume string, publishContext map[string]string) error {
	if !d.EnableAttach {
		return nil
	}
	aid, ok := publishContext[AttachmentKey]
	if !ok {
		return status.Errorf(codes.InvalidArgument, "volume %s: no %s in the publish context %v (not attached?)", volume, AttachmentKey, publishContext)
	}
	b, err := os.ReadFile(d.attachmentRecord(volume, d.NodeID))
	if err != nil || strings.TrimSpace(string(b)) != aid {
		return status.Errorf(codes.FailedPrecondition, "volume %s is not attached to node %s as attachment %s (record %q, %v)", volume, d.NodeID, aid, b, err)
	}
	return nil
}

// markStaged records (staged) or removes the marker that the volume is
// staged on this node (EnableAttach).
func (d *Driver) markStaged(volume string, staged bool) error {
	if !d.EnableAttach {
		return nil
	}
	m := d.attachmentRecord(volume, d.NodeID) + ".staged"
	if !staged {
		if err := os.Remove(m); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
		return nil
	}
	return os.WriteFile(m, nil, 0o644)
}

// checkInUse logs, when the driver runs with NodeVolumesInUse
// (-check-in-use), whether the Node's status.volumesInUse listed the
// persistent volume when call (NodeStageVolume, NodePublishVolume) came:
// kubelet mounts an attachable volume only once a node status write has
// listed it, so that the attach/detach controller does not detach it
// under the mount. The read is the API server's own (a GET), made after
// the call arrived, so a volume the node agent reported before calling is
// in it.
func (d *Driver) checkInUse(call, volume string) {
	if d.NodeVolumesInUse == nil {
		return
	}
	unique := "kubernetes.io/csi/" + d.Name + "^" + volume
	inUse, err := d.NodeVolumesInUse()
	switch {
	case err != nil:
		log.Printf("%s of %s: cannot read the Node's volumesInUse: %v", call, volume, err)
	case slices.Contains(inUse, unique):
		log.Printf("%s of %s: in the Node's volumesInUse", call, volume)
	default:
		log.Printf("%s of %s: NOT in the Node's volumesInUse %v", call, volume, inUse)
	}
}
