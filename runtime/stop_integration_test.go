package runtime_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/opencontainers/cgroups"

	"github.com/nodeagent/nodeagent/runtime"
)

// On cgroup v1, runc's "kill --all" signals the processes it finds in the
// container's devices cgroup. With the systemd driver, systemd moves a
// container's processes from their scope's devices cgroup into the pod
// slice's when it re-realizes the slice (seen in hack/test-systemd.sh's
// container for the first pod below kubepods-burstable.slice), and the
// SIGKILL then reached nothing: the pod never stopped. The same move done
// by hand here: Stop must still kill the container after its grace period.
func TestStopKillsInitOutsideItsDevicesCgroup(t *testing.T) {
	if cgroups.IsCgroup2UnifiedMode() {
		t.Skip("cgroup v1 only: runc finds a container's processes through its devices cgroup there")
	}
	rt, _ := newRuntime(t)
	ctx := context.Background()
	id, err := rt.CreateContainer(ctx, spec("pk", "main", "sleep", "600"))
	if err != nil {
		t.Fatal(err)
	}
	if err := rt.StartContainer(ctx, id); err != nil {
		t.Fatal(err)
	}
	c := waitState(t, rt, id, runtime.StateRunning)
	dir, err := devicesCgroup(c.Pid)
	if err != nil {
		t.Fatal(err)
	}
	parent := filepath.Dir(dir)
	if err := os.WriteFile(filepath.Join(parent, "cgroup.procs"), []byte(fmt.Sprint(c.Pid)), 0o644); err != nil {
		t.Fatalf("move %d to %s: %v", c.Pid, parent, err)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "cgroup.procs")); len(strings.TrimSpace(string(b))) != 0 {
		t.Fatalf("%s still has processes: %q", dir, b)
	}

	start := time.Now()
	sctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	if err := rt.StopContainer(sctx, id, 200*time.Millisecond); err != nil {
		t.Fatalf("stop after %s: %v", time.Since(start), err)
	}
	c, err = rt.InspectContainer(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if c.State != runtime.StateExited || c.ExitCode != 137 {
		t.Fatalf("after stop: %+v", c)
	}
}

// devicesCgroup returns the devices cgroup directory of process pid.
func devicesCgroup(pid uint32) (string, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/cgroup", pid))
	if err != nil {
		return "", err
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		parts := strings.SplitN(s.Text(), ":", 3)
		if len(parts) == 3 && parts[1] == "devices" {
			mnt, err := cgroups.FindCgroupMountpoint("", "devices")
			if err != nil {
				return "", err
			}
			return filepath.Join(mnt, parts[2]), nil
		}
	}
	return "", fmt.Errorf("process %d has no devices cgroup", pid)
}
