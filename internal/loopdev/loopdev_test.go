package loopdev

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// A real loop device over a file: attached once (a second Attach finds
// it), found by its backing file through a symlink too, detached.
func TestAttachFindDetach(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("loop devices need root")
	}
	if _, err := os.Stat("/dev/loop-control"); err != nil {
		t.Skipf("no loop devices here: %v", err)
	}
	dir := t.TempDir()
	file := filepath.Join(dir, "backing")
	if err := os.WriteFile(file, make([]byte, 1<<20), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Find(file); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Find before Attach: %v, want ErrNotFound", err)
	}
	dev, err := Attach(file)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = Detach(file) })
	fi, err := os.Stat(dev)
	if err != nil || fi.Mode()&os.ModeDevice == 0 {
		t.Fatalf("%s: %v %v, want a block device", dev, fi, err)
	}
	again, err := Attach(file)
	if err != nil || again != dev {
		t.Fatalf("second Attach %q %v, want the same %s", again, err, dev)
	}
	link := filepath.Join(dir, "link")
	if err := os.Symlink(file, link); err != nil {
		t.Fatal(err)
	}
	if got, err := Find(link); err != nil || got != dev {
		t.Errorf("Find through a symlink %q %v, want %s", got, err, dev)
	}
	if err := Detach(file); err != nil {
		t.Fatal(err)
	}
	if _, err := Find(file); !errors.Is(err, ErrNotFound) {
		t.Errorf("Find after Detach: %v, want ErrNotFound", err)
	}
	if err := Detach(file); err != nil {
		t.Errorf("second Detach: %v", err)
	}
	if _, err := Find(filepath.Join(dir, "absent")); !errors.Is(err, ErrNotFound) {
		t.Errorf("Find of an absent file: %v", err)
	}
}
