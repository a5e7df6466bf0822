package config

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
)

// NetNSDir is where the pods' network namespaces of the agent are mounted
// (<dir>/<pod UID>). Each agent treats the entries of its directory
// without containers as its own orphans, so two agents on one host (tests,
// a second instance in another containerd namespace, or on another
// containerd) must not share it: the default runtime endpoint and
// containerRuntimeNamespace keep the documented /run/nodeagent/netns, any
// other pair gets its own (RunDirSuffix).
func (c *NodeAgentConfiguration) NetNSDir() string {
	return "/run/nodeagent/netns" + RunDirSuffix(c.ContainerRuntimeEndpoint, c.ContainerRuntimeNamespace)
}

// PodNSDir is where the pods' IPC and UTS namespaces and /dev/shm of the
// agent are mounted (<dir>/<pod UID>/{ipc,uts,shm}), one directory per
// runtime endpoint and containerd namespace as NetNSDir.
func (c *NodeAgentConfiguration) PodNSDir() string {
	return "/run/nodeagent/pods" + RunDirSuffix(c.ContainerRuntimeEndpoint, c.ContainerRuntimeNamespace)
}

// RunDirSuffix tells apart the run directories of agents on one host:
// "" for the default containerd socket and namespace, "-<namespace>" for
// another namespace, and "-<8 hex digits of the socket path's SHA-256>"
// after it for another socket (an empty endpoint or namespace is the
// default; the endpoint with or without unix://).
func RunDirSuffix(endpoint, ns string) string {
	var s string
	if ns != "" && ns != DefaultContainerRuntimeNamespace {
		s = "-" + ns
	}
	path := strings.TrimPrefix(endpoint, "unix://")
	if path != "" && path != strings.TrimPrefix(DefaultContainerRuntimeEndpoint, "unix://") {
		h := sha256.Sum256([]byte(path))
		s += "-" + hex.EncodeToString(h[:4])
	}
	return s
}
