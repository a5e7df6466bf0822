package localcluster

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/nodeagent/nodeagent/config"
)

// A multi-node cluster (Options.Nodes >= 2) gives each node a host of its
// own on this machine:
//
//   - a network namespace (/run/netns/<NetNS>) whose eth0 is one end of a
//     veth pair, the other end on a bridge the cluster creates in the
//     host's namespace; the bridge has the cluster's host address (.1 of a
//     private /24 no host interface uses), the nodes .11, .12, ...; the
//     node's default route leads to the bridge, so the control plane (which
//     then listens on the bridge address) is reachable and nothing else:
//     nothing routes the /24 off this machine;
//   - a UTS namespace (a file bind-mounted on itself) whose host name is
//     the node's name;
//   - a containerd of its own (root, state and socket under the node's
//     directory), started in those namespaces;
//   - the agent, started in them too as on a real machine: its config file
//     (Dir/nodes/<name>/etc/nodeagent/config.yaml) with its own rootDir,
//     cgroupRoot, log directories and CNI configuration directory, node
//     credentials in its kubeconfig, the node name from the host name.
//
// The node's CNI configuration is not written here: the pod network
// add-on (a DaemonSet, see addons.go) writes it, as on a real cluster.

// Node is one node of a multi-node cluster.
type Node struct {
	Name              string `json:"name"`
	NetNS             string `json:"netns"` // in /run/netns
	UTSNS             string `json:"utsns"` // the UTS namespace's bind mount
	IP                string `json:"ip"`    // eth0's address: the Node's InternalIP
	Dir               string `json:"dir"`
	Config            string `json:"config"`
	ContainerdAddress string `json:"containerdAddress"`
	CNIConfDir        string `json:"cniConfDir"`
	CgroupRoot        string `json:"cgroupRoot"`
}

// NodesDir is where the nodes' directories are (Dir/nodes/<name>): the
// pod network add-on mounts it to write each node's CNI configuration.
func (s *State) NodesDir() string { return filepath.Join(s.Dir, "nodes") }

// ClusterDNS is the kube-dns Service's address, the agents' clusterDNS.
const ClusterDNS = "10.96.0.10"

// ServiceCIDR is the API server's --service-cluster-ip-range.
const ServiceCIDR = "10.96.0.0/16"

// nodeNetID names a multi-node cluster's host-side objects (bridge, veths,
// namespaces) after its directory, so that two clusters never meet.
func nodeNetID(dir string) string {
	h := sha256.Sum256([]byte(dir))
	return hex.EncodeToString(h[:3])
}

// nodeSubnet picks the /24 of the node network: 10.250.<n>.0/24, n from
// the cluster's id, the first one no host interface uses.
func nodeSubnet(id string) (netip.Prefix, error) {
	start, _ := strconv.ParseUint(id[:2], 16, 8)
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return netip.Prefix{}, err
	}
	for i := range 256 {
		p := netip.MustParsePrefix(fmt.Sprintf("10.250.%d.0/24", (int(start)+i)%256))
		used := false
		for _, a := range addrs {
			if ipn, ok := a.(*net.IPNet); ok {
				if ap, ok := netip.AddrFromSlice(ipn.IP); ok && p.Contains(ap.Unmap()) {
					used = true
				}
			}
		}
		if !used {
			return p, nil
		}
	}
	return netip.Prefix{}, errors.New("localcluster: no free /24 in 10.250.0.0/16 for the node network")
}

// setupNodeNetwork creates the bridge with the host's address; the nodes'
// namespaces come with startNodes.
func (s *State) setupNodeNetwork() error {
	id := nodeNetID(s.Dir)
	p, err := nodeSubnet(id)
	if err != nil {
		return err
	}
	s.NodeNetID = id
	s.Bridge = "nalc" + id
	s.NodeSubnet = p.String()
	s.HostIP = p.Addr().Next().String()
	_ = run("ip", "link", "del", s.Bridge) // a leftover of a cluster killed before Down
	if err := run("ip", "link", "add", s.Bridge, "type", "bridge"); err != nil {
		return err
	}
	if err := s.save(); err != nil {
		return err
	}
	if err := run("ip", "addr", "add", s.HostIP+"/24", "dev", s.Bridge); err != nil {
		return err
	}
	return run("ip", "link", "set", s.Bridge, "up")
}

