package runtime

import (
	"context"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	runcoptions "github.com/containerd/containerd/api/types/runc/options"
	"github.com/containerd/containerd/containers"
	"github.com/containerd/containerd/oci"
	specs "github.com/opencontainers/runtime-spec/specs-go"
)

// SystemdScopePrefix is the prefix of containers' systemd scopes
// (<prefix>-<id>.scope), the one containerd's CRI plugin uses, so that
// tools that know kubelet's nodes recognise them.
const SystemdScopePrefix = "cri-containerd"

// containerCgroupsPath is linux.cgroupsPath of a new container: parent/id
// with cgroupfs; "<slice>:cri-containerd:<id>" with Options.SystemdCgroup,
// where parent is the pod's slice unit.
func (r *Runtime) containerCgroupsPath(parent, id string) (string, error) {
	if !r.opts.SystemdCgroup {
		if !strings.HasPrefix(parent, "/") {
			return "", fmt.Errorf("%w: cgroup parent %q must be an absolute cgroupfs path", ErrInvalidSpec, parent)
		}
		return path.Join(parent, id), nil
	}
	if strings.Contains(parent, "/") || !strings.HasSuffix(parent, ".slice") {
		return "", fmt.Errorf("%w: cgroup parent %q must be a systemd slice (name.slice) with the systemd cgroup driver", ErrInvalidSpec, parent)
	}
	return parent + ":" + SystemdScopePrefix + ":" + id, nil
}

// runtimeOptions are the shim's options: runc's SystemdCgroup with the
// systemd driver (containerd's CRI plugin sets the same), else none.
func (r *Runtime) runtimeOptions(runtimeType string) any {
	if r.opts.SystemdCgroup && runtimeType == DefaultRuntimeType {
		return &runcoptions.Options{SystemdCgroup: true}
	}
	return nil
}

// withOOMScoreAdj sets the container process's oom_score_adj, no lower
// than this process may set it (see oomScoreAdjFloor).
func withOOMScoreAdj(v int) oci.SpecOpts {
	v = max(v, oomScoreAdjFloor())
	return func(_ context.Context, _ oci.Client, _ *containers.Container, s *specs.Spec) error {
		if s.Process == nil {
			s.Process = &specs.Process{}
		}
		s.Process.OOMScoreAdj = &v
		return nil
	}
}

// oomScoreAdjFloor is the lowest oom_score_adj runc can give a container
// started on this process's behalf: any (-1000) with CAP_SYS_RESOURCE;
// without it (an unprivileged or sandboxed agent) the kernel refuses to go
// below the agent's own value and runc would fail to start the container,
// so scores are raised to it, as containerd's restrict_oom_score_adj does.
var oomScoreAdjFloor = sync.OnceValue(func() int {
	const floor = -1000
	status, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return floor
	}
	return restrictedOOMScoreAdjFloor(string(status), func() (int, error) {
		b, err := os.ReadFile("/proc/self/oom_score_adj")
		if err != nil {
			return 0, err
		}
		return strconv.Atoi(strings.TrimSpace(string(b)))
	})
})

// OOMScoreAdjFloor is the lowest oom_score_adj a container of this agent
// can get (-1000 with CAP_SYS_RESOURCE, else the agent's own score when it
// is first asked: call it after the agent has set its own).
func OOMScoreAdjFloor() int { return oomScoreAdjFloor() }

// restrictedOOMScoreAdjFloor decides the floor from /proc/self/status's
// CapEff and the process's own score.
func restrictedOOMScoreAdjFloor(status string, own func() (int, error)) int {
	const floor, capSysResource = -1000, 24
	for _, l := range strings.Split(status, "\n") {
		hex, ok := strings.CutPrefix(l, "CapEff:")
		if !ok {
			continue
		}
		caps, err := strconv.ParseUint(strings.TrimSpace(hex), 16, 64)
		if err != nil || caps&(1<<capSysResource) != 0 {
			return floor
		}
		if v, err := own(); err == nil {
			return v
		}
		return floor
	}
	return floor
}

// CgroupfsPath is a container's cgroupsPath as a path below each cgroup
// mount: a systemd-driver "slice:prefix:name" becomes
// /a.slice/a-b.slice/<prefix>-<name>.scope; cgroupfs paths are returned
// unchanged.
func CgroupfsPath(p string) string {
	parts := strings.Split(p, ":")
	if len(parts) != 3 || strings.HasPrefix(p, "/") {
		return p
	}
	slice, prefix, name := parts[0], parts[1], parts[2]
	var dir string
	if slice != "" && slice != "-.slice" {
		// a-b-c.slice lives in a.slice/a-b.slice/a-b-c.slice
		base := strings.TrimSuffix(slice, ".slice")
		comps := strings.Split(base, "-")
		for i := range comps {
			dir = filepath.Join(dir, strings.Join(comps[:i+1], "-")+".slice")
		}
	}
	unit := name
	if !strings.HasSuffix(name, ".slice") {
		unit = prefix + "-" + name + ".scope"
	}
	return "/" + filepath.Join(dir, unit)
}
