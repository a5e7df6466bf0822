package pods

import (
	"errors"

	v1 "k8s.io/api/core/v1"

	"github.com/nodeagent/nodeagent/pods/volume"
)

// reasonCreateContainerConfig is kubelet's waiting reason when a
// container's configuration (its environment, its mounts) cannot be made.
const reasonCreateContainerConfig = "CreateContainerConfigError"

// errNetworkNotReady: the pod waits for a usable network configuration
// (reported with kubelet's NetworkNotReady event).
var errNetworkNotReady = errors.New("network is not ready")

// sandboxEvents records a failed sandbox setup: kubelet's FailedMount
// (FailedMapVolume for a raw block volume's map) event for each volume
// that could not be set up, else
// FailedCreatePodSandBox with kubelet's "Failed to create pod sandbox: "
// prefix.
func sandboxEvents(event eventFunc, pod *v1.Pod, err error) {
	mes := volume.MountErrors(err)
	for _, me := range mes {
		event(pod, v1.EventTypeWarning, me.EventReason(), me.Error())
	}
	// A network that is not ready has had its own event (NetworkNotReady):
	// kubelet does not try to make the sandbox then.
	if len(mes) == 0 && !errors.Is(err, errNetworkNotReady) {
		event(pod, v1.EventTypeWarning, "FailedCreatePodSandBox", "Failed to create pod sandbox: "+err.Error())
	}
}
