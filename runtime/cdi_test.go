package runtime

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	specs "github.com/opencontainers/runtime-spec/specs-go"
)

// A CDI spec as a device plugin's vendor writes it: one device with a
// device node, an environment variable and a mount of its own, and an
// edit common to every device of the spec.
const testCDISpec = `cdiVersion: "0.6.0"
kind: example.com/resource
devices:
- name: Dev-1
  containerEdits:
    env: ["DEV_ONE=1"]
    deviceNodes:
    - path: /dev/cdi-null
      hostPath: /dev/null
      permissions: rw
    mounts:
    - hostPath: /tmp
      containerPath: /var/dev-one
      options: [ro, bind]
- name: Dev-2
  containerEdits:
    env: ["DEV_TWO=2"]
containerEdits:
  env: ["EXAMPLE_RESOURCE=yes"]
`

func TestCDIDevices(t *testing.T) {
	etc, run := t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(etc, "example.yaml"), []byte(testCDISpec), 0o644); err != nil {
		t.Fatal(err)
	}
	reg := &cdiRegistry{dirs: []string{etc, run}}
	s := &specs.Spec{Process: &specs.Process{Env: []string{"PATH=/bin"}}, Linux: &specs.Linux{}}
	if err := reg.withCDIDevices([]string{"example.com/resource=Dev-1"})(context.Background(), nil, nil, s); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"PATH=/bin", "DEV_ONE=1", "EXAMPLE_RESOURCE=yes"} {
		if !slices.Contains(s.Process.Env, want) {
			t.Errorf("env %v lacks %s", s.Process.Env, want)
		}
	}
	if slices.Contains(s.Process.Env, "DEV_TWO=2") {
		t.Errorf("env %v has the other device's variable", s.Process.Env)
	}
	if len(s.Linux.Devices) != 1 || s.Linux.Devices[0].Path != "/dev/cdi-null" || s.Linux.Devices[0].Major != 1 || s.Linux.Devices[0].Minor != 3 {
		t.Errorf("device nodes %+v, want /dev/cdi-null as /dev/null (1:3)", s.Linux.Devices)
	}
	if s.Linux.Resources == nil || !slices.ContainsFunc(s.Linux.Resources.Devices, func(d specs.LinuxDeviceCgroup) bool {
		return d.Allow && d.Major != nil && *d.Major == 1 && d.Minor != nil && *d.Minor == 3 && d.Access == "rw"
	}) {
		t.Errorf("devices cgroup does not allow 1:3 rw: %+v", s.Linux.Resources)
	}
	if !slices.ContainsFunc(s.Mounts, func(m specs.Mount) bool { return m.Destination == "/var/dev-one" && m.Source == "/tmp" }) {
		t.Errorf("mounts %+v lack /var/dev-one", s.Mounts)
	}

	// A spec written after the registry was first used is read (the
	// directories are read again for every container), and a device in
	// /var/run/cdi overrides the same device in /etc/cdi.
	if err := os.WriteFile(filepath.Join(run, "example.json"), []byte(`{"cdiVersion":"0.6.0","kind":"example.com/resource","devices":[{"name":"Dev-2","containerEdits":{"env":["DEV_TWO=run"]}}]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	s = &specs.Spec{Process: &specs.Process{}, Linux: &specs.Linux{}}
	if err := reg.withCDIDevices([]string{"example.com/resource=Dev-2"})(context.Background(), nil, nil, s); err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(s.Process.Env, "DEV_TWO=run") || slices.Contains(s.Process.Env, "DEV_TWO=2") {
		t.Errorf("env %v, want /var/run/cdi's DEV_TWO=run", s.Process.Env)
	}

	// A device no spec defines fails the container, naming it.
	err := reg.withCDIDevices([]string{"example.com/resource=Dev-9"})(context.Background(), nil, nil, &specs.Spec{Process: &specs.Process{}, Linux: &specs.Linux{}})
	if err == nil || !strings.Contains(err.Error(), "example.com/resource=Dev-9") {
		t.Errorf("unknown device: %v", err)
	}
	// No devices: nothing read, nothing changed.
	s = &specs.Spec{}
	if err := (*cdiRegistry)(nil).withCDIDevices(nil)(context.Background(), nil, nil, s); err != nil || s.Process != nil {
		t.Errorf("no devices: %v, %+v", err, s)
	}
}
