package pods

import (
	"errors"
	"fmt"
	"sort"
	"strings"

	v1 "k8s.io/api/core/v1"

	"github.com/nodeagent/nodeagent/pods/volume"
)

// reasonCreateContainerConfig is kubelet's waiting reason when a
// container's configuration (its environment, its mounts) cannot be made.
const reasonCreateContainerConfig = "CreateContainerConfigError"

// subPathExpander expands a subPathExpr with the container's environment
// (lookup), as kubelet does: every $(VAR) must name a variable with a
// non-empty value, and nothing else is expanded.
func subPathExpander(lookup func(string) (string, bool)) func(string) (string, error) {
	return func(expr string) (string, error) {
		missing := map[string]bool{}
		out := expand(expr, func(k string) (string, bool) {
			v, ok := lookup(k)
			if !ok || v == "" {
				missing[k] = true
			}
			return v, true
		})
		if len(missing) > 0 {
			keys := make([]string, 0, len(missing))
			for k := range missing {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			return "", fmt.Errorf("missing value for %s", strings.Join(keys, ", "))
		}
		return out, nil
	}
}

// errNetworkNotReady: the pod waits for a usable network configuration
// (reported with kubelet's NetworkNotReady event).
var errNetworkNotReady = errors.New("network is not ready")

// sandboxEvents records a failed sandbox setup: kubelet's FailedMount
// event for each volume that could not be set up, else
// FailedCreatePodSandBox with kubelet's "Failed to create pod sandbox: "
// prefix.
func (w *worker) sandboxEvents(pod *v1.Pod, err error) {
	mes := volume.MountErrors(err)
	for _, me := range mes {
		w.d.event(pod, v1.EventTypeWarning, "FailedMount", me.Error())
	}
	// A network that is not ready has had its own event (NetworkNotReady):
	// kubelet does not try to make the sandbox then.
	if len(mes) == 0 && !errors.Is(err, errNetworkNotReady) {
		w.d.event(pod, v1.EventTypeWarning, "FailedCreatePodSandBox", "Failed to create pod sandbox: "+err.Error())
	}
}
