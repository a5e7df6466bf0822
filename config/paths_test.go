package config

import "testing"

// Agents in different containerd namespaces never share a network
// namespace directory: each one's orphan scan would remove the other's.
func TestNetNSDirPerContainerdNamespace(t *testing.T) {
	if got := netnsDirFor(""); got != "/run/nodeagent/netns" {
		t.Errorf("default: %s", got)
	}
	if got := netnsDirFor("k8s.io"); got != "/run/nodeagent/netns" {
		t.Errorf("k8s.io: %s", got)
	}
	a, b := netnsDirFor("test-a"), netnsDirFor("test-b")
	if a == b || a == netnsDirFor("k8s.io") {
		t.Errorf("namespaces share a directory: %s %s", a, b)
	}
	if a, b := podNSDirFor("test-a"), podNSDirFor("test-b"); a == b || a == podNSDirFor("k8s.io") || podNSDirFor("") != "/run/nodeagent/pods" {
		t.Errorf("pod namespace directories: %s %s %s", a, b, podNSDirFor(""))
	}
	c := Default()
	if c.NetNSDir() != "/run/nodeagent/netns" || c.PodNSDir() != "/run/nodeagent/pods" {
		t.Errorf("defaults: %s %s", c.NetNSDir(), c.PodNSDir())
	}
	c.ContainerRuntimeNamespace = "test-a"
	if c.NetNSDir() != a || c.PodNSDir() != podNSDirFor("test-a") {
		t.Errorf("test-a: %s %s", c.NetNSDir(), c.PodNSDir())
	}
}
