package runtime_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// A pod's cgroup outlives its containers (runc removes only theirs) until
// RemovePodCgroup, which refuses while a container still runs.
func TestRemovePodCgroup(t *testing.T) {
	rt, cd := newRuntime(t)
	ctx := context.Background()
	id, err := rt.CreateContainer(ctx, spec("cg", "c", "sleep", "60"))
	if err != nil {
		t.Fatal(err)
	}
	if err := rt.StartContainer(ctx, id); err != nil {
		t.Fatal(err)
	}
	c := waitState(t, rt, id, "running")
	podCgroups := func() []string {
		var found []string
		for _, root := range []string{"/sys/fs/cgroup/memory", "/sys/fs/cgroup/unified", "/sys/fs/cgroup/pids", "/sys/fs/cgroup"} {
			d := filepath.Join(root, cd.CgroupParent, "uid-cg")
			if st, err := os.Stat(d); err == nil && st.IsDir() {
				found = append(found, d)
			}
		}
		return found
	}
	if len(podCgroups()) == 0 {
		t.Fatalf("no pod cgroup found for container with cgroupsPath %s", c.CgroupsPath)
	}
	if err := rt.RemovePodCgroup(types.UID("uid-cg")); err == nil {
		t.Fatal("removed the cgroup of a pod with a running container")
	}
	if err := rt.StopContainer(ctx, id, time.Second); err != nil {
		t.Fatal(err)
	}
	if err := rt.RemoveContainer(ctx, id); err != nil {
		t.Fatal(err)
	}
	if len(podCgroups()) == 0 {
		t.Fatal("pod cgroup gone with its container: the test proves nothing")
	}
	// An empty container cgroup left behind (a cancelled task creation)
	// does not keep the pod's cgroup busy.
	leftover := filepath.Join(podCgroups()[0], "leftover-container")
	if err := os.Mkdir(leftover, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := rt.RemovePodCgroup(types.UID("uid-cg")); err != nil {
		t.Fatal(err)
	}
	if left := podCgroups(); len(left) > 0 {
		t.Fatalf("pod cgroups left: %v", left)
	}
	if err := rt.RemovePodCgroup(types.UID("uid-cg")); err != nil {
		t.Fatalf("second removal: %v", err)
	}
	if err := rt.RemovePodCgroup(types.UID("../x")); err == nil {
		t.Fatal("accepted a UID with a path in it")
	}
}
