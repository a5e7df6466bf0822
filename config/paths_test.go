package config

import "testing"

// Agents in different containerd namespaces, or on different containerds,
// never share a network or pod namespace directory: each one's orphan scan
// would remove the other's.
func TestRunDirsPerRuntimeInstance(t *testing.T) {
	dirs := func(endpoint, ns string) [2]string {
		c := Default()
		c.ContainerRuntimeEndpoint, c.ContainerRuntimeNamespace = endpoint, ns
		return [2]string{c.NetNSDir(), c.PodNSDir()}
	}
	want := [2]string{"/run/nodeagent/netns", "/run/nodeagent/pods"}
	for _, d := range [][2]string{
		dirs(DefaultContainerRuntimeEndpoint, DefaultContainerRuntimeNamespace),
		dirs("", ""),
		dirs("/run/containerd/containerd.sock", "k8s.io"),
		dirs("unix:///var/run/containerd/containerd.sock", "k8s.io"), // kubeadm's criSocket
	} {
		if d != want {
			t.Errorf("defaults: %v, want %v", d, want)
		}
	}
	seen := map[string]string{want[0]: "default"}
	for _, c := range []struct{ endpoint, ns string }{
		{DefaultContainerRuntimeEndpoint, "test-a"},
		{DefaultContainerRuntimeEndpoint, "test-b"},
		{"unix:///tmp/na/containerd.sock", "k8s.io"},
		{"unix:///tmp/nb/containerd.sock", "k8s.io"},
		{"unix:///tmp/na/containerd.sock", "test-a"},
	} {
		d := dirs(c.endpoint, c.ns)
		if other, ok := seen[d[0]]; ok {
			t.Errorf("%v shares %s with %s", c, d[0], other)
		}
		seen[d[0]] = c.endpoint + " " + c.ns
		if d[1] == want[1] || d[1][len("/run/nodeagent/pods"):] != d[0][len("/run/nodeagent/netns"):] {
			t.Errorf("%v: pod namespace directory %s beside %s", c, d[1], d[0])
		}
	}
	if got := RunDirSuffix("/tmp/na/containerd.sock", "x"); got != RunDirSuffix("unix:///tmp/na/containerd.sock", "x") {
		t.Errorf("the endpoint with and without unix:// differ: %s", got)
	}
}

func TestLegacyRunDirs(t *testing.T) {
	c := Default()
	c.ContainerRuntimeEndpoint, c.ContainerRuntimeNamespace = "unix:///tmp/x/containerd.sock", "test-a"
	n, p := c.LegacyRunDirs()
	if n != "/run/nodeagent/netns-test-a" || p != "/run/nodeagent/pods-test-a" || n == c.NetNSDir() {
		t.Errorf("legacy %s %s, now %s", n, p, c.NetNSDir())
	}
	c = Default()
	if n, p := c.LegacyRunDirs(); n != c.NetNSDir() || p != c.PodNSDir() {
		t.Errorf("defaults moved: %s %s", n, p)
	}
}
