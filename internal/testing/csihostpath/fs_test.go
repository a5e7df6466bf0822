package csihostpath

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	csipb "github.com/container-storage-interface/spec/lib/go/csi"
	"golang.org/x/sys/unix"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/nodeagent/nodeagent/internal/loopdev"
	"github.com/nodeagent/nodeagent/internal/mountinfo"
)

func mountCap(fsType string, flags ...string) *csipb.VolumeCapability {
	return &csipb.VolumeCapability{
		AccessType: &csipb.VolumeCapability_Mount{Mount: &csipb.VolumeCapability_MountVolume{FsType: fsType, MountFlags: flags}},
		AccessMode: &csipb.VolumeCapability_AccessMode{Mode: csipb.VolumeCapability_AccessMode_SINGLE_NODE_WRITER},
	}
}

// Mount options: flags for every mount, an ext filesystem's own options
// only for it, anything else refused.
func TestMountOptions(t *testing.T) {
	for _, c := range []struct {
		fsType  string
		options []string
		flags   uintptr
		data    string
		code    codes.Code
	}{
		{"", nil, 0, "", codes.OK},
		{"", []string{"noatime", "nosuid"}, unix.MS_NOATIME | unix.MS_NOSUID, "", codes.OK},
		{"", []string{"nodev,noexec", "exec"}, unix.MS_NODEV, "", codes.OK},
		{"", []string{"debug"}, 0, "", codes.InvalidArgument},
		{"", []string{"bogus"}, 0, "", codes.InvalidArgument},
		{"ext4", []string{"noatime", "debug", "nouid32"}, unix.MS_NOATIME, "debug,nouid32", codes.OK},
		{"ext3", []string{"data=journal"}, 0, "data=journal", codes.OK},
		{"ext4", []string{"bogus"}, 0, "", codes.InvalidArgument},
	} {
		flags, data, err := mountOptions(c.fsType, c.options)
		if status.Code(err) != c.code || (err == nil && (flags != c.flags || data != c.data)) {
			t.Errorf("mountOptions(%q, %q) = %#x, %q, %v; want %#x, %q, %v", c.fsType, c.options, flags, data, err, c.flags, c.data, c.code)
		}
	}
}

// Topology as the host-path driver's -enable-topology: the capability,
// the node's segment in NodeGetInfo and on every volume, and a volume
// whose requisite topologies leave the node out refused; the volume limit
// in NodeGetInfo.
func TestTopologyAndLimit(t *testing.T) {
	ctx := context.Background()
	d := &Driver{Name: "t.csi", NodeID: "n1", DataDir: t.TempDir(), EnableTopology: true, MaxVolumes: 7}
	pc, err := d.GetPluginCapabilities(ctx, nil)
	if err != nil || !slices.ContainsFunc(pc.Capabilities, func(c *csipb.PluginCapability) bool {
		return c.GetService().GetType() == csipb.PluginCapability_Service_VOLUME_ACCESSIBILITY_CONSTRAINTS
	}) {
		t.Errorf("plugin capabilities %v (%v), want VOLUME_ACCESSIBILITY_CONSTRAINTS", pc, err)
	}
	info, err := d.NodeGetInfo(ctx, nil)
	if err != nil || info.NodeId != "n1" || info.MaxVolumesPerNode != 7 || info.AccessibleTopology.GetSegments()[TopologyKey] != "n1" {
		t.Errorf("NodeGetInfo %v (%v), want node n1, 7 volumes, %s=n1", info, err, TopologyKey)
	}
	here := &csipb.TopologyRequirement{Requisite: []*csipb.Topology{
		{Segments: map[string]string{TopologyKey: "n0"}}, {Segments: map[string]string{TopologyKey: "n1"}}}}
	v, err := d.CreateVolume(ctx, &csipb.CreateVolumeRequest{Name: "v", VolumeCapabilities: []*csipb.VolumeCapability{mountCap("")}, AccessibilityRequirements: here})
	if err != nil || len(v.Volume.AccessibleTopology) != 1 || v.Volume.AccessibleTopology[0].Segments[TopologyKey] != "n1" {
		t.Errorf("CreateVolume with n1 requisite: %v %v, want accessible from %s=n1", v, err, TopologyKey)
	}
	elsewhere := &csipb.TopologyRequirement{Requisite: []*csipb.Topology{{Segments: map[string]string{TopologyKey: "n2"}}}}
	if _, err := d.CreateVolume(ctx, &csipb.CreateVolumeRequest{Name: "w", VolumeCapabilities: []*csipb.VolumeCapability{mountCap("")}, AccessibilityRequirements: elsewhere}); status.Code(err) != codes.ResourceExhausted {
		t.Errorf("CreateVolume for node n2 only: %v, want ResourceExhausted", err)
	}

	off := &Driver{Name: "t.csi", NodeID: "n1", DataDir: t.TempDir()}
	pc, _ = off.GetPluginCapabilities(ctx, nil)
	info, _ = off.NodeGetInfo(ctx, nil)
	if len(pc.Capabilities) != 2 || info.AccessibleTopology != nil || info.MaxVolumesPerNode != 0 {
		t.Errorf("without topology and limit: capabilities %v, NodeGetInfo %v", pc, info)
	}
	if _, err := off.CreateVolume(ctx, &csipb.CreateVolumeRequest{Name: "w", VolumeCapabilities: []*csipb.VolumeCapability{mountCap("")}, AccessibilityRequirements: elsewhere}); err != nil {
		t.Errorf("CreateVolume without topology: %v", err)
	}
	if _, err := off.CreateVolume(ctx, &csipb.CreateVolumeRequest{Name: "x", VolumeCapabilities: []*csipb.VolumeCapability{mountCap("xfs")}}); status.Code(err) != codes.InvalidArgument {
		t.Errorf("CreateVolume with fsType xfs: %v, want InvalidArgument", err)
	}
}