// nodeIP is the i-th node's address (i from 0): .11, .12, ...
func (s *State) nodeIP(i int) string {
	a := netip.MustParsePrefix(s.NodeSubnet).Addr()
	for range 11 + i {
		a = a.Next()
	}
	return a.String()
}

// startNodes creates n node hosts and starts their containerd and agent.
func (s *State) startNodes(ctx context.Context, o Options) error {
	for i := range o.Nodes {
		name := fmt.Sprintf("node-%d", i+1)
		n := &Node{
			Name:  name,
			NetNS: fmt.Sprintf("nalc-%s-%d", s.NodeNetID, i+1),
			IP:    s.nodeIP(i),
			Dir:   filepath.Join(s.NodesDir(), name),
		}
		n.UTSNS = filepath.Join(n.Dir, "uts")
		n.Config = filepath.Join(n.Dir, "etc", "nodeagent", "config.yaml")
		n.ContainerdAddress = filepath.Join(n.Dir, "containerd", "containerd.sock")
		n.CNIConfDir = filepath.Join(n.Dir, "cni", "net.d")
		n.CgroupRoot = "/nodeagent-lc-" + s.NodeNetID + "-" + name
		if len(n.ContainerdAddress) > 100 {
			return fmt.Errorf("localcluster: containerd socket path %s is longer than a unix socket allows (108): use a shorter cluster dir", n.ContainerdAddress)
		}
		_ = os.RemoveAll(n.Dir)
		s.Nodes = append(s.Nodes, *n)
		if err := s.save(); err != nil {
			return err
		}
		if err := s.makeNodeHost(n, i); err != nil {
			return fmt.Errorf("localcluster: node %s: %w", name, err)
		}
		fmt.Fprintf(o.Log, "localcluster: node %s: namespace %s, address %s\n", name, n.NetNS, n.IP)
	}
	// Each node's containerd, then the images, then the agents.
	for i := range s.Nodes {
		if err := s.startNodeContainerd(ctx, &s.Nodes[i]); err != nil {
			return err
		}
	}
	for i := range s.Nodes {
		if o.ImportImages == nil {
			continue
		}
		ictx, cancel := context.WithTimeout(ctx, 3*time.Minute)
		err := o.ImportImages(ictx, s.Nodes[i].ContainerdAddress)
		cancel()
		if err != nil {
			return fmt.Errorf("localcluster: node %s: %w", s.Nodes[i].Name, err)
		}
	}
	for i := range s.Nodes {
		if err := s.StartNodeAgent(s.Nodes[i].Name); err != nil {
			return err
		}
	}
	return nil
}

// makeNodeHost creates the node's namespaces and its link to the bridge.
func (s *State) makeNodeHost(n *Node, i int) error {
	veth := fmt.Sprintf("nalc%sv%d", s.NodeNetID, i+1)
	steps := [][]string{
		{"ip", "netns", "add", n.NetNS},
		{"ip", "link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", n.NetNS},
		{"ip", "link", "set", veth, "master", s.Bridge, "up"},
		{"ip", "-n", n.NetNS, "link", "set", "lo", "up"},
		{"ip", "-n", n.NetNS, "addr", "add", n.IP + "/24", "dev", "eth0"},
		{"ip", "-n", n.NetNS, "link", "set", "eth0", "up"},
		{"ip", "-n", n.NetNS, "route", "add", "default", "via", s.HostIP},
		// A node forwards its pods' traffic (a new namespace starts with
		// forwarding off).
		{"ip", "netns", "exec", n.NetNS, "sysctl", "-qw", "net.ipv4.ip_forward=1"},
	}
	for _, d := range []string{"etc/nodeagent", "cni/net.d", "containerd/root", "containerd/state", "root", "log/pods", "log/containers", "manifests"} {
		if err := os.MkdirAll(filepath.Join(n.Dir, d), 0o755); err != nil {
			return err
		}
	}
	if err := os.WriteFile(n.UTSNS, nil, 0o644); err != nil {
		return err
	}
	steps = append(steps, []string{"unshare", "--uts=" + n.UTSNS, "hostname", n.Name})
	for _, st := range steps {
		if err := run(st[0], st[1:]...); err != nil {
			return err
		}
	}
	return nil
}

