// Package mountinfo reads the mount table of the calling process's mount
// namespace from /proc/self/mountinfo (proc(5)), the one parser the agent
// and its test helpers share.
//
// Paths and the other string fields are returned as the kernel sees them:
// its octal escapes (\040 for a space, \011 tab, \012 newline, \134
// backslash) are undone, so a mount point can be passed straight to
// unmount(2) or compared with a path from filepath.EvalSymlinks. The mount
// table is a snapshot: mounts may come and go as soon as it is read.
//
// Lines of any length up to 1 MiB are read. That is why the agent keeps
// this parser instead of github.com/moby/sys/mountinfo: the kernel writes a
// line longer than 64 KiB for a mount on a deep enough path, and moby's
// parser then fails for the whole table (TestReadLongLine shows it).
package mountinfo

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// Mount is one line of mountinfo.
type Mount struct {
	// Root is the directory of the filesystem that is mounted (field 4):
	// "/" unless a subdirectory was bind-mounted; for nsfs it names the
	// namespace, e.g. "net:[4026532176]".
	Root string
	// MountPoint is where the filesystem is mounted (field 5), absolute.
	MountPoint string
	// Options are the per-mount options (field 6), e.g. "rw,nosuid,relatime",
	// as the kernel wrote them.
	Options string
	// FSType is the filesystem type, e.g. "tmpfs", "cgroup2" or "fuse.sshfs".
	FSType string
	// Source is the filesystem-specific source, e.g. "/dev/vda" or "tmpfs";
	// it may be empty.
	Source string
	// SuperOptions are the filesystem's options (the last field), e.g.
	// "rw,size=8192k,noswap" for a tmpfs.
	SuperOptions string
	// Optional are the optional fields (field 7 up to the "-"), separated
	// by spaces: the mount's propagation, "shared:N" (a member of peer
	// group N), "master:N" (a slave of peer group N), "propagate_from:N",
	// "unbindable". Empty: the mount is private.
	Optional string
}

// Shared reports whether the mount propagates mount events to and from its
// peers (mount --make-shared; a "shared:N" optional field).
func (m Mount) Shared() bool { return m.hasOptional("shared:") }

// Slave reports whether the mount receives mount events from a master
// (mount --make-slave; a "master:N" optional field). A mount can be both
// shared and a slave.
func (m Mount) Slave() bool { return m.hasOptional("master:") }

func (m Mount) hasOptional(prefix string) bool {
	for _, o := range strings.Fields(m.Optional) {
		if strings.HasPrefix(o, prefix) {
			return true
		}
	}
	return false
}

// Containing returns the mount that path is on: the mount in ms whose
// mount point is the longest that is path or a parent of it, and of
// mounts stacked on that mount point the one listed last (the one on top;
// the kernel does not list every mount after its parent, so order alone
// does not tell). path must be absolute, cleaned and free of symbolic
// links (mountinfo shows resolved paths). ok is false when no mount
// contains path, which happens only for a table of another namespace.
func Containing(ms []Mount, path string) (m Mount, ok bool) {
	best := -1
	for i := range ms {
		mp := ms[i].MountPoint
		if mp != path && mp != "/" && !strings.HasPrefix(path, mp+"/") {
			continue
		}
		if best < 0 || len(mp) >= len(ms[best].MountPoint) {
			best = i
		}
	}
	if best < 0 {
		return Mount{}, false
	}
	return ms[best], true
}

// selfMountinfo is the mount table of the process's mount namespace.
const selfMountinfo = "/proc/self/mountinfo"

// Read returns the mounts of the calling process's mount namespace in the
// kernel's order (a mount comes after the mount it is on).
func Read() ([]Mount, error) {
	f, err := os.Open(selfMountinfo)
	if err != nil {
		return nil, fmt.Errorf("mountinfo: %w", err)
	}
	defer f.Close()
	return Parse(f)
}

// maxLine bounds a line: two paths of PATH_MAX bytes, each escaped to four
// times its length, plus options fit easily.
const maxLine = 1 << 20

