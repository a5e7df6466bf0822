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
// default; the endpoint with or without unix://, and /var/run as /run:
// kubeadm's criSocket is unix:///var/run/containerd/containerd.sock).
func RunDirSuffix(endpoint, ns string) string {
	var s string
	if ns != "" && ns != DefaultContainerRuntimeNamespace {
		s = "-" + ns
	}
	path := socketPath(endpoint)
	if path != "" && path != socketPath(DefaultContainerRuntimeEndpoint) {
		h := sha256.Sum256([]byte(path))
		s += "-" + hex.EncodeToString(h[:4])
	}
	return s
}

// socketPath is endpoint's socket path, /var/run/ spelt /run/ (a symlink
// to it on every current distribution).
func socketPath(endpoint string) string {
	p := strings.TrimPrefix(endpoint, "unix://")
	if rest, ok := strings.CutPrefix(p, "/var/run/"); ok {
		p = "/run/" + rest
	}
	return p
}

// LegacyRunDirs are NetNSDir and PodNSDir as agents before the runtime
// endpoint was part of their names had them (a suffix of the containerd
// namespace only): an agent on a non-default endpoint takes them over
// once (cmd/nodeagent), so that its running pods keep their namespaces
// across the upgrade.
func (c *NodeAgentConfiguration) LegacyRunDirs() (netns, pods string) {
	s := RunDirSuffix("", c.ContainerRuntimeNamespace)
	return "/run/nodeagent/netns" + s, "/run/nodeagent/pods" + s
}
