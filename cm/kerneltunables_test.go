package cm

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// sysctlTree writes a /proc/sys-like tree under a temporary directory
// with the given contents by name.
func sysctlTree(t *testing.T, values map[string]string) string {
	t.Helper()
	root := t.TempDir()
	for name, v := range values {
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(v), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

var discard = slog.New(slog.NewTextHandler(io.Discard, nil))

// The list is kubelet 1.34's setupKernelTunables'.
func TestKernelTunablesAreKubelets(t *testing.T) {
	want := "vm/overcommit_memory=1 vm/panic_on_oom=0 kernel/panic=10 kernel/panic_on_oops=1 kernel/keys/root_maxkeys=1000000 kernel/keys/root_maxbytes=25000000"
	var got []string
	for _, k := range KernelTunables {
		got = append(got, fmt.Sprintf("%s=%d", k.Name, k.Value))
	}
	if strings.Join(got, " ") != want {
		t.Errorf("got %s", strings.Join(got, " "))
	}
}

// A host whose tunables differ from kubelet's: with protectKernelDefaults
// the start fails naming each differing flag with kubelet's message and
// nothing is written; without, the differing ones are written and the
// others left alone (their trailing newline stays).
func TestSetupKernelTunables(t *testing.T) {
	differing := map[string]string{
		"vm/overcommit_memory":      "0\n",
		"vm/panic_on_oom":           "0\n",
		"kernel/panic":              "0\n",
		"kernel/panic_on_oops":      "1\n",
		"kernel/keys/root_maxkeys":  "200\n",
		"kernel/keys/root_maxbytes": "25000000\n",
	}
	t.Run("protect", func(t *testing.T) {
		root := sysctlTree(t, differing)
		err := SetupKernelTunables(Sysctls{root}, true, discard)
		want := "[invalid kernel flag: vm/overcommit_memory, expected value: 1, actual value: 0, " +
			"invalid kernel flag: kernel/panic, expected value: 10, actual value: 0, " +
			"invalid kernel flag: kernel/keys/root_maxkeys, expected value: 1000000, actual value: 200]"
		if err == nil || err.Error() != want {
			t.Fatalf("error %v\nwant %s", err, want)
		}
		for name, v := range differing {
			if b, _ := os.ReadFile(filepath.Join(root, name)); string(b) != v {
				t.Errorf("%s changed to %q", name, b)
			}
		}
	})
	t.Run("modify", func(t *testing.T) {
		root := sysctlTree(t, differing)
		if err := SetupKernelTunables(Sysctls{root}, false, discard); err != nil {
			t.Fatal(err)
		}
		for _, k := range KernelTunables {
			b, _ := os.ReadFile(filepath.Join(root, k.Name))
			want := strconv.Itoa(k.Value)
			if differing[k.Name] == want+"\n" {
				want += "\n" // already right: not written
			}
			if string(b) != want {
				t.Errorf("%s = %q, want %q", k.Name, b, want)
			}
		}
		// A second start finds nothing to do.
		if err := SetupKernelTunables(Sysctls{root}, true, discard); err != nil {
			t.Errorf("after setting: %v", err)
		}
	})
	t.Run("unreadable", func(t *testing.T) {
		values := map[string]string{}
		for _, k := range KernelTunables {
			values[k.Name] = strconv.Itoa(k.Value)
		}
		delete(values, "kernel/keys/root_maxbytes")
		values["vm/panic_on_oom"] = "x"
		for _, protect := range []bool{true, false} {
			err := SetupKernelTunables(Sysctls{sysctlTree(t, values)}, protect, discard)
			if err == nil || !strings.Contains(err.Error(), "root_maxbytes: no such file") || !strings.Contains(err.Error(), `parsing "x"`) {
				t.Errorf("protect %v: %v", protect, err)
			}
		}
	})
}

// On this host's real /proc/sys, read only (protectKernelDefaults never
// writes): the verdict is the one a direct read of each file gives,
// whatever the host holds.
func TestSetupKernelTunablesHostReadOnly(t *testing.T) {
	var want []string
	for _, k := range KernelTunables {
		b, err := os.ReadFile(filepath.Join("/proc/sys", k.Name))
		if err != nil {
			t.Fatal(err)
		}
		v, err := strconv.Atoi(strings.TrimSpace(string(b)))
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%s = %d (kubelet's %d)", k.Name, v, k.Value)
		if v != k.Value {
			want = append(want, fmt.Sprintf("invalid kernel flag: %s, expected value: %d, actual value: %d", k.Name, k.Value, v))
		}
	}
	err := SetupKernelTunables(Sysctls{ProcSys}, true, discard)
	switch {
	case len(want) == 0 && err != nil:
		t.Errorf("host matches kubelet's values, got %v", err)
	case len(want) == 1 && (err == nil || err.Error() != want[0]):
		t.Errorf("got %v, want %s", err, want[0])
	case len(want) > 1 && (err == nil || err.Error() != "["+strings.Join(want, ", ")+"]"):
		t.Errorf("got %v, want %q", err, want)
	}
}
