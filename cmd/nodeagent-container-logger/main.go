// Command nodeagent-container-logger writes one container's stdout and
// stderr to its CRI log file with rotation. containerd's shim starts it per
// container (a binary:// log URI); see package crilog. It is the agent's
// `container-logger` mode in a binary of its own: without the agent's other
// packages it needs ~1 MiB of private memory per container instead of ~7.
package main

import (
	"os"

	"github.com/nodeagent/nodeagent/crilog"
)

func main() { os.Exit(crilog.RunLogger(os.Args[1:], os.Stderr)) }
