package nodestatus

import (
	"fmt"

	"golang.org/x/sys/unix"
)

func uname() (string, error) {
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		return "", fmt.Errorf("uname: %w", err)
	}
	return unix.ByteSliceToString(u.Release[:]), nil
}

func statfs(path string) (FSStats, error) {
	var s unix.Statfs_t
	if err := unix.Statfs(path, &s); err != nil {
		return FSStats{}, fmt.Errorf("statfs %s: %w", path, err)
	}
	bs := uint64(s.Bsize)
	return FSStats{
		CapacityBytes:  s.Blocks * bs,
		AvailableBytes: s.Bavail * bs,
		Inodes:         s.Files,
		InodesFree:     s.Ffree,
	}, nil
}
