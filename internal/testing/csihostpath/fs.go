package csihostpath

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"log"
	"os"
	"os/exec"
	"strings"

	csipb "github.com/container-storage-interface/spec/lib/go/csi"
	"golang.org/x/sys/unix"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/nodeagent/nodeagent/internal/loopdev"
)

// Filesystem types and mount options.
//
// A filesystem volume without an fsType (the default) is a directory of
// the data directory's filesystem, bind-mounted, as the host-path
// driver's. One with fsType ext3 or ext4 (the StorageClass parameter
// csi.storage.k8s.io/fstype, which external-provisioner turns into the
// PV's csi.fsType and the node agent passes in the volume capability) is
// what a disk driver's is: a file of the volume's size (sparse, as a block
// volume's), staged by attaching a loop device over it, formatting it with
// mke2fs when it holds no ext filesystem yet (kubelet's FormatAndMount
// does the same for in-tree disks) and mounting it with that type at the
// staging path; published, as a directory volume, by bind-mounting the
// staging path. The host-path driver itself formats nothing (its test
// definition in test/e2e/storage/drivers/csi.go lists the default fsType
// only); this is beyond it, so that the fsType the node agent passes is
// exercised.
//
// Mount options (the PV's mountOptions, the volume capability's
// mount_flags in NodeStageVolume and NodePublishVolume) are applied where
// the driver mounts: the per-mount flags (noatime, nosuid, ...) on every
// mount it makes, bind mounts included; options of a filesystem (e.g.
// ext4's "debug") only where it mounts an ext filesystem, and refused
// (InvalidArgument) for a bind mount, which cannot take them. An option it
// does not know is refused too: it never drops one silently.

// FsTypes are the fsTypes of a filesystem volume besides the default "".
var FsTypes = []string{"ext3", "ext4"}

// minFormattedSize is the size of a formatted volume asked for with less:
// room for mke2fs's journal (ext3 needs one).
const minFormattedSize = 32 << 20

// mountFlagBits are the options that are flags of mount(2) rather than
// data for the filesystem.
var mountFlagBits = map[string]struct {
	set   bool
	flags uintptr
}{
	"ro": {true, unix.MS_RDONLY}, "rw": {false, unix.MS_RDONLY},
	"nosuid": {true, unix.MS_NOSUID}, "suid": {false, unix.MS_NOSUID},
	"nodev": {true, unix.MS_NODEV}, "dev": {false, unix.MS_NODEV},
	"noexec": {true, unix.MS_NOEXEC}, "exec": {false, unix.MS_NOEXEC},
	"noatime": {true, unix.MS_NOATIME}, "atime": {false, unix.MS_NOATIME},
	"nodiratime": {true, unix.MS_NODIRATIME}, "diratime": {false, unix.MS_NODIRATIME},
	"relatime": {true, unix.MS_RELATIME}, "norelatime": {false, unix.MS_RELATIME},
	"strictatime": {true, unix.MS_STRICTATIME},
	"sync":        {true, unix.MS_SYNCHRONOUS}, "async": {false, unix.MS_SYNCHRONOUS},
	"dirsync":  {true, unix.MS_DIRSYNC},
	"lazytime": {true, unix.MS_LAZYTIME}, "nolazytime": {false, unix.MS_LAZYTIME},
	"defaults": {false, 0},
}

// extOptions are the ext3/ext4 options (data for mount(2)) the driver
// passes to the kernel; others are refused.
var extOptions = map[string]bool{
	"debug": true, "nouid32": true, "acl": true, "noacl": true, "user_xattr": true, "nouser_xattr": true,
	"errors=remount-ro": true, "errors=continue": true, "discard": true, "nodiscard": true,
	"barrier": true, "nobarrier": true, "data=ordered": true, "data=writeback": true, "data=journal": true,
}

// mountOptions splits options into mount(2) flags and filesystem data; an
// option that is neither a flag nor, for fsType (ext3, ext4; "" for a
// bind mount), one of its options is refused.
func mountOptions(fsType string, options []string) (uintptr, string, error) {
	var flags uintptr
	var data []string
	for _, o := range options {
		for _, o := range strings.Split(o, ",") {
			if b, ok := mountFlagBits[o]; ok {
				if b.set {
					flags |= b.flags
				} else {
					flags &^= b.flags
				}
				continue
			}
			switch {
			case fsType == "":
				return 0, "", status.Errorf(codes.InvalidArgument, "mount option %q: a volume without an fsType is a bind mount, which takes only mount flags (%s)", o, flagNames())
			case !extOptions[o]:
				return 0, "", status.Errorf(codes.InvalidArgument, "mount option %q is not supported for fsType %s", o, fsType)
			}
			data = append(data, o)
		}
	}
	return flags, strings.Join(data, ","), nil
}

func flagNames() string {
	var n []string
	for k := range mountFlagBits {
		n = append(n, k)
	}
	return strings.Join(n, " ")
}

