package cm

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"

	v1 "k8s.io/api/core/v1"

	"github.com/nodeagent/nodeagent/kubetypes"
)

// ErrSwapOn is kubelet's refusal to start on a host with swap on while
// failSwapOn is true (its message, word for word).
var ErrSwapOn = errors.New("running with swap on is not supported, please disable swap or set --fail-swap-on flag to false")

// SwapOn reports whether /proc/swaps (its content) lists a swap area: a
// line besides the header, as kubelet reads it.
func SwapOn(procSwaps []byte) bool {
	n := 0
	for _, l := range bytes.Split(bytes.TrimSpace(procSwaps), []byte("\n")) {
		if len(bytes.TrimSpace(l)) > 0 {
			n++
		}
	}
	return n > 1
}

// HostSwapOn reads /proc/swaps; a kernel without swap support has none
// and has swap off.
func HostSwapOn() (bool, error) {
	b, err := os.ReadFile("/proc/swaps")
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return SwapOn(b), nil
}

// SwapControllerAvailable reports whether the kernel lets containers' swap
// be limited, where kubelet looks: cgroup v1's
// memory/memory.memsw.limit_in_bytes, or on v2 memory.swap.max in the
// agent's own cgroup (selfCgroup: /proc/self/cgroup's content; the v2
// root has no memory.swap.max). mount is the cgroup mount point
// (/sys/fs/cgroup).
func SwapControllerAvailable(mount string, unified bool, selfCgroup []byte) bool {
	p := filepath.Join(mount, "memory", "memory.memsw.limit_in_bytes")
	if unified {
		self := ""
		for _, l := range strings.Split(string(selfCgroup), "\n") {
			if rest, ok := strings.CutPrefix(l, "0::"); ok {
				self = rest
			}
		}
		p = filepath.Join(mount, self, "memory.swap.max")
	}
	_, err := os.Stat(p)
	return err == nil
}

// Swap is how containers may use the host's swap (kubelet's memorySwap),
// with what the decision needs to know of the host.
type Swap struct {
	// Controller: the kernel can limit containers' swap
	// (SwapControllerAvailable). Without it nothing is set, as kubelet.
	Controller bool
	// Unified: cgroup v2. LimitedSwap needs it; NoSwap on v1 is
	// memory+swap equal to the memory limit.
	Unified bool
	// Limited is swapBehavior LimitedSwap (else NoSwap).
	Limited bool
	// Capacity is the host's swap in bytes (/proc/meminfo SwapTotal).
	Capacity int64
}

// Applies reports whether containers get a swap setting at all: not
// without the swap controller, nor on cgroup v2 without swap on the host
// (see ContainerSwapMax).
func (s Swap) Applies() bool { return s.Controller && !(s.Unified && s.Capacity == 0) }

// ContainerSwapMax is the swap container c of pod may use beyond its
// memory (cgroup v2 memory.swap.max; on v1 only 0 can be expressed), nil
// to leave the runtime's default, as kubelet decides it: nothing without
// the swap controller; with LimitedSwap on cgroup v2, a Burstable
// container of a pod that is not critical, with a memory request or limit
// and a request other than its limit, gets request / node memory × swap
// capacity; every other container 0. On cgroup v2 without swap on the host
// nothing is set (see below).
func ContainerSwapMax(pod *v1.Pod, c *v1.Container, memoryCapacity int64, s Swap) *int64 {
	// nodeagent's one difference: on cgroup v2 without swap on the host,
	// nothing is set (kubelet writes memory.swap.max 0, which changes
	// nothing there) — with 0 in the container's scope, containerd 2.4 with
	// runc 1.1 in the cgroup v2 guest no longer reported the container's
	// OOM kill (Error instead of OOMKilled; docs/pods.md).
	if !s.Applies() {
		return nil
	}
	var none int64
	if !s.Limited || !s.Unified || kubetypes.IsCriticalPod(pod) || QOSClass(pod) != v1.PodQOSBurstable {
		return &none
	}
	req, lim := c.Resources.Requests.Memory(), c.Resources.Limits.Memory()
	if (req.IsZero() && lim.IsZero()) || req.Cmp(*lim) == 0 {
		return &none
	}
	// kubelet: a request above the node's memory, or no node memory,
	// cannot be given a share: no swap.
	if memoryCapacity <= 0 || req.Value() > memoryCapacity {
		return &none
	}
	n := int64(float64(req.Value()) / float64(memoryCapacity) * float64(s.Capacity))
	return &n
}
