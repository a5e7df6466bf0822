// Package loopdev attaches and detaches loop devices over files, what
// kubelet does with `losetup` (pkg/volume/util/volumepathhandler
// AttachFileDevice, DetachFileDevice, GetLoopDevice), through the kernel's
// loop ioctls instead of the losetup binary.
//
// A loop device is found by its backing file as kubelet finds it: the
// /sys/block/loop*/loop/backing_file whose path (without a " (deleted)"
// suffix) is the file's path or the path with its symlinks resolved. The
// devices outlive the process that attached them, so a restarted agent
// finds them again.
package loopdev

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// ErrNotFound: no loop device has the file as its backing file (kubelet's
// "device not found").
var ErrNotFound = errors.New("device not found")

// sysBlock is where the kernel lists block devices.
var sysBlock = "/sys/block"

// attachTries bounds the races for a free device with other processes
// that attach loop devices at the same moment (EBUSY on LOOP_SET_FD).
const attachTries = 10

// detachWait bounds the wait for the kernel to release a detached
// device's backing file (LOOP_CLR_FD on a device that is still open
// only marks it for release on its last close).
const detachWait = 5 * time.Second

// Find returns the loop device (/dev/loopN) whose backing file is path, or
// ErrNotFound.
func Find(path string) (string, error) {
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		return "", ErrNotFound
	} else if err != nil {
		return "", fmt.Errorf("not attachable: %v", err)
	}
	real, err := filepath.EvalSymlinks(path)
	if err != nil {
		return "", fmt.Errorf("failed to evaluate path %s: %s", path, err)
	}
	devs, err := filepath.Glob(filepath.Join(sysBlock, "loop*"))
	if err != nil {
		return "", fmt.Errorf("failed to list loop devices in sysfs: %s", err)
	}
	for _, d := range devs {
		b, err := os.ReadFile(filepath.Join(d, "loop", "backing_file"))
		if err != nil {
			continue
		}
		bf := strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(string(b)), "(deleted)"))
		if bf == path || bf == real {
			return "/dev/" + filepath.Base(d), nil
		}
	}
	return "", ErrNotFound
}

// Attach returns the loop device over path, attaching a free one when
// there is none yet (kubelet's AttachFileDevice: `losetup -f path`). The
// file is opened read-write, read-only when it cannot be (as losetup
// does).
func Attach(path string) (string, error) {
	dev, err := Find(path)
	if err == nil {
		return dev, nil
	}
	if !errors.Is(err, ErrNotFound) {
		return "", fmt.Errorf("GetLoopDevice failed for path %s: %v", path, err)
	}
	backing, err := os.OpenFile(path, os.O_RDWR|unix.O_CLOEXEC, 0)
	if errors.Is(err, unix.EROFS) || errors.Is(err, unix.EACCES) {
		backing, err = os.OpenFile(path, os.O_RDONLY|unix.O_CLOEXEC, 0)
	}
	if err != nil {
		return "", fmt.Errorf("makeLoopDevice failed for path %s: %v", path, err)
	}
	defer backing.Close()
	ctl, err := os.OpenFile("/dev/loop-control", os.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		return "", fmt.Errorf("makeLoopDevice failed for path %s: %v", path, err)
	}
	defer ctl.Close()
	for range attachTries {
		n, err := unix.IoctlRetInt(int(ctl.Fd()), unix.LOOP_CTL_GET_FREE)
		if err != nil {
			return "", fmt.Errorf("makeLoopDevice failed for path %s: LOOP_CTL_GET_FREE: %v", path, err)
		}
		dev := fmt.Sprintf("/dev/loop%d", n)
		lf, err := openDevice(dev, n)
		if err != nil {
			return "", fmt.Errorf("makeLoopDevice failed for path %s: %v", path, err)
		}
		err = unix.IoctlSetInt(int(lf.Fd()), unix.LOOP_SET_FD, int(backing.Fd()))
		if errors.Is(err, unix.EBUSY) {
			lf.Close() // another process took it between the two calls
			continue
		}
		if err != nil {
			lf.Close()
			return "", fmt.Errorf("makeLoopDevice failed for path %s: LOOP_SET_FD %s: %v", path, dev, err)
		}
		// The name losetup records (informative: sysfs's backing_file is
		// the kernel's own path of the file).
		info := unix.LoopInfo64{}
		copy(info.File_name[:len(info.File_name)-1], path)
		_ = unix.IoctlLoopSetStatus64(int(lf.Fd()), &info)
		lf.Close()
		return dev, nil
	}
	return "", fmt.Errorf("makeLoopDevice failed for path %s: no free loop device after %d tries", path, attachTries)
}

// openDevice opens /dev/loopN, making the node when devtmpfs has not (yet)
// got it (the kernel adds the device on LOOP_CTL_GET_FREE).
func openDevice(dev string, n int) (*os.File, error) {
	f, err := os.OpenFile(dev, os.O_RDWR|unix.O_CLOEXEC, 0)
	if errors.Is(err, os.ErrNotExist) {
		if err := unix.Mknod(dev, unix.S_IFBLK|0o660, int(unix.Mkdev(7, uint32(n)))); err != nil && !errors.Is(err, os.ErrExist) {
			return nil, err
		}
		f, err = os.OpenFile(dev, os.O_RDWR|unix.O_CLOEXEC, 0)
	}
	return f, err
}

// Detach detaches the loop device over path, if there is one (kubelet's
// DetachFileDevice: `losetup -d`), and waits (bounded) until the kernel
// has let go of the file, so that a bind mount it is on can be unmounted.
func Detach(path string) error {
	dev, err := Find(path)
	if errors.Is(err, ErrNotFound) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("GetLoopDevice failed for path %s: %v", path, err)
	}
	f, err := os.OpenFile(dev, os.O_RDONLY|unix.O_CLOEXEC, 0)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("removeLoopDevice failed for path %s: %v", path, err)
	}
	err = unix.IoctlSetInt(int(f.Fd()), unix.LOOP_CLR_FD, 0)
	f.Close()
	if err != nil && !errors.Is(err, unix.ENXIO) {
		return fmt.Errorf("removeLoopDevice failed for path %s: losetup -d %s failed: %v", path, dev, err)
	}
	deadline := time.Now().Add(detachWait)
	for {
		if _, err := Find(path); errors.Is(err, ErrNotFound) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("removeLoopDevice failed for path %s: %s still has it as backing file after %v (the device is open)", path, dev, detachWait)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
