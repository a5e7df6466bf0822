// Command routeagent is the pod network add-on of the multi-node local
// cluster (docs/multinode.md): what flannel's host-gw backend does, in a
// few lines, for nodes that share one L2 segment. It runs as a DaemonSet
// (hostNetwork, privileged) on every node and, whenever a Node changes:
//
//   - writes the node's CNI configuration (the reference bridge plugin with
//     host-local IPAM over the Node's spec.podCIDR, portmap) into
//     $NODES_DIR/$NODE_NAME/cni/net.d, the node's cniConfDir: the agent
//     sees the network appear and the node becomes Ready;
//   - installs a route to every other Node's spec.podCIDR via its
//     InternalIP (proto 77, so stale ones are found and removed);
//   - masquerades pod traffic that leaves the cluster's pod network
//     ($CLUSTER_CIDR), as flannel does (pods reaching the API server).
//
// It runs the node's own ip and iptables (the DaemonSet mounts the host's
// /usr), in the node's network namespace (hostNetwork).
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
)

// routeProto marks the routes this agent owns.
const routeProto = "77"

func main() {
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	if err := run(log); err != nil {
		log.Error("routeagent", "err", err)
		os.Exit(1)
	}
}

type agent struct {
	log         *slog.Logger
	node        string
	nodesDir    string // host path; the container sees it at the same path
	clusterCIDR netip.Prefix
	lastConf    []byte
}

func run(log *slog.Logger) error {
	a := &agent{log: log, node: os.Getenv("NODE_NAME"), nodesDir: os.Getenv("NODES_DIR")}
	cidr, err := netip.ParsePrefix(os.Getenv("CLUSTER_CIDR"))
	if err != nil || a.node == "" || a.nodesDir == "" {
		return fmt.Errorf("NODE_NAME, NODES_DIR and CLUSTER_CIDR must be set (CLUSTER_CIDR: %v)", err)
	}
	a.clusterCIDR = cidr
	cfg, err := rest.InClusterConfig()
	if err != nil {
		return err
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	f := informers.NewSharedInformerFactory(cs, 5*time.Minute)
	inf := f.Core().V1().Nodes()
	kick := make(chan struct{}, 1) // coalesces events: one sync sees them all
	notify := func(any) {
		select {
		case kick <- struct{}{}:
		default:
		}
	}
	if _, err := inf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: notify, DeleteFunc: notify, UpdateFunc: func(_, n any) { notify(n) },
	}); err != nil {
		return err
	}
	f.Start(ctx.Done())
	f.WaitForCacheSync(ctx.Done())
	lister := inf.Lister()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-kick:
		case <-time.After(30 * time.Second): // retries a failed sync
		}
		nodes, err := lister.List(labels.Everything())
		if err != nil {
			log.Error("list nodes", "err", err)
			continue
		}
		if err := a.sync(nodes); err != nil {
			log.Error("sync", "err", err)
		}
	}
}

// sync makes the node's CNI configuration, masquerade rule and routes
// what the Nodes say.
func (a *agent) sync(nodes []*corev1.Node) error {
	var me *corev1.Node
	want := map[string]string{} // pod CIDR -> via
	for _, n := range nodes {
		if n.Name == a.node {
			me = n
			continue
		}
		if ip := internalIP(n); n.Spec.PodCIDR != "" && ip != "" {
			want[n.Spec.PodCIDR] = ip
		}
	}
	if me == nil || me.Spec.PodCIDR == "" {
		return fmt.Errorf("node %s has no spec.podCIDR yet", a.node)
	}
	if err := a.writeCNIConfig(me.Spec.PodCIDR); err != nil {
		return err
	}
	if err := a.masquerade(); err != nil {
		return err
	}
	for cidr, via := range want {
		if err := cmd("ip", "route", "replace", cidr, "via", via, "proto", routeProto); err != nil {
			return err
		}
	}
	out, err := exec.Command("ip", "-o", "route", "show", "proto", routeProto).Output()
	if err != nil {
		return fmt.Errorf("ip route show: %w", err)
	}
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if f := strings.Fields(l); len(f) > 0 && want[f[0]] == "" {
			if err := cmd("ip", "route", "del", f[0], "proto", routeProto); err != nil {
				return err
			}
		}
	}
	return nil
}

func internalIP(n *corev1.Node) string {
	for _, a := range n.Status.Addresses {
		if a.Type == corev1.NodeInternalIP {
			return a.Address
		}
	}
	return ""
}

// writeCNIConfig writes the bridge network over podCIDR (atomically: the
// agent watches the directory).
func (a *agent) writeCNIConfig(podCIDR string) error {
	dir := filepath.Join(a.nodesDir, a.node, "cni")
	conf, err := json.MarshalIndent(map[string]any{
		"cniVersion": "1.0.0",
		"name":       "podnet",
		"plugins": []any{
			map[string]any{
				"type": "bridge", "bridge": "cni0", "isGateway": true, "hairpinMode": true,
				// Masquerading is the agent's own rule (cluster-wide, as
				// flannel's): pod-to-pod traffic keeps its source.
				"ipMasq": false,
				"ipam": map[string]any{
					"type":    "host-local",
					"ranges":  [][]map[string]string{{{"subnet": podCIDR}}},
					"routes":  []map[string]string{{"dst": "0.0.0.0/0"}},
					"dataDir": filepath.Join(dir, "ipam"),
				},
			},
			map[string]any{"type": "portmap", "capabilities": map[string]bool{"portMappings": true}, "snat": true},
		},
	}, "", "  ")
	if err != nil {
		return err
	}
	if slices.Equal(conf, a.lastConf) {
		return nil
	}
	file := filepath.Join(dir, "net.d", "10-podnet.conflist")
	if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(file+".tmp", conf, 0o644); err != nil {
		return err
	}
	if err := os.Rename(file+".tmp", file); err != nil {
		return err
	}
	a.lastConf = conf
	a.log.Info("wrote the CNI configuration", "node", a.node, "podCIDR", podCIDR, "file", file)
	return nil
}

// masquerade ensures the rule flannel installs: pod traffic to anything
// outside the cluster's pod network leaves with the node's address.
func (a *agent) masquerade() error {
	c := a.clusterCIDR.String()
	rule := []string{"POSTROUTING", "-s", c, "!", "-d", c, "-m", "comment", "--comment", "routeagent: pods leaving the pod network", "-j", "MASQUERADE"}
	if exec.Command("iptables", append([]string{"-w", "-t", "nat", "-C"}, rule...)...).Run() == nil {
		return nil
	}
	return cmd("iptables", append([]string{"-w", "-t", "nat", "-A"}, rule...)...)
}

func cmd(name string, args ...string) error {
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}
