// Command nodeagent is a lean, event-driven Kubernetes node agent.
package main

import (
	"os"
	"path/filepath"
)

func main() {
	// Started under kubelet's name (the package's /usr/bin/kubelet).
	if filepath.Base(os.Args[0]) == KubeletName {
		os.Exit(runKubelet(os.Args[1:], os.Stdout, os.Stderr))
	}
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}
