package pods

import (
	"path/filepath"

	v1 "k8s.io/api/core/v1"

	"github.com/nodeagent/nodeagent/runtime"
)

// stdioDirName is the directory under the pod's directory that holds its
// containers' stdin (and, without a terminal, output) FIFOs: it outlives
// the agent, so a restart neither closes a container's stdin nor loses
// attach (see runtime's stdio.go).
const stdioDirName = "stdio"

// withStdio gives spec the container's stdin, stdinOnce and tty.
func (w *worker) withStdio(c *v1.Container, spec *runtime.ContainerSpec) {
	spec.Stdin, spec.StdinOnce, spec.TTY = c.Stdin, c.StdinOnce, c.TTY
	if c.Stdin || c.TTY {
		spec.StdioDir = filepath.Join(w.podDir(), stdioDirName)
	}
}
