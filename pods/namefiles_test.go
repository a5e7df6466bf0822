package pods

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	utilptr "k8s.io/utils/ptr"

	"github.com/nodeagent/nodeagent/kubetypes"
	"github.com/nodeagent/nodeagent/pods/containerspec"
	"github.com/nodeagent/nodeagent/runtime"
)

// TestWorkerNameFiles: the worker writes the pod's hosts, resolv.conf and
// hostname files in the pod directory, mounts them into each container
// (not /etc/hosts where the container mounts a volume there), sets the
// UTS hostname, rewrites a file in place when it changes, and records
// kubelet's DNS warnings.
func TestWorkerNameFiles(t *testing.T) {
	dir := t.TempDir()
	hostResolv := filepath.Join(dir, "resolv.conf")
	if err := os.WriteFile(hostResolv, []byte("nameserver 192.0.2.53\nsearch corp.example\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	nodeHosts := filepath.Join(dir, "hosts")
	if err := os.WriteFile(nodeHosts, []byte("127.0.0.1 localhost\n192.0.2.1 node-1\n"), 0o644); err != nil {
		t.Fatal(err)
	}

	e := newWorkerEnv(t)
	e.deps.names = NameSettings{ClusterDNS: []string{"10.96.0.10"}, ClusterDomain: "cluster.local", ResolvConf: hostResolv, HostsPath: nodeHosts}
	pod := testPod("web", v1.RestartPolicyAlways, ctr("a"))
	pod.Spec.Hostname, pod.Spec.Subdomain = "h", "sub"
	pod.Spec.SetHostnameAsFQDN = utilptr.To(true)
	pod.Spec.HostAliases = []v1.HostAlias{{IP: "192.0.2.9", Hostnames: []string{"foo", "bar"}}}
	pod.Spec.DNSPolicy = v1.DNSClusterFirst
	w := e.worker(pod, kubetypes.SourceAPI)
	w.podIPs = []string{"10.0.0.5"}
	e.settle(w)

	read := func(name string) string {
		b, err := os.ReadFile(filepath.Join(w.podDir(), name))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	hosts := read(containerspec.HostsFile)
	for _, want := range []string{"127.0.0.1\tlocalhost\n", "10.0.0.5\th.sub.default.svc.cluster.local\th\n",
		"# Entries added by HostAliases.\n192.0.2.9\tfoo\tbar\n"} {
		if !strings.Contains(hosts, want) {
			t.Errorf("hosts file lacks %q:\n%s", want, hosts)
		}
	}
	wantResolv := "search default.svc.cluster.local svc.cluster.local cluster.local corp.example\nnameserver 10.96.0.10\noptions ndots:5\n"
	if got := read(containerspec.ResolvConfFile); got != wantResolv {
		t.Errorf("resolv.conf:\n%s\nwant:\n%s", got, wantResolv)
	}
	if got := read(containerspec.HostnameFile); got != "h.sub.default.svc.cluster.local\n" {
		t.Errorf("hostname file %q", got)
	}

	specs := map[string]runtime.ContainerSpec{}
	for _, s := range e.rt.specs {
		specs[s.Name] = s
	}
	targets := func(s runtime.ContainerSpec) map[string]string {
		m := map[string]string{}
		for _, mt := range s.Mounts {
			m[mt.ContainerPath] = mt.HostPath
		}
		return m
	}
	a := targets(specs["a"])
	for file, target := range map[string]string{containerspec.HostsFile: "/etc/hosts", containerspec.ResolvConfFile: "/etc/resolv.conf", containerspec.HostnameFile: "/etc/hostname"} {
		if a[target] != filepath.Join(w.podDir(), file) {
			t.Errorf("container a: %s mounted from %q, want the pod's %s", target, a[target], file)
		}
	}
	if h := specs["a"].Hostname; h != "h.sub.default.svc.cluster.local" {
		t.Errorf("UTS hostname %q, want the FQDN (setHostnameAsFQDN)", h)
	}

	// A change is written in place (the bind mounts keep the inode).
	before, _ := os.Stat(filepath.Join(w.podDir(), containerspec.HostsFile))
	pod2 := pod.DeepCopy()
	pod2.Spec.HostAliases = append(pod2.Spec.HostAliases, v1.HostAlias{IP: "192.0.2.10", Hostnames: []string{"baz"}})
	if err := w.setupNameFiles(pod2); err != nil {
		t.Fatal(err)
	}
	after, _ := os.Stat(filepath.Join(w.podDir(), containerspec.HostsFile))
	if !os.SameFile(before, after) || !strings.Contains(read(containerspec.HostsFile), "192.0.2.10\tbaz\n") {
		t.Errorf("hosts file not rewritten in place")
	}

	// Host network: the node's hosts file plus the aliases; node hostname.
	hp := testPod("hostnet", v1.RestartPolicyAlways, ctr("a"))
	hp.Spec.HostNetwork = true
	hp.Spec.DNSPolicy = v1.DNSDefault
	hp.Spec.HostAliases = []v1.HostAlias{{IP: "192.0.2.9", Hostnames: []string{"foo"}}}
	hw := e.worker(hp, kubetypes.SourceAPI)
	e.settle(hw)
	b, _ := os.ReadFile(filepath.Join(hw.podDir(), containerspec.HostsFile))
	if !strings.Contains(string(b), "192.0.2.1 node-1\n") || !strings.Contains(string(b), "192.0.2.9\tfoo\n") {
		t.Errorf("host-network hosts file:\n%s", b)
	}
	b, _ = os.ReadFile(filepath.Join(hw.podDir(), containerspec.ResolvConfFile))
	if string(b) != "search corp.example\nnameserver 192.0.2.53\n" {
		t.Errorf("host-network Default resolv.conf:\n%s", b)
	}

	// No clusterDNS: ClusterFirst falls back with kubelet's event.
	e.deps.names.ClusterDNS = nil
	np := testPod("nodns", v1.RestartPolicyAlways, ctr("a"))
	nw := e.worker(np, kubetypes.SourceAPI)
	if err := os.MkdirAll(nw.podDir(), 0o750); err != nil {
		t.Fatal(err)
	}
	if err := nw.setupNameFiles(np); err != nil {
		t.Fatal(err)
	}
	if !e.rec.has("MissingClusterDNS") {
		t.Error("no MissingClusterDNS event")
	}

	// A bad hostname keeps the pod from starting.
	bp := testPod("bad", v1.RestartPolicyAlways, ctr("a"))
	bp.Spec.Hostname = "Not_A_Label"
	bw := e.worker(bp, kubetypes.SourceAPI)
	if err := bw.setupNameFiles(bp); err == nil {
		t.Error("bad hostname accepted")
	}
}
