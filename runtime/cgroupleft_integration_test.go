package runtime_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/nodeagent/nodeagent/internal/mountinfo"
)

// A container whose task creation was cut short (the agent SIGKILLed
// while runc made it) leaves its empty cgroup; removing the container,
// never started, removes that cgroup too (found by e2e/fault's
// TestAgentSIGKILLedDuringPodChurn: such cgroups stayed in live pods').
func TestRemoveContainerRemovesItsLeftoverCgroup(t *testing.T) {
	rt, cd := newRuntime(t)
	ctx := context.Background()
	s := spec("cgleft", "c", "sleep", "60")
	s.CgroupParent = cd.CgroupParent + "/kubepods/besteffort/podcgleft"
	id, err := rt.CreateContainer(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	ms, err := mountinfo.Read()
	if err != nil {
		t.Fatal(err)
	}
	roots := mountinfo.CgroupMountPoints(ms)
	if len(roots) == 0 {
		t.Skip("no cgroup hierarchy mounted")
	}
	// What runc leaves when its create is cut short: the container's
	// cgroup, empty, in every hierarchy.
	var dirs []string
	for _, r := range roots {
		d := filepath.Join(r, s.CgroupParent, id)
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		dirs = append(dirs, d)
	}
	t.Cleanup(func() {
		for _, r := range roots {
			_ = os.Remove(filepath.Join(r, s.CgroupParent, id))
			_ = os.Remove(filepath.Join(r, s.CgroupParent))
		}
	})
	if err := rt.RemoveContainer(ctx, id); err != nil {
		t.Fatal(err)
	}
	for _, d := range dirs {
		if _, err := os.Stat(d); err == nil {
			t.Errorf("%s left after the container was removed", d)
		}
	}
}
