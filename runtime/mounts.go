package runtime

import (
	"context"
	"fmt"
	"path/filepath"

	"github.com/containerd/containerd/containers"
	"github.com/containerd/containerd/oci"
	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/nodeagent/nodeagent/internal/mountinfo"
)

// Propagation is a bind mount's mount propagation (the CRI's
// MountPropagation; kubelet maps a volumeMount's mountPropagation to it).
type Propagation int

const (
	// PropagationPrivate: no mount events in either direction (rprivate);
	// volumeMounts with mountPropagation None or unset.
	PropagationPrivate Propagation = iota
	// PropagationHostToContainer: mounts made on the host under the source
	// appear in the container, not the other way (rslave).
	PropagationHostToContainer
	// PropagationBidirectional: mount events go both ways (rshared); mounts
	// the container makes under the destination appear on the host and in
	// every container that mounts the same source with propagation.
	PropagationBidirectional
)

func (p Propagation) String() string {
	switch p {
	case PropagationPrivate:
		return "private"
	case PropagationHostToContainer:
		return "host-to-container"
	case PropagationBidirectional:
		return "bidirectional"
	}
	return fmt.Sprintf("Propagation(%d)", int(p))
}

// ociMounts turns the container's mounts into OCI bind mounts as
// containerd's CRI plugin does (WithMounts): options "rbind", then
// "rprivate", "rslave" or "rshared" by propagation, then "ro" or "rw". A
// mount with propagation needs its source on a mount that can carry it —
// shared for Bidirectional, shared or a slave for HostToContainer — and
// is an error otherwise (containerd's message), since runc could not make
// it propagate; its source is the source with symbolic links resolved.
// rootfsPropagation is what the spec's linux.rootfsPropagation must be:
// "rshared" when some mount is Bidirectional, else "rslave" when some
// mount is HostToContainer, else "" (runc's default). lookup returns the
// mount a resolved path is on (the agent shares containerd's mount
// namespace, so its mount table is containerd's).
func ociMounts(ms []Mount, lookup func(path string) (mountinfo.Mount, error)) (out []specs.Mount, rootfsPropagation string, err error) {
	out = make([]specs.Mount, 0, len(ms))
	for _, m := range ms {
		src := m.HostPath
		opts := []string{"rbind"}
		switch m.Propagation {
		case PropagationPrivate:
			opts = append(opts, "rprivate")
		case PropagationHostToContainer, PropagationBidirectional:
			if src, err = filepath.EvalSymlinks(m.HostPath); err != nil {
				return nil, "", fmt.Errorf("failed to resolve symlink %q: %w", m.HostPath, err)
			}
			on, err := lookup(src)
			if err != nil {
				return nil, "", err
			}
			if m.Propagation == PropagationBidirectional {
				if !on.Shared() {
					return nil, "", fmt.Errorf("path %q is mounted on %q but it is not a shared mount", src, on.MountPoint)
				}
				opts = append(opts, "rshared")
				rootfsPropagation = "rshared"
			} else {
				if !on.Shared() && !on.Slave() {
					return nil, "", fmt.Errorf("path %q is mounted on %q but it is not a shared or slave mount", src, on.MountPoint)
				}
				opts = append(opts, "rslave")
				if rootfsPropagation != "rshared" {
					rootfsPropagation = "rslave"
				}
			}
		default:
			return nil, "", fmt.Errorf("mount of %q at %q: unknown propagation %v", m.HostPath, m.ContainerPath, m.Propagation)
		}
		if m.ReadOnly {
			opts = append(opts, "ro")
		} else {
			opts = append(opts, "rw")
		}
		out = append(out, specs.Mount{Type: "bind", Source: src, Destination: m.ContainerPath, Options: opts})
	}
	return out, rootfsPropagation, nil
}

// lookupMount returns the mount of the agent's mount namespace that path
// (resolved) is on.
func lookupMount(path string) (mountinfo.Mount, error) {
	ms, err := mountinfo.Read()
	if err != nil {
		return mountinfo.Mount{}, err
	}
	m, ok := mountinfo.Containing(ms, path)
	if !ok {
		return mountinfo.Mount{}, fmt.Errorf("cannot find the mount point of %q", path)
	}
	return m, nil
}

// withRootfsPropagation sets linux.rootfsPropagation, the propagation runc
// gives the container's mount tree (containerd's CRI plugin sets it with
// the mounts, see ociMounts).
func withRootfsPropagation(p string) oci.SpecOpts {
	return func(_ context.Context, _ oci.Client, _ *containers.Container, s *specs.Spec) error {
		if s.Linux == nil {
			s.Linux = &specs.Linux{}
		}
		s.Linux.RootfsPropagation = p
		return nil
	}
}