// inNode is the command line that runs argv in the node's namespaces
// (network and UTS; the mount namespace stays the host's, which the agent,
// containerd and runc must share for the pods' volumes).
func (n *Node) inNode(argv ...string) []string {
	return append([]string{"nsenter", "--net=/run/netns/" + n.NetNS, "--uts=" + n.UTSNS, "--"}, argv...)
}

func (s *State) startNodeContainerd(ctx context.Context, n *Node) error {
	cdir := filepath.Join(n.Dir, "containerd")
	cfg := ContainerdConfig(filepath.Join(cdir, "root"), filepath.Join(cdir, "state"), n.ContainerdAddress)
	cfgPath := filepath.Join(cdir, "config.toml")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
		return err
	}
	name := n.Name + "-containerd"
	argv := n.inNode("containerd", "--config="+cfgPath)
	if err := s.spawn(name, argv[0], argv[1:]...); err != nil {
		return err
	}
	return waitFor(ctx, 30*time.Second, s, name, func(ctx context.Context) error {
		c, err := (&net.Dialer{}).DialContext(ctx, "unix", n.ContainerdAddress)
		if err != nil {
			return err
		}
		return c.Close()
	})
}

// nodeConfig is the agent's configuration file on node n.
func (s *State) nodeConfig(n *Node) string {
	return fmt.Sprintf(`apiVersion: config.nodeagent.io/v1alpha1
kind: NodeAgentConfiguration
kubeconfig: %s
rootDir: %s
containerRuntimeEndpoint: unix://%s
cgroupRoot: %s
podLogsDir: %s
containerLogsDir: %s
staticPodPath: %s
# Written by the pod network add-on's DaemonSet (docs/multinode.md).
cniConfDir: %s
clusterDNS: [%q]
clusterDomain: cluster.local
authentication:
  x509:
    clientCAFile: %s
# Imported images, not pulled: never garbage-collected under a test; and
# nodes that share one disk must not evict for its use by others.
imageGCHighThresholdPercent: 100
evictionHard:
  memory.available: 100Mi
  nodefs.available: 1%%
  imagefs.available: 1%%
`, filepath.Join(n.Dir, "etc", "nodeagent", "kubeconfig"), filepath.Join(n.Dir, "root"), n.ContainerdAddress, n.CgroupRoot,
		filepath.Join(n.Dir, "log", "pods"), filepath.Join(n.Dir, "log", "containers"), filepath.Join(n.Dir, "manifests"),
		n.CNIConfDir, ClusterDNS, s.CACert)
}

// Node returns the node called name.
func (s *State) Node(name string) (*Node, error) {
	for i := range s.Nodes {
		if s.Nodes[i].Name == name {
			return &s.Nodes[i], nil
		}
	}
	return nil, fmt.Errorf("localcluster: no node %q in this cluster", name)
}

// StartNodeAgent (re)starts the agent of node name (after StopNodeAgent).
func (s *State) StartNodeAgent(name string) error {
	n, err := s.Node(name)
	if err != nil {
		return err
	}
	if err := os.WriteFile(n.Config, []byte(s.nodeConfig(n)), 0o644); err != nil {
		return err
	}
	kc, err := s.NodeKubeconfig(n.Name)
	if err != nil {
		return err
	}
	b, err := os.ReadFile(kc)
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(n.Dir, "etc", "nodeagent", "kubeconfig"), b, 0o600); err != nil {
		return err
	}
	argv := n.inNode(s.AgentBin, "--config", n.Config)
	return s.spawn(n.Name+"-agent", argv[0], argv[1:]...)
}

