package cm

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	utilerrors "k8s.io/apimachinery/pkg/util/errors"
)

// KernelTunable is a sysctl kubelet wants at a given value on a node, by
// its path under /proc/sys.
type KernelTunable struct {
	Name  string // "vm/overcommit_memory"
	Value int
}

// KernelTunables are kubelet 1.34's (setupKernelTunables): memory
// overcommit always (pods' limits are enforced by cgroups, not by the
// kernel's accounting), the OOM killer rather than a panic on OOM, a
// reboot 10s after a panic, a panic on oops, and room for one keyring
// key per container (root_maxbytes 25 bytes a key).
var KernelTunables = []KernelTunable{
	{"vm/overcommit_memory", 1},
	{"vm/panic_on_oom", 0},
	{"kernel/panic", 10},
	{"kernel/panic_on_oops", 1},
	{"kernel/keys/root_maxkeys", 1000000},
	{"kernel/keys/root_maxbytes", 25000000},
}

// ProcSys is the host's sysctl tree.
const ProcSys = "/proc/sys"

// Sysctls reads and writes integer sysctls as files under Root (ProcSys;
// a directory tree of the same layout in tests).
type Sysctls struct{ Root string }

// Get returns the integer value of sysctl name ("vm/overcommit_memory").
func (s Sysctls) Get(name string) (int, error) {
	b, err := os.ReadFile(filepath.Join(s.Root, name))
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(strings.TrimSpace(string(b)))
}

// Set writes v to sysctl name.
func (s Sysctls) Set(name string, v int) error {
	f, err := os.OpenFile(filepath.Join(s.Root, name), os.O_WRONLY|os.O_TRUNC, 0)
	if err != nil {
		return err
	}
	_, err = f.WriteString(strconv.Itoa(v))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// SetupKernelTunables is kubelet's check of KernelTunables at start: with
// protect (protectKernelDefaults) every tunable that differs is an error,
// with kubelet's message, and nothing is written; without, each one that
// differs is set. A tunable that cannot be read or written is an error in
// both modes, as in kubelet. The errors of all tunables are returned
// together.
func SetupKernelTunables(s Sysctls, protect bool, log *slog.Logger) error {
	var errs []error
	for _, k := range KernelTunables {
		v, err := s.Get(k.Name)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if v == k.Value {
			continue
		}
		if protect {
			errs = append(errs, fmt.Errorf("invalid kernel flag: %s, expected value: %d, actual value: %d", k.Name, k.Value, v))
			continue
		}
		log.Info("Updating kernel flag", "flag", k.Name, "expectedValue", k.Value, "actualValue", v)
		if err := s.Set(k.Name, k.Value); err != nil {
			errs = append(errs, err)
		}
	}
	return utilerrors.NewAggregate(errs)
}
