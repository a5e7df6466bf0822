package cm

import (
	"crypto/rand"
	"encoding/hex"
	"io"
	"log/slog"
	"os"
	"testing"

	"github.com/opencontainers/cgroups"
	"github.com/opencontainers/cgroups/systemd"
)

// The systemd driver against a real systemd, skipped where PID 1 is not
// systemd: the slices are made through D-Bus with the pod's limits and
// removed again. hack/test-systemd.sh runs it (go test -c) inside its
// systemd-nspawn container, after making the container's cgroup v1
// controller hierarchies writable (hack/systemd-test/cgroup-driver.sh).
func TestManagerSystemdSlices(t *testing.T) {
	if os.Geteuid() != 0 || testing.Short() || !systemd.IsRunningSystemd() {
		t.Skip("needs root and systemd as PID 1")
	}
	b := make([]byte, 3)
	_, _ = rand.Read(b)
	root := CgroupName{"nacmtest" + hex.EncodeToString(b)}
	m, err := New(Config{Systemd: true, Root: root, CgroupsPerQOS: true, PodPidsLimit: 32,
		Allocatable: res("cpu", "1", "memory", "1Gi"), EnforceAllocatable: true,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, n := range []CgroupName{m.burstable(), m.besteffort(), m.kubepods(), root} {
			if err := m.destroy(n); err != nil {
				t.Logf("cleanup %s: %v", n.ToSystemd(), err)
			}
		}
	})
	if err := m.Setup(); err != nil {
		t.Fatal(err)
	}
	kp := m.Path(m.kubepods())
	if want := "/" + root[0] + ".slice/" + root[0] + "-kubepods.slice"; kp != want {
		t.Fatalf("kubepods at %s, want %s", kp, want)
	}
	if got := cgroupFile(t, kp, "memory.max"); got != "1073741824" {
		t.Errorf("kubepods memory = %s, want 1Gi", got)
	}
	pod := podOf(ctr("a", res("cpu", "250m", "memory", "32Mi"), res("cpu", "250m", "memory", "32Mi")))
	pod.UID = "aa-bb"
	parent, err := m.EnsurePod(pod)
	if err != nil {
		t.Fatal(err)
	}
	if want := root[0] + "-kubepods-podaa_bb.slice"; parent != want {
		t.Errorf("container parent %s, want %s", parent, want)
	}
	dir := kp + "/" + parent
	if got := cgroupFile(t, dir, "memory.max"); got != "33554432" {
		t.Errorf("pod memory = %s, want 32Mi", got)
	}
	want := "25000"
	if cgroups.IsCgroup2UnifiedMode() {
		want = "25000 100000"
	}
	if got := cgroupFile(t, dir, "cpu.max"); got != want {
		t.Errorf("pod cpu quota = %s, want %s", got, want)
	}
	if err := m.RemovePod(pod.UID); err != nil {
		t.Fatal(err)
	}
	if exists(dir) {
		t.Errorf("%s still exists after RemovePod", dir)
	}
}
