// Command nodeagent-container-logger writes one container's stdout and
// stderr to its CRI log file with rotation. containerd's shim starts it per
// container (a binary:// log URI); see package crilog. It is the agent's
// `container-logger` mode in a binary of its own: without the agent's other
// packages it needs ~1 MiB of private memory per container instead of ~7.
//
// As `nodeagent-container-logger pause` it is the pause process of
// shareProcessNamespace pods (package pause): PID 1 of the pod's PID
// namespace, run from a rootfs that holds only this static binary.
package main

import (
	"os"

	"github.com/nodeagent/nodeagent/crilog"
	"github.com/nodeagent/nodeagent/internal/pause"
)

func main() {
	if pause.IsInvocation(os.Args[1:]) {
		os.Exit(pause.Run(os.Stderr))
	}
	os.Exit(crilog.RunLogger(os.Args[1:], os.Stderr))
}
