package runtime_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nodeagent/nodeagent/runtime"
)

// A container with a CDI device, on the real containerd and runc: the
// device's edits from a spec file in the runtime's CDI directories reach
// the container (its environment variable, its device node, usable), and a
// device no spec defines fails the creation.
func TestCDIDeviceInContainer(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "example.yaml"), []byte(`cdiVersion: "0.6.0"
kind: example.com/resource
devices:
- name: Dev-1
  containerEdits:
    env: ["DEV_ONE=one"]
    deviceNodes:
    - {path: /dev/cdi-null, hostPath: /dev/null, permissions: rw}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	rt, _ := newRuntimeWith(t, func(o *runtime.Options) { o.CDISpecDirs = []string{dir} })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	logPath := filepath.Join(t.TempDir(), "cdi.log")
	s := spec("cdi", "main", "sh", "-c", `echo "env=$DEV_ONE"; test -c /dev/cdi-null && echo x > /dev/cdi-null && echo "wrote the device"`)
	s.LogPath = logPath
	s.CDIDevices = []string{"example.com/resource=Dev-1"}
	id, err := rt.CreateContainer(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	if err := rt.StartContainer(ctx, id); err != nil {
		t.Fatal(err)
	}
	c := waitState(t, rt, id, runtime.StateExited)
	b := exitedOutput(t, rt, id, logPath)
	if c.ExitCode != 0 || !strings.Contains(string(b), "env=one") || !strings.Contains(string(b), "wrote the device") {
		t.Errorf("exit %d, log %q: want the CDI device's variable and a writable /dev/cdi-null", c.ExitCode, b)
	}

	s = spec("cdi", "missing", "true")
	s.CDIDevices = []string{"example.com/resource=Dev-2"}
	if _, err := rt.CreateContainer(ctx, s); err == nil || !strings.Contains(err.Error(), "example.com/resource=Dev-2") {
		t.Errorf("a device no spec defines: %v", err)
	}
}
