// Command localcluster starts and stops the local control plane and private
// containerd used by `make run` and `make test` (see internal/testing/localcluster).
//
//	localcluster up [--dir DIR] [--bin-dir DIR] [--no-containerd]
//	    [--nodes N [--e2e-images DIR] [--node-monitor-grace-period D] [--pod-eviction-toleration D]]
//	    # N >= 2: N nodeagent nodes, each a network namespace of its own,
//	    # with the add-ons (docs/multinode.md); 1 (the default): no nodes
//	localcluster stop-node NAME [--dir DIR]    # kill a node's agent (multi-node)
//	localcluster start-node NAME [--dir DIR]   # start it again
//	localcluster down [--dir DIR]
//	localcluster status [--dir DIR]
//	localcluster env [--dir DIR]               # shell exports for scripts
//	localcluster node-kubeconfig NAME [--dir DIR]   # path of a node kubeconfig
//	localcluster kubeadm-join-prepare [--dir DIR] [--healthz-port N] [--port N]
//	    # what `kubeadm init` uploads for joins, and a token: prints
//	    # KUBEADM_ENDPOINT, KUBEADM_TOKEN, KUBEADM_CA_CERT_HASH exports
//
// DIR defaults to $NODEAGENT_CLUSTER_DIR, else _output/local.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/nodeagent/nodeagent/internal/testing/localcluster"
)

