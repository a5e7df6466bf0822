// Package csihostpath is a small CSI node plugin and registrar for tests,
// in the shape of the CSI host-path driver (kubernetes-csi
// csi-driver-host-path) and node-driver-registrar, whose Go modules the
// module proxy here does not serve: a volume is a directory under a data
// directory, staged with a bind mount at the staging path and published
// with a bind mount (read-only when asked) at the target path; inline
// (ephemeral) volumes get a directory of their own, removed at unpublish.
// The registrar serves kubelet's plugin-registration API on a socket in
// <rootDir>/plugins_registry and, as node-driver-registrar, exits when the
// node agent reports that the registration failed.
//
// It is the driver side of the e2e test of package csi; cmd/csihostpath
// runs it (as a pod with a Bidirectional mount of the agent's rootDir).
package csihostpath

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"sync"

	csipb "github.com/container-storage-interface/spec/lib/go/csi"
	"golang.org/x/sys/unix"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/nodeagent/nodeagent/internal/mountinfo"
)

// EphemeralKey is the volume context key kubelet sets for inline volumes
// of drivers with podInfoOnMount.
const EphemeralKey = "csi.storage.k8s.io/ephemeral"

// Driver is the CSI Identity and Node service.
type Driver struct {
	csipb.UnimplementedIdentityServer
	csipb.UnimplementedNodeServer

	Name, NodeID, DataDir string
	TopologyKey           string // its value is NodeID
	MaxVolumes            int64

	mu sync.Mutex // serialises the mount operations
}

func (d *Driver) GetPluginInfo(context.Context, *csipb.GetPluginInfoRequest) (*csipb.GetPluginInfoResponse, error) {
	return &csipb.GetPluginInfoResponse{Name: d.Name, VendorVersion: "test"}, nil
}

func (d *Driver) GetPluginCapabilities(context.Context, *csipb.GetPluginCapabilitiesRequest) (*csipb.GetPluginCapabilitiesResponse, error) {
	return &csipb.GetPluginCapabilitiesResponse{}, nil
}

func (d *Driver) Probe(context.Context, *csipb.ProbeRequest) (*csipb.ProbeResponse, error) {
	return &csipb.ProbeResponse{}, nil
}

func (d *Driver) NodeGetInfo(context.Context, *csipb.NodeGetInfoRequest) (*csipb.NodeGetInfoResponse, error) {
	r := &csipb.NodeGetInfoResponse{NodeId: d.NodeID, MaxVolumesPerNode: d.MaxVolumes}
	if d.TopologyKey != "" {
		r.AccessibleTopology = &csipb.Topology{Segments: map[string]string{d.TopologyKey: d.NodeID}}
	}
	return r, nil
}

func (d *Driver) NodeGetCapabilities(context.Context, *csipb.NodeGetCapabilitiesRequest) (*csipb.NodeGetCapabilitiesResponse, error) {
	return &csipb.NodeGetCapabilitiesResponse{Capabilities: []*csipb.NodeServiceCapability{{
		Type: &csipb.NodeServiceCapability_Rpc{Rpc: &csipb.NodeServiceCapability_RPC{Type: csipb.NodeServiceCapability_RPC_STAGE_UNSTAGE_VOLUME}},
	}}}, nil
}

func (d *Driver) volumeDir(id string) string    { return filepath.Join(d.DataDir, "volumes", id) }
func (d *Driver) ephemeralDir(id string) string { return filepath.Join(d.DataDir, "ephemeral", id) }

func (d *Driver) NodeStageVolume(_ context.Context, r *csipb.NodeStageVolumeRequest) (*csipb.NodeStageVolumeResponse, error) {
	if r.VolumeId == "" || r.StagingTargetPath == "" || r.VolumeCapability == nil {
		return nil, status.Error(codes.InvalidArgument, "volume ID, staging target path and capability are required")
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	src := d.volumeDir(r.VolumeId)
	if err := os.MkdirAll(src, 0o777); err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	if err := bind(src, r.StagingTargetPath, false); err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	log.Printf("staged %s at %s", r.VolumeId, r.StagingTargetPath)
	return &csipb.NodeStageVolumeResponse{}, nil
}

func (d *Driver) NodeUnstageVolume(_ context.Context, r *csipb.NodeUnstageVolumeRequest) (*csipb.NodeUnstageVolumeResponse, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := unmount(r.StagingTargetPath); err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	log.Printf("unstaged %s from %s", r.VolumeId, r.StagingTargetPath)
	return &csipb.NodeUnstageVolumeResponse{}, nil
}

func (d *Driver) NodePublishVolume(_ context.Context, r *csipb.NodePublishVolumeRequest) (*csipb.NodePublishVolumeResponse, error) {
	if r.VolumeId == "" || r.TargetPath == "" || r.VolumeCapability == nil {
		return nil, status.Error(codes.InvalidArgument, "volume ID, target path and capability are required")
	}
	d.mu.Lock()
	defer d.mu.Unlock()
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
	if err := bind(src, r.TargetPath, r.Readonly); err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	log.Printf("published %s at %s (readonly %v)", r.VolumeId, r.TargetPath, r.Readonly)
	return &csipb.NodePublishVolumeResponse{}, nil
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

// bind mounts src on target (created), read-only when ro; a target that
// is a mount point already is left as it is (CSI calls are idempotent).
func bind(src, target string, ro bool) error {
	if err := os.MkdirAll(target, 0o750); err != nil {
		return err
	}
	if mounted(target) {
		return nil
	}
	if err := unix.Mount(src, target, "", unix.MS_BIND, ""); err != nil {
		return fmt.Errorf("bind %s on %s: %w", src, target, err)
	}
	if ro {
		if err := unix.Mount("", target, "", unix.MS_BIND|unix.MS_REMOUNT|unix.MS_RDONLY, ""); err != nil {
			_ = unix.Unmount(target, 0)
			return fmt.Errorf("remount %s read-only: %w", target, err)
		}
	}
	return nil
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
