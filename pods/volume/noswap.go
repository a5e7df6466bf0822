package volume

import (
	"os"
	"strconv"
	"strings"
	"sync"

	"golang.org/x/sys/unix"
)

// tmpfsNoswap says whether memory-backed volumes (Memory emptyDirs and the
// tmpfs of secret, configMap, downwardAPI and projected volumes) are
// mounted with tmpfs's noswap option, as kubelet mounts them: where the
// kernel has it (6.4 and later, or a trial mount succeeds) and the agent
// is not in a user namespace (the kernel refuses noswap there). With swap
// on, pages of such volumes (secrets) would otherwise reach the disk.
var tmpfsNoswap = sync.OnceValue(func() bool {
	if inUserNS() {
		return false
	}
	var u unix.Utsname
	if err := unix.Uname(&u); err == nil && kernelAtLeast(unix.ByteSliceToString(u.Release[:]), 6, 4) {
		return true
	}
	dir, err := os.MkdirTemp("", "tmpfs-noswap-test-")
	if err != nil {
		return false
	}
	defer os.Remove(dir)
	if err := unix.Mount("tmpfs", dir, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "noswap"); err != nil {
		return false
	}
	_ = unix.Unmount(dir, 0)
	return true
})

// TmpfsNoswap reports whether memory-backed volumes are mounted with
// noswap (see tmpfsNoswap).
func TmpfsNoswap() bool { return tmpfsNoswap() }

// withNoswap adds noswap to tmpfs mount options where tmpfsNoswap (not on
// a remount: the kernel refuses to change it there).
func withNoswap(opts string) string {
	if !tmpfsNoswap() {
		return opts
	}
	if opts == "" {
		return "noswap"
	}
	return opts + ",noswap"
}

// kernelAtLeast compares a uname release ("6.18.44-fc-v782") with
// major.minor.
func kernelAtLeast(release string, major, minor int) bool {
	parts := strings.SplitN(release, ".", 3)
	if len(parts) < 2 {
		return false
	}
	ma, err1 := strconv.Atoi(parts[0])
	minorDigits := parts[1]
	if i := strings.IndexFunc(minorDigits, func(r rune) bool { return r < '0' || r > '9' }); i >= 0 {
		minorDigits = minorDigits[:i]
	}
	mi, err2 := strconv.Atoi(minorDigits)
	if err1 != nil || err2 != nil {
		return false
	}
	return ma > major || (ma == major && mi >= minor)
}

// inUserNS: the process's user namespace is not the initial one (its
// uid_map is not the full identity range).
func inUserNS() bool {
	b, err := os.ReadFile("/proc/self/uid_map")
	if err != nil {
		return false
	}
	f := strings.Fields(string(b))
	return !(len(f) == 3 && f[0] == "0" && f[1] == "0" && f[2] == "4294967295")
}
