package volume

import (
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/nodeagent/nodeagent/internal/mountinfo"
)

// privateBase mounts a private tmpfs in a temporary directory, so that
// what is below it does not depend on the host's propagation (systemd
// makes / shared, this development host's / is private).
func privateBase(t *testing.T) string {
	t.Helper()
	needRootForVolumes(t)
	base := t.TempDir()
	if err := unix.Mount("tmpfs", base, "tmpfs", 0, "size=1m"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = unix.Unmount(base, unix.MNT_DETACH) })
	if err := unix.Mount("", base, "", unix.MS_PRIVATE, ""); err != nil {
		t.Fatal(err)
	}
	return base
}

// mountsAt lists the mounts with mount point p, bottom first.
func mountsAt(t *testing.T, p string) []mountinfo.Mount {
	t.Helper()
	ms, err := mountinfo.Read()
	if err != nil {
		t.Fatal(err)
	}
	var out []mountinfo.Mount
	for _, m := range ms {
		if m.MountPoint == p {
			out = append(out, m)
		}
	}
	return out
}

func TestMakeRSharedBindsAPlainDirectory(t *testing.T) {
	base := privateBase(t)
	root := filepath.Join(base, "root")
	// A mount already under the directory (a pod volume from before).
	vol := filepath.Join(root, "pods", "u", "volumes", "v")
	if err := os.MkdirAll(vol, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount("tmpfs", vol, "tmpfs", 0, "size=1m"); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(vol, "f"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := MakeRShared(root); err != nil {
		t.Fatal(err)
	}
	at := mountsAt(t, root)
	if len(at) != 1 || !at[0].Shared() {
		t.Fatalf("mounts at %s after MakeRShared: %+v; want one shared bind mount", root, at)
	}
	// The volume is still seen, and shared too (recursive).
	if b, err := os.ReadFile(filepath.Join(vol, "f")); err != nil || string(b) != "x" {
		t.Errorf("the volume mounted before is hidden: %q, %v", b, err)
	}
	if v := mountsAt(t, vol); len(v) == 0 || !v[len(v)-1].Shared() {
		t.Errorf("mounts at %s: %+v; want the top one shared", vol, v)
	}
	// Again (an agent restart): nothing more is mounted.
	if err := MakeRShared(root); err != nil {
		t.Fatal(err)
	}
	if again := mountsAt(t, root); len(again) != 1 {
		t.Errorf("a second MakeRShared stacked a mount: %+v", again)
	}
	// A mount made below root now propagates to a bind of root's subtree
	// that is a slave of it (what runc makes of an rslave mount).
	view := filepath.Join(base, "view")
	if err := os.Mkdir(view, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount(filepath.Join(root, "pods"), view, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount("", view, "", unix.MS_SLAVE|unix.MS_REC, ""); err != nil {
		t.Fatal(err)
	}
	late := filepath.Join(root, "pods", "late")
	if err := os.Mkdir(late, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount("tmpfs", late, "tmpfs", 0, "size=1m"); err != nil {
		t.Fatal(err)
	}
	if len(mountsAt(t, filepath.Join(view, "late"))) == 0 {
		t.Error("a mount made under the shared root did not propagate to its slave")
	}
	for _, p := range []string{view, late, vol, root} {
		_ = unix.Unmount(p, unix.MNT_DETACH)
	}
}

func TestMakeRSharedLeavesASharedMountAlone(t *testing.T) {
	base := privateBase(t)
	if err := unix.Mount("", base, "", unix.MS_SHARED, ""); err != nil {
		t.Fatal(err)
	}
	root := filepath.Join(base, "root")
	if err := os.Mkdir(root, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := MakeRShared(root); err != nil {
		t.Fatal(err)
	}
	if at := mountsAt(t, root); len(at) != 0 {
		t.Errorf("MakeRShared mounted %+v although %s is on a shared mount", at, root)
	}
}

func TestMakeRSharedMountPoint(t *testing.T) {
	base := privateBase(t)
	root := filepath.Join(base, "root")
	if err := os.Mkdir(root, 0o755); err != nil {
		t.Fatal(err)
	}
	// A dedicated filesystem for rootDir, private.
	if err := unix.Mount("tmpfs", root, "tmpfs", 0, "size=1m"); err != nil {
		t.Fatal(err)
	}
	defer unix.Unmount(root, unix.MNT_DETACH)
	if err := MakeRShared(root); err != nil {
		t.Fatal(err)
	}
	if at := mountsAt(t, root); len(at) != 1 || !at[0].Shared() || at[0].FSType != "tmpfs" {
		t.Errorf("mounts at %s: %+v; want the tmpfs itself, shared, no bind on top", root, at)
	}
	if err := MakeRShared(filepath.Join(base, "missing")); err == nil {
		t.Error("MakeRShared of a missing directory succeeded")
	}
}