func mountAt(t *testing.T, p string) *mountinfo.Mount {
	t.Helper()
	ms, err := mountinfo.Read()
	if err != nil {
		t.Fatal(err)
	}
	var found *mountinfo.Mount
	for i := range ms {
		if ms[i].MountPoint == p {
			found = &ms[i]
		}
	}
	return found
}

// A volume with an fsType is a file formatted at its first staging and
// mounted with that type and the mount options at the staging path, bound
// with the flags at the target; what is written there is there after
// unstaging and staging again (not formatted twice); unstaging detaches
// its loop device. A directory volume's bind mounts take the flags too.
func TestFormattedVolume(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("mounts and loop devices need root")
	}
	if _, err := os.Stat("/dev/loop-control"); err != nil {
		t.Skipf("no loop devices here: %v", err)
	}
	ctx := context.Background()
	dir := t.TempDir()
	d := &Driver{Name: "t.csi", NodeID: "n1", DataDir: filepath.Join(dir, "data")}
	for _, fsType := range FsTypes {
		id := "vol-" + fsType
		c := mountCap(fsType, "noatime", "nouid32")
		v, err := d.CreateVolume(ctx, &csipb.CreateVolumeRequest{Name: id, VolumeCapabilities: []*csipb.VolumeCapability{c}, CapacityRange: &csipb.CapacityRange{RequiredBytes: 1 << 20}})
		if err != nil || v.Volume.CapacityBytes != minFormattedSize {
			t.Fatalf("CreateVolume %s: %v %v, want %d bytes", fsType, v, err, minFormattedSize)
		}
		staging, target := filepath.Join(dir, id, "staging"), filepath.Join(dir, id, "target")
		t.Cleanup(func() {
			_ = unix.Unmount(target, unix.MNT_DETACH)
			_ = unix.Unmount(staging, unix.MNT_DETACH)
			_ = loopdev.Detach(d.volumeDir(id))
		})
		stage := func() {
			t.Helper()
			if _, err := d.NodeStageVolume(ctx, &csipb.NodeStageVolumeRequest{VolumeId: id, StagingTargetPath: staging, VolumeCapability: c}); err != nil {
				t.Fatalf("NodeStageVolume %s: %v", fsType, err)
			}
		}
		stage()
		m := mountAt(t, staging)
		if m == nil || m.FSType != fsType || !strings.Contains(","+m.Options+",", ",noatime,") || !strings.Contains(m.SuperOptions, "nouid32") {
			t.Fatalf("staging mount %+v, want %s with noatime and nouid32", m, fsType)
		}
		if _, err := d.NodePublishVolume(ctx, &csipb.NodePublishVolumeRequest{VolumeId: id, StagingTargetPath: staging, TargetPath: target, VolumeCapability: mountCap(fsType, "nosuid"), Readonly: true}); err != nil {
			t.Fatalf("NodePublishVolume %s: %v", fsType, err)
		}
		if m := mountAt(t, target); m == nil || m.FSType != fsType || !strings.Contains(","+m.Options+",", ",nosuid,") || !strings.HasPrefix(m.Options, "ro,") {
			t.Fatalf("target mount %+v, want %s, ro and nosuid", m, fsType)
		}
		if err := os.WriteFile(filepath.Join(staging, "data"), []byte(fsType), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := d.NodeUnpublishVolume(ctx, &csipb.NodeUnpublishVolumeRequest{VolumeId: id, TargetPath: target}); err != nil {
			t.Fatal(err)
		}
		if _, err := d.NodeUnstageVolume(ctx, &csipb.NodeUnstageVolumeRequest{VolumeId: id, StagingTargetPath: staging}); err != nil {
			t.Fatal(err)
		}
		if _, err := loopdev.Find(d.volumeDir(id)); err == nil {
			t.Errorf("%s: a loop device is still attached after NodeUnstageVolume", fsType)
		}
		stage()
		if b, err := os.ReadFile(filepath.Join(staging, "data")); err != nil || string(b) != fsType {
			t.Errorf("%s staged again: %q %v, want what was written (formatted once)", fsType, b, err)
		}
		if _, err := d.NodeUnstageVolume(ctx, &csipb.NodeUnstageVolumeRequest{VolumeId: id, StagingTargetPath: staging}); err != nil {
			t.Fatal(err)
		}
		// Staged as the default fsType (a directory), it is refused.
		if _, err := d.NodeStageVolume(ctx, &csipb.NodeStageVolumeRequest{VolumeId: id, StagingTargetPath: staging, VolumeCapability: mountCap("")}); status.Code(err) != codes.InvalidArgument {
			t.Errorf("%s volume staged without its fsType: %v, want InvalidArgument", fsType, err)
		}
	}

	// A directory volume: the flags on both bind mounts; an ext option is
	// refused.
	id := "dir"
	if _, err := d.CreateVolume(ctx, &csipb.CreateVolumeRequest{Name: id, VolumeCapabilities: []*csipb.VolumeCapability{mountCap("")}}); err != nil {
		t.Fatal(err)
	}
	staging, target := filepath.Join(dir, id, "staging"), filepath.Join(dir, id, "target")
	t.Cleanup(func() {
		_ = unix.Unmount(target, unix.MNT_DETACH)
		_ = unix.Unmount(staging, unix.MNT_DETACH)
	})
	if _, err := d.NodeStageVolume(ctx, &csipb.NodeStageVolumeRequest{VolumeId: id, StagingTargetPath: staging, VolumeCapability: mountCap("", "debug")}); status.Code(err) != codes.InvalidArgument {
		t.Errorf("directory volume staged with ext4's debug: %v, want InvalidArgument", err)
	}
	if _, err := d.NodeStageVolume(ctx, &csipb.NodeStageVolumeRequest{VolumeId: id, StagingTargetPath: staging, VolumeCapability: mountCap("", "noexec")}); err != nil {
		t.Fatal(err)
	}
	if m := mountAt(t, staging); m == nil || !strings.Contains(","+m.Options+",", ",noexec,") {
		t.Errorf("directory staging mount %+v, want noexec", m)
	}
	if _, err := d.NodePublishVolume(ctx, &csipb.NodePublishVolumeRequest{VolumeId: id, StagingTargetPath: staging, TargetPath: target, VolumeCapability: mountCap("", "nodev")}); err != nil {
		t.Fatal(err)
	}
	if m := mountAt(t, target); m == nil || !strings.Contains(","+m.Options+",", ",nodev,") {
		t.Errorf("directory target mount %+v, want nodev", m)
	}
	if _, err := d.NodeUnpublishVolume(ctx, &csipb.NodeUnpublishVolumeRequest{VolumeId: id, TargetPath: target}); err != nil {
		t.Fatal(err)
	}
	if _, err := d.NodeUnstageVolume(ctx, &csipb.NodeUnstageVolumeRequest{VolumeId: id, StagingTargetPath: staging}); err != nil {
		t.Fatal(err)
	}
}
