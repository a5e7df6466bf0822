package config

// NetNSDir is where the pods' network namespaces of the agent are mounted
// (<dir>/<pod UID>). Each agent treats the entries of its directory
// without containers as its own orphans, so two agents on one host (tests,
// or a second instance in another containerd namespace) must not share it:
// the default containerRuntimeNamespace keeps the documented
// /run/nodeagent/netns, any other gets its own.
func (c *NodeAgentConfiguration) NetNSDir() string {
	return netnsDirFor(c.ContainerRuntimeNamespace)
}

// PodNSDir is where the pods' IPC and UTS namespaces and /dev/shm of the
// agent are mounted (<dir>/<pod UID>/{ipc,uts,shm}), one directory per
// containerd namespace as NetNSDir.
func (c *NodeAgentConfiguration) PodNSDir() string {
	return podNSDirFor(c.ContainerRuntimeNamespace)
}

func netnsDirFor(ns string) string {
	if ns == "" || ns == DefaultContainerRuntimeNamespace {
		return "/run/nodeagent/netns"
	}
	return "/run/nodeagent/netns-" + ns
}

func podNSDirFor(ns string) string {
	if ns == "" || ns == DefaultContainerRuntimeNamespace {
		return "/run/nodeagent/pods"
	}
	return "/run/nodeagent/pods-" + ns
}