// Parse parses a mount table in the format of /proc/<pid>/mountinfo:
//
//	36 35 98:0 /mnt1 /mnt2 rw,noatime master:1 - ext3 /dev/root rw,errors=continue
//
// Fields are separated by single spaces; any number of optional fields
// (shared:N, master:N, propagate_from:N, unbindable) come before the "-"
// separator. Empty lines are skipped. A line without the separator or with
// too few fields is an error naming the line.
func Parse(r io.Reader) ([]Mount, error) {
	var out []Mount
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4096), maxLine)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if line == "" {
			continue
		}
		m, err := parseLine(line)
		if err != nil {
			return nil, fmt.Errorf("mountinfo: line %d: %w", n, err)
		}
		out = append(out, m)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("mountinfo: %w", err)
	}
	return out, nil
}

// parseLine parses one mountinfo line. It splits on single spaces, not on
// runs of them, so an empty source ("tmpfs  rw") keeps its place.
func parseLine(line string) (Mount, error) {
	f := strings.Split(line, " ")
	// ID, parent ID, major:minor, root, mount point, options, then the
	// optional fields, "-", type, source and super options.
	const (
		sepMin = 6
		after  = 3
	)
	sep := -1
	for i := sepMin; i < len(f); i++ {
		if f[i] == "-" {
			sep = i
			break
		}
	}
	switch {
	case len(f) < sepMin+1+after:
		return Mount{}, fmt.Errorf("%d fields, want at least %d: %q", len(f), sepMin+1+after, line)
	case sep < 0:
		return Mount{}, fmt.Errorf("no \" - \" separator after the optional fields: %q", line)
	case len(f) < sep+1+after:
		return Mount{}, fmt.Errorf("want filesystem type, source and super options after \" - \": %q", line)
	}
	m := Mount{
		Root:       unescape(f[3]),
		MountPoint: unescape(f[4]),
		Options:    f[5],
		FSType:     unescape(f[sep+1]),
		Source:     unescape(f[sep+2]),
	}
	m.SuperOptions = unescape(f[sep+3])
	if sep > 6 {
		m.Optional = strings.Join(f[6:sep], " ")
	}
	if !strings.HasPrefix(m.MountPoint, "/") {
		return Mount{}, fmt.Errorf("mount point %q is not absolute: %q", m.MountPoint, line)
	}
	return m, nil
}

// unescape undoes the kernel's escapes: a backslash and three octal digits
// stand for one byte. Anything else is kept as it is.
func unescape(s string) string {
	i := strings.IndexByte(s, '\\')
	if i < 0 {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	b.WriteString(s[:i])
	for ; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) && isOctal(s[i+1]) && isOctal(s[i+2]) && isOctal(s[i+3]) && s[i+1] <= '3' {
			b.WriteByte((s[i+1]-'0')<<6 | (s[i+2]-'0')<<3 | (s[i+3] - '0'))
			i += 3
			continue
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

func isOctal(c byte) bool { return '0' <= c && c <= '7' }

// CgroupMountPoints returns the mount points of the cgroup v1 hierarchies
// and of the cgroup2 (unified) hierarchy among ms, in order.
func CgroupMountPoints(ms []Mount) []string {
	var out []string
	for _, m := range ms {
		if m.FSType == "cgroup" || m.FSType == "cgroup2" {
			out = append(out, m.MountPoint)
		}
	}
	return out
}

// MountPointsUnder returns the mount points among ms strictly below dir
// (not dir itself), in order. dir must be absolute and, since mountinfo
// shows resolved paths, free of symbolic links; it is cleaned first.
func MountPointsUnder(ms []Mount, dir string) []string {
	prefix := filepath.Clean(dir)
	if prefix != "/" {
		prefix += "/"
	}
	var out []string
	for _, m := range ms {
		if len(m.MountPoint) > len(prefix) && strings.HasPrefix(m.MountPoint, prefix) {
			out = append(out, m.MountPoint)
		}
	}
	return out
}
