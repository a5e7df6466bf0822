package runtime_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	utilptr "k8s.io/utils/ptr"

	"github.com/nodeagent/nodeagent/internal/testing/testimage"
	"github.com/nodeagent/nodeagent/runtime"
)

// RunAsUser is resolved through the image's /etc/passwd (primary group) in
// the container's snapshot, supplemental groups follow, and the image's
// user is readable for runAsNonRoot. It also logs what the user lookup
// (one read-only mount of the snapshot) costs per container creation.
func TestSecurityUserAgainstContainerd(t *testing.T) {
	rt, _ := newRuntime(t)
	ctx := context.Background()
	if u, err := rt.ImageUser(ctx, testimage.Ref); err != nil || u != "" {
		t.Fatalf("ImageUser = %q, %v; want the test image's empty user", u, err)
	}
	dir := t.TempDir()
	s := spec("sec", "c", "cat", "/proc/self/status")
	s.LogPath = filepath.Join(dir, "c.log")
	s.Security = runtime.Security{RunAsUser: utilptr.To[int64](0), SupplementalGroups: []int64{5, 0}, NoNewPrivileges: true}
	id, err := rt.CreateContainer(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rt.RemoveContainer(context.Background(), id) })
	if err := rt.StartContainer(ctx, id); err != nil {
		t.Fatal(err)
	}
	waitState(t, rt, id, runtime.StateExited)
	b := exitedOutput(t, rt, id, s.LogPath)
	for _, w := range []string{"Uid:\t0\t0\t0\t0", "Gid:\t0\t0\t0\t0", "Groups:\t0 5", "NoNewPrivs:\t1"} {
		if !strings.Contains(string(b), w) {
			t.Errorf("%q missing from\n%s", w, b)
		}
	}

	// Creation cost with and without the user lookup.
	const n = 5
	measure := func(sec runtime.Security) time.Duration {
		var total time.Duration
		for i := 0; i < n; i++ {
			sp := spec("sec", "m", "true")
			sp.Security = sec
			start := time.Now()
			id, err := rt.CreateContainer(ctx, sp)
			total += time.Since(start)
			if err != nil {
				t.Fatal(err)
			}
			_ = rt.RemoveContainer(ctx, id)
		}
		return total / n
	}
	plain := measure(runtime.Security{})
	restricted := measure(runtime.Security{RunAsUser: utilptr.To[int64](1000), NoNewPrivileges: true, CapDrop: []string{"ALL"}, Seccomp: runtime.SeccompRuntimeDefault})
	t.Logf("CreateContainer: %v without a securityContext, %v restricted (runAsUser lookup, seccomp profile)", plain, restricted)
}
