package runtime_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/nodeagent/nodeagent/internal/netns"
	"github.com/nodeagent/nodeagent/runtime"
)

// netProbe prints what a container sees of its network: the namespace
// inode, the interfaces (/proc/net/dev, per namespace) and lo's flags
// (sysfs mounted in the container shows its namespace).
const netProbe = `ls -l /proc/self/ns/net; echo IFACES; cat /proc/net/dev; echo LOFLAGS $(cat /sys/class/net/lo/flags)`

// runProbe runs netProbe in a container of pod "netpod" and returns its output.
func runProbe(t *testing.T, rt *runtime.Runtime, name string, mod func(*runtime.ContainerSpec)) string {
	t.Helper()
	ctx := context.Background()
	s := spec("netpod", name, "sh", "-c", netProbe)
	s.LogPath = filepath.Join(t.TempDir(), name+".log")
	mod(&s)
	id, err := rt.CreateContainer(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	if err := rt.StartContainer(ctx, id); err != nil {
		t.Fatal(err)
	}
	c := waitState(t, rt, id, runtime.StateExited)
	b := exitedOutput(t, rt, id, s.LogPath)
	if c.ExitCode != 0 {
		t.Fatalf("probe %s exited %d: %s", name, c.ExitCode, b)
	}
	t.Logf("%s:\n%s", name, b)
	return string(b)
}

// ifaces lists the interface names of /proc/net/dev output.
func ifaces(out string) []string {
	var names []string
	for _, l := range strings.Split(out, "\n") {
		if name, _, ok := strings.Cut(l, ":"); ok && !strings.Contains(name, "|") && !strings.Contains(l, "->") {
			names = append(names, strings.TrimSpace(name))
		}
	}
	return names
}

func TestPodNetNS(t *testing.T) {
	rt, _ := newRuntime(t)
	path := filepath.Join(t.TempDir(), "netns", "pod")
	if err := netns.Create(path); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = netns.Remove(path) })
	var st syscall.Stat_t
	if err := syscall.Stat(path, &st); err != nil {
		t.Fatal(err)
	}
	wantNS := fmt.Sprintf("net:[%d]", st.Ino)

	joined := func(s *runtime.ContainerSpec) { s.NetNSPath = path }
	a := runProbe(t, rt, "a", joined)
	b := runProbe(t, rt, "b", joined)
	own := runProbe(t, rt, "own", func(*runtime.ContainerSpec) {})

	for name, out := range map[string]string{"a": a, "b": b} {
		if !strings.Contains(out, wantNS) {
			t.Errorf("container %s is not in the pod's namespace %s", name, wantNS)
		}
		if got := ifaces(out); len(got) != 1 || got[0] != "lo" {
			t.Errorf("container %s sees interfaces %v, want only lo", name, got)
		}
		if !strings.Contains(out, "LOFLAGS 0x9") { // IFF_UP|IFF_LOOPBACK
			t.Errorf("container %s: lo is not up", name)
		}
	}
	if strings.Contains(own, wantNS) {
		t.Error("a container without NetNSPath joined the pod's namespace")
	}
	host, err := net.Interfaces()
	if err != nil {
		t.Fatal(err)
	}
	for _, out := range []string{a, own} {
		seen := map[string]bool{}
		for _, n := range ifaces(out) {
			seen[n] = true
		}
		for _, h := range host {
			if h.Name != "lo" && seen[h.Name] {
				t.Errorf("a non-hostNetwork container sees the host's interface %s", h.Name)
			}
		}
	}
	hostNet := runProbe(t, rt, "host", func(s *runtime.ContainerSpec) { s.HostNetwork = true })
	if len(host) > 1 && len(ifaces(hostNet)) < 2 {
		t.Errorf("a hostNetwork container sees only %v", ifaces(hostNet))
	}
}

func TestNetNSPathValidation(t *testing.T) {
	rt, _ := newRuntime(t)
	for _, tc := range []struct {
		desc string
		mod  func(*runtime.ContainerSpec)
		want string
	}{
		{"relative", func(s *runtime.ContainerSpec) { s.NetNSPath = "run/ns" }, "must be absolute"},
		{"with hostNetwork", func(s *runtime.ContainerSpec) { s.NetNSPath = "/run/ns"; s.HostNetwork = true }, "mutually exclusive"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			s := spec("v", "main", "true")
			tc.mod(&s)
			_, err := rt.CreateContainer(context.Background(), s)
			if !errors.Is(err, runtime.ErrInvalidSpec) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("CreateContainer = %v, want ErrInvalidSpec mentioning %q", err, tc.want)
			}
		})
	}
	s := spec("v", "main", "true")
	s.NetNSPath = filepath.Join(t.TempDir(), "missing")
	if _, err := rt.CreateContainer(context.Background(), s); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("CreateContainer with a missing namespace: %v, want ErrNotExist", err)
	}
}