func main() {
	if len(os.Args) < 2 {
		usage()
	}
	cmd := os.Args[1]
	fs := flag.NewFlagSet(cmd, flag.ExitOnError)
	defDir := os.Getenv("NODEAGENT_CLUSTER_DIR")
	if defDir == "" {
		defDir = filepath.Join("_output", "local")
	}
	dir := fs.String("dir", defDir, "cluster directory")
	binDir := fs.String("bin-dir", filepath.Join("_output", "bin"), "directory with etcd, kube-apiserver, kube-controller-manager, kube-scheduler (make controlplane)")
	noContainerd := fs.Bool("no-containerd", false, "do not start the private containerd")
	signing := fs.Duration("cluster-signing-duration", 0, "kube-controller-manager --cluster-signing-duration (0: its default, a year)")
	nodeMask := fs.Int("node-cidr-mask-size", localcluster.DefaultNodeCIDRMaskSize, "pod CIDR size per node out of "+localcluster.ClusterCIDR+" (29 for fleets of up to 8,192 nodes)")
	clusterCIDR := fs.String("cluster-cidr", "", "the /16 node pod CIDRs come out of (default "+localcluster.ClusterCIDR+"; another for a second cluster whose nodes run CNI networks beside the first's)")
	healthzPort := fs.Int("healthz-port", 0, "kubeadm-join-prepare: the kubelet-config's healthzPort (0: kubelet's 10248)")
	kubeletPort := fs.Int("port", 0, "kubeadm-join-prepare: the kubelet-config's port (0: kubelet's 10250)")
	nodes := fs.Int("nodes", 1, "nodeagent nodes to start, each in network namespaces of its own, with the add-ons (>= 2; 1: none, tests start agents; docs/multinode.md)")
	e2eImages := fs.String("e2e-images", "", "with --nodes: a directory of the e2e images' programs (hack/conformance.sh's cache) whose images the nodes get")
	standIns := fs.String("e2e-stand-ins", "", "with --e2e-images: a directory with test-images (upstream's test/images) and e2edns (hack/e2edns); the nodes get every image of the full [Conformance] suite (testimage.E2EStandIns: dig and getent in agnhost, jessie-dnsutils, httpd, nginx, nautilus, kitten)")
	grace := fs.Duration("node-monitor-grace-period", 0, "kube-controller-manager --node-monitor-grace-period (0: 40s)")
	toleration := fs.Duration("pod-eviction-toleration", 0, "kube-apiserver --default-not-ready-toleration-seconds and --default-unreachable-toleration-seconds (0: 300s)")
	k8sVersion := fs.String("kubernetes-version", "v1.34.4", "kubeadm-join-prepare: the ClusterConfiguration's kubernetesVersion")
	args := os.Args[2:]
	var positional []string
	if len(args) > 0 && len(args[0]) > 0 && args[0][0] != '-' {
		positional, args = args[:1], args[1:]
	}
	_ = fs.Parse(args)
	positional = append(positional, fs.Args()...)
	absDir, err := filepath.Abs(*dir)
	check(err)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	switch cmd {
	case "up":
		bin, err := filepath.Abs(*binDir)
		check(err)
		s, err := localcluster.Up(ctx, localcluster.Options{Dir: absDir, BinDir: bin, NoContainerd: *noContainerd, Log: os.Stderr, NodeCIDRMaskSize: *nodeMask, ClusterSigningDuration: *signing, ClusterCIDR: *clusterCIDR,
			Nodes: *nodes, ImportImages: nodeImages(bin, *e2eImages, *standIns), NodeMonitorGracePeriod: *grace, PodEvictionToleration: *toleration})
		check(err)
		printEnv(s)
	case "down":
		check(localcluster.Down(absDir))
		fmt.Fprintln(os.Stderr, "localcluster: stopped")
	case "status":
		s, err := localcluster.Load(absDir)
		check(err)
		if err := s.Healthy(ctx); err != nil {
			fmt.Fprintf(os.Stderr, "localcluster: unhealthy: %v\n", err)
			os.Exit(1)
		}
		fmt.Fprintf(os.Stderr, "localcluster: running, apiserver %s\n", s.APIServerURL)
	case "env":
		s, err := localcluster.Load(absDir)
		check(err)
		printEnv(s)
	case "node-kubeconfig":
		if len(positional) != 1 {
			usage()
		}
		s, err := localcluster.Load(absDir)
		check(err)
		p, err := s.NodeKubeconfig(positional[0])
		check(err)
		fmt.Println(p)
	case "stop-node", "start-node":
		if len(positional) != 1 {
			usage()
		}
		s, err := localcluster.Load(absDir)
		check(err)
		if cmd == "stop-node" {
			check(s.StopNodeAgent(positional[0]))
		} else {
			check(s.StartNodeAgent(positional[0]))
		}
	case "kubeadm-join-prepare":
		s, err := localcluster.Load(absDir)
		check(err)
		j, err := s.PrepareKubeadmJoin(ctx, localcluster.KubeadmJoinOptions{KubernetesVersion: *k8sVersion, HealthzPort: *healthzPort, Port: *kubeletPort})
		check(err)
		fmt.Printf("export KUBEADM_ENDPOINT=%q\n", j.Endpoint)
		fmt.Printf("export KUBEADM_TOKEN=%q\n", j.Token)
		fmt.Printf("export KUBEADM_CA_CERT_HASH=%q\n", j.CACertHash)
	default:
		usage()
	}
}

func printEnv(s *localcluster.State) {
	fmt.Printf("export NODEAGENT_CLUSTER_DIR=%q\n", s.Dir)
	fmt.Printf("export KUBECONFIG=%q\n", s.AdminKubeconfig)
	fmt.Printf("export NODEAGENT_APISERVER_URL=%q\n", s.APIServerURL)
	fmt.Printf("export NODEAGENT_ETCD_URL=%q\n", s.EtcdURL)
	fmt.Printf("export NODEAGENT_CONTAINERD_ADDRESS=%q\n", s.ContainerdAddress)
}

func check(err error) {
	if err != nil {
		if os.IsNotExist(err) {
			fmt.Fprintln(os.Stderr, "localcluster: no cluster is running here: start one with `hack/localcluster.sh up`")
		} else {
			fmt.Fprintln(os.Stderr, err)
		}
		os.Exit(1)
	}
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: localcluster up|down|status|env|node-kubeconfig NAME|stop-node NAME|start-node NAME|kubeadm-join-prepare [--dir DIR] [--bin-dir DIR] [--no-containerd]")
	os.Exit(2)
}
