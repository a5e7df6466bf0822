package main

import (
	"fmt"
	"io"

	"github.com/nodeagent/nodeagent/crilog"
	"github.com/nodeagent/nodeagent/internal/pause"
)

// version is set at build time: -ldflags "-X main.version=$(git describe ...)".
var version = "dev"

const usage = `nodeagent: a lean, event-driven Kubernetes node agent.

Usage:
  nodeagent [--config FILE] [--config-dir DIR] [--kubeconfig FILE]
            [--hostname-override NAME] [--node-ip IP] [-v N]
            [--image-credential-provider-config PATH]
            [--image-credential-provider-bin-dir DIR]
      Run the agent. Flags override the configuration file.
  nodeagent version
  nodeagent config validate|defaults|effective ...
  nodeagent events [--address URL]
      Follow the running agent's pod lifecycle events as JSON lines.
`

// run dispatches the subcommands and returns the exit code.
func run(args []string, stdout, stderr io.Writer) int {
	// containerd's shim starts the agent binary as each container's log
	// writer, with its arguments in no fixed order (see crilog).
	if crilog.IsLoggerInvocation(args) {
		return crilog.RunLogger(args, stderr)
	}
	// PID 1 of a shareProcessNamespace pod, when the small binary beside
	// the agent is missing (see internal/pause).
	if pause.IsInvocation(args) {
		return pause.Run(stderr)
	}
	if len(args) > 0 {
		switch args[0] {
		case "version", "--version":
			fmt.Fprintf(stdout, "nodeagent %s\n", version)
			return 0
		case "config":
			return runConfigCommand(args[1:], stdout, stderr)
		case "events":
			return runEventsCommand(args[1:], stdout, stderr)
		case "help", "-h", "--help", "-help":
			fmt.Fprint(stdout, usage)
			return 0
		}
	}
	return runAgent(args, stderr)
}