// StopNodeAgent kills node name's agent (SIGKILL: a node that dies), its
// containerd and pods left running. The Node goes NotReady after the node
// lifecycle controller's grace period.
func (s *State) StopNodeAgent(name string) error {
	if _, err := s.Node(name); err != nil {
		return err
	}
	pid, ok := s.Pids[name+"-agent"]
	if !ok {
		return fmt.Errorf("localcluster: node %s has no agent running", name)
	}
	_ = syscall.Kill(-pid, syscall.SIGKILL)
	for i := 0; i < 250 && alive(pid); i++ {
		time.Sleep(20 * time.Millisecond)
	}
	delete(s.Pids, name+"-agent")
	return s.save()
}

// stopNodes stops every node's agent and containerd with their pods and
// removes the node hosts and the bridge. Best effort, idempotent.
func stopNodes(s *State) {
	for i, n := range s.Nodes {
		for _, c := range []string{n.Name + "-agent", n.Name + "-containerd"} {
			if pid, ok := s.Pids[c]; ok {
				stop(pid, 10*time.Second)
				delete(s.Pids, c)
			}
		}
		cleanupContainerd(&State{Dir: n.Dir, ContainerdAddress: n.ContainerdAddress})
		// Whatever still runs in the node's namespace (log writers,
		// hostNetwork containers whose shim is gone).
		killNetNS(n.NetNS)
		endpoint := "unix://" + n.ContainerdAddress
		for _, d := range []string{"/run/nodeagent/netns" + config.RunDirSuffix(endpoint, ""), "/run/nodeagent/pods" + config.RunDirSuffix(endpoint, "")} {
			unmountBelow(d)
			_ = os.RemoveAll(d)
		}
		unmountBelow(n.Dir)
		_ = syscall.Unmount(filepath.Join(n.Dir, "root"), syscall.MNT_DETACH)
		_ = syscall.Unmount(n.UTSNS, syscall.MNT_DETACH)
		// The veth pair goes with its host end: the namespace itself may
		// outlive its name for a while (the kernel frees it when its last
		// reference, a socket's say, goes), its eth0 with it.
		_ = run("ip", "link", "del", fmt.Sprintf("nalc%sv%d", s.NodeNetID, i+1))
		_ = run("ip", "netns", "del", n.NetNS)
		removeCgroupRoot(n.CgroupRoot)
	}
	if s.Bridge != "" {
		_ = run("ip", "link", "del", s.Bridge)
	}
}

// killNetNS kills every process in the named network namespace.
func killNetNS(netns string) {
	var want syscall.Stat_t
	if err := syscall.Stat("/run/netns/"+netns, &want); err != nil {
		return
	}
	procs, _ := os.ReadDir("/proc")
	for _, p := range procs {
		pid, err := strconv.Atoi(p.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		var st syscall.Stat_t
		if syscall.Stat("/proc/"+p.Name()+"/ns/net", &st) == nil && st.Ino == want.Ino && st.Dev == want.Dev {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

// removeCgroupRoot removes a node's cgroupRoot in every cgroup v1
// hierarchy (or the v2 one), deepest first. Best effort.
func removeCgroupRoot(root string) {
	if root == "" || root == "/" {
		return
	}
	hier, _ := filepath.Glob("/sys/fs/cgroup/*")
	hier = append(hier, "/sys/fs/cgroup")
	for _, h := range hier {
		dir := filepath.Join(h, root)
		var dirs []string
		_ = filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				dirs = append(dirs, p)
			}
			return nil
		})
		for i := len(dirs) - 1; i >= 0; i-- {
			_ = os.Remove(dirs[i])
		}
	}
}

func run(name string, args ...string) error {
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}
