package pods

import (
	"github.com/nodeagent/nodeagent/pods/containerspec"
)

// SecurityOptions are the node settings that shape containers' security
// (containerspec.SecurityOptions). A pod's fsGroup is applied to its
// emptyDir volumes by package volume, as kubelet's volume ownership.
type SecurityOptions = containerspec.SecurityOptions