// checkFsType refuses an fsType the driver cannot make.
func checkFsType(fsType string) error {
	if fsType == "" {
		return nil
	}
	for _, t := range FsTypes {
		if fsType == t {
			return nil
		}
	}
	return status.Errorf(codes.InvalidArgument, "fsType %q is not supported: the driver makes %s or the default (a directory)", fsType, strings.Join(FsTypes, ", "))
}

// bindOpts bind-mounts src on target (created as a directory) with the
// mount flags of options, read-only when ro; a target that is a mount
// point already is left as it is (CSI calls are idempotent).
func bindOpts(src, target string, ro bool, options []string) error {
	flags, _, err := mountOptions("", options)
	if err != nil {
		return err
	}
	if ro {
		flags |= unix.MS_RDONLY
	}
	if err := os.MkdirAll(target, 0o750); err != nil {
		return err
	}
	if mounted(target) {
		return nil
	}
	if err := unix.Mount(src, target, "", unix.MS_BIND, ""); err != nil {
		return fmt.Errorf("bind %s on %s: %w", src, target, err)
	}
	// A bind mount takes its flags at a remount (mount(8) does the same
	// for "mount --bind -o ro,...").
	if flags != 0 {
		if err := unix.Mount("", target, "", unix.MS_BIND|unix.MS_REMOUNT|flags, ""); err != nil {
			_ = unix.Unmount(target, 0)
			return fmt.Errorf("remount %s with flags %#x: %w", target, flags, err)
		}
	}
	return nil
}

// stageFormatted stages a formatted volume (a file): its loop device,
// formatted with fsType unless it holds an ext filesystem already, mounted
// at target with the options.
func (d *Driver) stageFormatted(id, fsType, target string, options []string) error {
	flags, data, err := mountOptions(fsType, options)
	if err != nil {
		return err
	}
	dev, err := d.attachBlock(id)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(target, 0o750); err != nil {
		return status.Error(codes.Internal, err.Error())
	}
	if mounted(target) {
		return nil
	}
	has, err := hasExtFS(dev)
	if err != nil {
		return status.Error(codes.Internal, err.Error())
	}
	if !has {
		if err := mkfs(fsType, dev); err != nil {
			return status.Errorf(codes.Internal, "volume %s: %v", id, err)
		}
		log.Printf("formatted volume %s (%s) as %s", id, dev, fsType)
	}
	if err := unix.Mount(dev, target, fsType, flags, data); err != nil {
		return status.Errorf(codes.Internal, "mount %s (%s) on %s with %q: %v", dev, fsType, target, data, err)
	}
	return nil
}

// extMagic is the ext2/3/4 superblock's magic number, at offset 56 of the
// superblock, which starts 1024 bytes into the device.
const extMagic = 0xEF53

// hasExtFS reports whether dev holds an ext2/3/4 filesystem.
func hasExtFS(dev string) (bool, error) {
	f, err := os.Open(dev)
	if err != nil {
		return false, err
	}
	defer f.Close()
	var b [2]byte
	if _, err := f.ReadAt(b[:], 1024+56); err != nil {
		if err == io.EOF {
			return false, nil
		}
		return false, err
	}
	return binary.LittleEndian.Uint16(b[:]) == extMagic, nil
}

// mke2fsPaths are where the driver looks for mke2fs (the conformance
// image has it at the first; hack/importimage).
var mke2fsPaths = []string{"/usr/sbin/mke2fs", "/sbin/mke2fs"}

func mkfs(fsType, dev string) error {
	prog := ""
	for _, p := range mke2fsPaths {
		if _, err := os.Stat(p); err == nil {
			prog = p
			break
		}
	}
	if prog == "" {
		var err error
		if prog, err = exec.LookPath("mke2fs"); err != nil {
			return fmt.Errorf("formatting %s as %s: no mke2fs (%s)", dev, fsType, strings.Join(mke2fsPaths, ", "))
		}
	}
	var out bytes.Buffer
	cmd := exec.Command(prog, "-t", fsType, "-F", "-q", "-m", "0", dev)
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s -t %s %s: %v: %s", prog, fsType, dev, err, strings.TrimSpace(out.String()))
	}
	return nil
}

// unstageFormatted is NodeUnstageVolume's part for a volume backed by a
// file (formatted or block): its loop device goes.
func (d *Driver) detachFile(id string) error {
	if fi, err := os.Stat(d.volumeDir(id)); err == nil && fi.Mode().IsRegular() {
		if err := loopdev.Detach(d.volumeDir(id)); err != nil {
			return status.Error(codes.Internal, err.Error())
		}
	}
	return nil
}

// fsTypeOf is the fsType of a CreateVolumeRequest's mount capabilities
// (they must agree).
func fsTypeOf(caps []*csipb.VolumeCapability) (string, error) {
	fsType, seen := "", false
	for _, c := range caps {
		m := c.GetMount()
		if m == nil {
			continue
		}
		if seen && m.FsType != fsType {
			return "", status.Errorf(codes.InvalidArgument, "volume capabilities ask for fsTypes %q and %q", fsType, m.FsType)
		}
		fsType, seen = m.FsType, true
		if _, _, err := mountOptions(m.FsType, m.MountFlags); err != nil {
			return "", err
		}
	}
	return fsType, checkFsType(fsType)
}
