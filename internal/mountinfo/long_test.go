package mountinfo

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	moby "github.com/moby/sys/mountinfo"
	"golang.org/x/sys/unix"
)

// longMountEnv, set to a directory, makes TestReadLongLine the helper that
// runs in its own mount namespace (see there).
const longMountEnv = "NODEAGENT_MOUNTINFO_LONG_DIR"

// longMountResult is what the helper reports.
type longMountResult struct {
	Longest   int    // bytes in the longest mountinfo line
	OursFound bool   // Read returned the deep mount with its full mount point
	OursErr   string // Read's error
	MobyErr   string // github.com/moby/sys/mountinfo GetMounts' error
	MobyFound bool
}

// TestReadLongLine mounts a tmpfs on a directory whose path is longer
// than 64 KiB (nested 250-byte names, reached with chdir since the path is
// longer than PATH_MAX): the real kernel then writes a mountinfo line of
// that length. Read must still return the whole table.
//
// This is the case github.com/moby/sys/mountinfo (v0.6.2 and v0.7.2) gets
// wrong: it reads with bufio.Scanner's default 64 KiB limit and fails for
// the whole table ("bufio.Scanner: token too long"), so one such mount
// would leave the agent without any mount table. That is why this package
// is kept (issue 11). If the moby assertion below fails, moby was fixed:
// the package can then be replaced by it.
//
// The mount is made in a child process with its own (private) mount
// namespace, so that other processes on the host, containerd among them,
// never see the line.
func TestReadLongLine(t *testing.T) {
	if dir := os.Getenv(longMountEnv); dir != "" {
		longMountHelper(dir)
		return
	}
	if os.Geteuid() != 0 {
		t.Skip("mounting needs root")
	}
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestReadLongLine$", "-test.count=1")
	cmd.Env = append(os.Environ(), longMountEnv+"="+dir)
	// Go makes the new namespace's mounts private before exec.
	cmd.SysProcAttr = &syscall.SysProcAttr{Unshareflags: syscall.CLONE_NEWNS}
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("helper: %v\n%s", err, out)
	}
	line, _, _ := strings.Cut(string(out), "\n")
	var r longMountResult
	if err := json.Unmarshal([]byte(line), &r); err != nil {
		t.Fatalf("helper output %q: %v", out, err)
	}
	t.Logf("helper: %+v", r)
	if r.Longest <= 64<<10 {
		t.Fatalf("longest mountinfo line %d bytes; the test needs more than 64 KiB", r.Longest)
	}
	if r.OursErr != "" || !r.OursFound {
		t.Errorf("Read with a %d-byte line: err %q, deep mount found %v; want the whole table", r.Longest, r.OursErr, r.OursFound)
	}
	if r.MobyErr == "" {
		t.Errorf("github.com/moby/sys/mountinfo now reads a %d-byte line (found the mount: %v): replace this package with it", r.Longest, r.MobyFound)
	}
}

// longMountHelper runs in the child: it mounts, reads and prints a
// longMountResult as one JSON line. The mount goes with the namespace.
func longMountHelper(dir string) {
	var r longMountResult
	report := func() {
		b, _ := json.Marshal(r)
		os.Stdout.Write(append(b, '\n'))
		os.Exit(0)
	}
	fail := func(err error) {
		r.OursErr = "helper: " + err.Error()
		report()
	}
	if err := os.Chdir(dir); err != nil {
		fail(err)
	}
	real, err := filepath.EvalSymlinks(dir)
	if err != nil {
		fail(err)
	}
	name := strings.Repeat("d", 250)
	mp := real
	for range 300 {
		if err := os.Mkdir(name, 0o755); err != nil {
			fail(err)
		}
		if err := os.Chdir(name); err != nil {
			fail(err)
		}
		mp += "/" + name
	}
	if err := unix.Mount("long", ".", "tmpfs", 0, "size=4k"); err != nil {
		fail(err)
	}
	data, err := os.ReadFile(selfMountinfo)
	if err != nil {
		fail(err)
	}
	for l := range strings.SplitSeq(string(data), "\n") {
		r.Longest = max(r.Longest, len(l))
	}
	if ms, err := Read(); err != nil {
		r.OursErr = err.Error()
	} else {
		for _, m := range ms {
			r.OursFound = r.OursFound || (m.MountPoint == mp && m.Source == "long")
		}
	}
	if ms, err := moby.GetMounts(nil); err != nil {
		r.MobyErr = err.Error()
	} else {
		for _, m := range ms {
			r.MobyFound = r.MobyFound || m.Mountpoint == mp
		}
	}
	report()
}
