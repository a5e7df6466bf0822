package runtime

import (
	"context"
	"fmt"
	"sync"

	"github.com/containerd/containerd/containers"
	"github.com/containerd/containerd/oci"
	"tags.cncf.io/container-device-interface/pkg/cdi"
)

// DefaultCDISpecDirs are where CDI spec files are read from unless
// Options.CDISpecDirs says otherwise: containerd's defaults (cdi_spec_dirs),
// the static /etc/cdi and the generated /var/run/cdi, the latter taking
// precedence for a device named in both.
var DefaultCDISpecDirs = []string{"/etc/cdi", "/var/run/cdi"}

// cdiRegistry resolves fully qualified CDI device names
// (vendor.com/class=name, from device plugins' Allocate) with the CDI
// library, as containerd's CRI plugin does: the spec directories are read
// again before each container that names a device (no directory watch), so
// a spec a plugin writes just before answering Allocate is seen.
type cdiRegistry struct {
	dirs []string

	once  sync.Once
	cache *cdi.Cache
}

func (r *cdiRegistry) get() *cdi.Cache {
	r.once.Do(func() {
		// NewCache's error is always nil (the library keeps it for
		// compatibility); spec errors come from Refresh.
		r.cache, _ = cdi.NewCache(cdi.WithSpecDirs(r.dirs...), cdi.WithAutoRefresh(false))
	})
	return r.cache
}

// withCDIDevices applies the container edits of devices (and of the spec
// files that define them: device nodes, environment, mounts, hooks,
// additional GIDs) to the container's OCI spec. A device no spec defines
// fails the container; a spec file with errors is skipped by the library
// and named in the error only when a device is then not found.
func (r *cdiRegistry) withCDIDevices(devices []string) oci.SpecOpts {
	return func(_ context.Context, _ oci.Client, _ *containers.Container, s *oci.Spec) error {
		if len(devices) == 0 {
			return nil
		}
		if r == nil {
			return fmt.Errorf("CDI devices %v: no CDI registry (a Runtime not made by New)", devices)
		}
		c := r.get()
		refreshErr := c.Refresh()
		if _, err := c.InjectDevices(s, devices...); err != nil {
			if refreshErr != nil {
				return fmt.Errorf("CDI devices %v: %w (CDI spec errors in %v: %v)", devices, err, r.dirs, refreshErr)
			}
			return fmt.Errorf("CDI devices %v: %w (CDI spec directories %v)", devices, err, r.dirs)
		}
		return nil
	}
}
