// Package localcluster runs a real, local Kubernetes control plane (etcd,
// kube-apiserver, kube-controller-manager, kube-scheduler) and a private
// containerd on loopback, for `make run` and for the integration and e2e
// tests.
//
// Contract:
//   - Up is idempotent: when the cluster recorded in Dir is running and
//     healthy it is reused; otherwise whatever is left of it is stopped and a
//     fresh one (new etcd data, same CA) is started.
//   - Processes run detached (own session) so that a cluster can outlive the
//     command that started it (make test starts one and shares it between test
//     binaries); Down stops them all and is idempotent too.
//   - Every port is a free loopback port chosen at start; nothing listens on
//     other addresses. containerd uses a private root, state dir and socket
//     under Dir, so it never collides with a host containerd.
//   - The apiserver serves TLS with Node,RBAC authorization and NodeRestriction
//     admission. Agents get node credentials (CN=system:node:<name>,
//     O=system:nodes) from NodeKubeconfig; Admin is system:masters.
//   - The aggregation layer is on as kubeadm configures it (front-proxy CA
//     and client certificate, request-header flags), with
//     --enable-aggregator-routing: there is no kube-proxy, so an APIService
//     is reached at its Service's endpoints, which must be addresses of
//     this host (a hostNetwork pod's) or of a pod network on it.
package localcluster

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/nodeagent/nodeagent/internal/pki"
)

// Options configure Up.
type Options struct {
	// Dir holds certificates, kubeconfigs, data, logs and the state file.
	Dir string
	// BinDir holds etcd, kube-apiserver, kube-controller-manager and
	// kube-scheduler (`make controlplane`: etcd from hack/build-etcd.sh, a
	// version Kubernetes supports, never the host's).
	BinDir string
	// NoContainerd skips the private containerd.
	NoContainerd bool
	// Log receives progress lines; nil discards them.
	Log io.Writer
	// NodeCIDRMaskSize is the size of the pod CIDR each node gets out of
	// ClusterCIDR (kube-controller-manager's --node-cidr-mask-size); 0 is
	// DefaultNodeCIDRMaskSize (a /24 per node, 256 nodes). A fleet of
	// simulated nodes needs a longer mask: 29 gives 8,192 nodes a /29 each.
	NodeCIDRMaskSize int
	// ClusterSigningDuration is kube-controller-manager's
	// --cluster-signing-duration (how long the certificates it issues are
	// valid); 0 is its default (a year). Rotation tests start a cluster of
	// their own with a short one.
	ClusterSigningDuration time.Duration
	// ClusterCIDR is the /16 the controller manager gives node pod CIDRs
	// out of; "" is ClusterCIDR. Two clusters whose nodes run CNI networks
	// on one host at once (make test runs the conformance specs on a
	// cluster of its own beside the e2e tests) need different ones, or two
	// bridges get the same subnet.
	ClusterCIDR string
	// Nodes >= 2 makes a multi-node cluster (nodes.go, docs/multinode.md):
	// that many nodeagent nodes, each in network and UTS namespaces of its
	// own with its own containerd, on a bridge whose host address the
	// control plane listens on, and the add-ons (pod network, kube-proxy,
	// CoreDNS) deployed as pods. 0 and 1: no nodes (tests start agents).
	Nodes int
	// AgentBin is the nodeagent binary the nodes run ("": BinDir/nodeagent).
	AgentBin string
	// ImportImages imports the images the nodes need (the add-ons', the
	// tests') into a node's containerd (its socket path), before its agent
	// starts; hack/localcluster builds them (localcluster cannot import
	// testimage, which imports it).
	ImportImages func(ctx context.Context, containerdAddress string) error
	// NodeMonitorGracePeriod is kube-controller-manager's
	// --node-monitor-grace-period (0: 40s, the node Lease's duration).
	NodeMonitorGracePeriod time.Duration
	// PodEvictionToleration is the API server's
	// --default-not-ready-toleration-seconds and
	// --default-unreachable-toleration-seconds (0: their default, 300s):
	// how long pods stay bound to a NotReady node before the node
	// lifecycle controller evicts them.
	PodEvictionToleration time.Duration
}

// State describes a running cluster. It is saved as Dir/state.json.
type State struct {
	Dir               string         `json:"dir"`
	APIServerURL      string         `json:"apiServerURL"`
	EtcdURL           string         `json:"etcdURL"`
	ContainerdAddress string         `json:"containerdAddress,omitempty"`
	AdminKubeconfig   string         `json:"adminKubeconfig"`
	CACert            string         `json:"caCert"`
	Pids              map[string]int `json:"pids"`
	Ports             map[string]int `json:"ports"`
	// Args are the command lines of components stopped with Stop, for Start.
	Args map[string][]string `json:"args,omitempty"`
	// NodeCIDRMaskSize is Options.NodeCIDRMaskSize in force (0 in state
	// files written before it existed: DefaultNodeCIDRMaskSize).
	NodeCIDRMaskSize int `json:"nodeCIDRMaskSize,omitempty"`
	// TLSBootstrap: bootstrap tokens authenticate and kubeadm's CSR
	// bindings exist (false in state files written before: restarted).
	TLSBootstrap bool `json:"tlsBootstrap,omitempty"`
	// ClusterSigningDuration is Options.ClusterSigningDuration in force.
	ClusterSigningDuration time.Duration `json:"clusterSigningDuration,omitempty"`
	// ClusterCIDR is Options.ClusterCIDR in force ("" is ClusterCIDR).
	ClusterCIDR string `json:"clusterCIDR,omitempty"`
	// Etcd is the etcd binary the cluster runs ("" in state files written
	// before it was recorded: they ran the host's etcd and are restarted).
	Etcd string `json:"etcd,omitempty"`
	// Aggregation: the API server runs the aggregation layer as kubeadm
	// configures it (front-proxy CA and client certificate, request
	// headers), routing to endpoints (false in state files written before:
	// restarted).
	Aggregation bool `json:"aggregation,omitempty"`
	// A multi-node cluster's nodes and node network (nodes.go).
	Nodes      []Node `json:"nodes,omitempty"`
	NodeNetID  string `json:"nodeNetID,omitempty"`
	Bridge     string `json:"bridge,omitempty"`
	NodeSubnet string `json:"nodeSubnet,omitempty"`
	HostIP     string `json:"hostIP,omitempty"` // the bridge's address: the API server's
	AgentBin   string `json:"agentBin,omitempty"`
}

const stateFile = "state.json"

// ClusterCIDR is the pod network the controller manager allocates node pod
// CIDRs (/24s) from.
const ClusterCIDR = "10.244.0.0/16"

// DefaultNodeCIDRMaskSize is the pod CIDR size per node unless
// Options.NodeCIDRMaskSize says otherwise: what the e2e tests' CNI networks get.
const DefaultNodeCIDRMaskSize = 24

// clusterCIDRBits is ClusterCIDR's prefix length.
const clusterCIDRBits = 16

// checkNodeCIDRMaskSize rejects a mask kube-controller-manager would refuse
// (not longer than the cluster's, or more than 16 bits longer) or that
// leaves a node's pod CIDR without addresses.
func checkNodeCIDRMaskSize(mask int) error {
	if mask <= clusterCIDRBits || mask > clusterCIDRBits+16 || mask > 30 {
		return fmt.Errorf("localcluster: NodeCIDRMaskSize %d: must be between %d and 30 (ClusterCIDR is %s)", mask, clusterCIDRBits+1, ClusterCIDR)
	}
	return nil
}

// checkClusterCIDR accepts "" (ClusterCIDR) or an IPv4 /16 (the mask
// checks above assume 16 bits).
func checkClusterCIDR(cidr string) error {
	if cidr == "" {
		return nil
	}
	p, err := netip.ParsePrefix(cidr)
	if err != nil || !p.Addr().Is4() || p.Bits() != clusterCIDRBits || p.Masked() != p {
		return fmt.Errorf("localcluster: ClusterCIDR %q: want an IPv4 /%d such as %s", cidr, clusterCIDRBits, ClusterCIDR)
	}
	return nil
}

// PodNetwork is the /16 this cluster gives node pod CIDRs out of.
func (s *State) PodNetwork() string {
	if s.ClusterCIDR != "" {
		return s.ClusterCIDR
	}
	return ClusterCIDR
}

// MaxNodes is how many nodes the controller manager can give a pod CIDR
// (the rest get none and events about it).
func (s *State) MaxNodes() int {
	mask := s.NodeCIDRMaskSize
	if mask == 0 {
		mask = DefaultNodeCIDRMaskSize
	}
	return 1 << (mask - clusterCIDRBits)
}

// nodeCount is how many nodes Up starts: Options.Nodes when 2 or more.
func nodeCount(o Options) int {
	if o.Nodes >= 2 {
		return o.Nodes
	}
	return 0
}

// Component names, in start order.
var components = []string{"etcd", "containerd", "kube-apiserver", "kube-controller-manager", "kube-scheduler"}

// Load reads the state of the cluster in dir; it does not check it is healthy.
func Load(dir string) (*State, error) {
	b, err := os.ReadFile(filepath.Join(dir, stateFile))
	if err != nil {
		return nil, err
	}
	var s State
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, fmt.Errorf("%s: %w", filepath.Join(dir, stateFile), err)
	}
	return &s, nil
}

// Healthy reports whether every recorded process is alive and the apiserver
// answers /readyz.
func (s *State) Healthy(ctx context.Context) error {
	for name, pid := range s.Pids {
		if !alive(pid) {
			return fmt.Errorf("%s (pid %d) is not running", name, pid)
		}
	}
	return s.apiserverReady(ctx)
}

// Up starts the cluster, or reuses the running one. See the package doc.
func Up(ctx context.Context, o Options) (*State, error) {
	if o.Log == nil {
		o.Log = io.Discard
	}
	if os.Geteuid() != 0 {
		return nil, errors.New("localcluster: must run as root (containerd, runc and cgroups need it): run it with sudo")
	}
	dir, err := filepath.Abs(o.Dir)
	if err != nil {
		return nil, err
	}
	o.Dir = dir
	if o.NodeCIDRMaskSize == 0 {
		o.NodeCIDRMaskSize = DefaultNodeCIDRMaskSize
	}
	if err := checkNodeCIDRMaskSize(o.NodeCIDRMaskSize); err != nil {
		return nil, err
	}
	if err := checkClusterCIDR(o.ClusterCIDR); err != nil {
		return nil, err
	}
	if s, err := Load(dir); err == nil {
		hctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		herr := s.Healthy(hctx)
		cancel()
		if herr == nil && !s.TLSBootstrap {
			herr = errors.New("it predates TLS bootstrap support")
		}
		if herr == nil && !s.Aggregation {
			herr = errors.New("it predates the API aggregation layer")
		}
		if herr == nil && s.Etcd != filepath.Join(o.BinDir, "etcd") {
			herr = fmt.Errorf("it runs etcd %q, %q wanted", s.Etcd, filepath.Join(o.BinDir, "etcd"))
		}
		if herr == nil && s.ClusterSigningDuration != o.ClusterSigningDuration {
			herr = fmt.Errorf("it signs certificates for %s, %s wanted", s.ClusterSigningDuration, o.ClusterSigningDuration)
		}
		if herr == nil && s.ClusterCIDR != o.ClusterCIDR {
			herr = fmt.Errorf("its pod network is %s, %s wanted", s.PodNetwork(), (&State{ClusterCIDR: o.ClusterCIDR}).PodNetwork())
		}
		if herr == nil && len(s.Nodes) != nodeCount(o) {
			herr = fmt.Errorf("it has %d nodes, %d wanted", len(s.Nodes), nodeCount(o))
		}
		if herr == nil && (o.NoContainerd || s.ContainerdAddress != "") && s.MaxNodes() == 1<<(o.NodeCIDRMaskSize-clusterCIDRBits) {
			fmt.Fprintf(o.Log, "localcluster: reusing the running cluster in %s (%s)\n", dir, s.APIServerURL)
			return s, nil
		}
		if herr == nil {
			herr = fmt.Errorf("it allocates pod CIDRs for %d nodes, %d wanted", s.MaxNodes(), 1<<(o.NodeCIDRMaskSize-clusterCIDRBits))
		}
		fmt.Fprintf(o.Log, "localcluster: restarting the cluster in %s: %v\n", dir, herr)
		if err := Down(dir); err != nil {
			return nil, err
		}
	}
	if err := checkBinaries(o); err != nil {
		return nil, err
	}
	if o.AgentBin == "" {
		o.AgentBin = filepath.Join(o.BinDir, "nodeagent")
	}
	s, err := start(ctx, o)
	if err != nil {
		if s != nil {
			_ = stopAll(s)
		}
		return nil, err
	}
	return s, nil
}

// Down stops the cluster recorded in dir. A dir without a cluster is fine.
func Down(dir string) error {
	s, err := Load(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if err := stopAll(s); err != nil {
		return err
	}
	return os.Remove(filepath.Join(dir, stateFile))
}

func checkBinaries(o Options) error {
	need := map[string]string{
		"etcd":                    filepath.Join(o.BinDir, "etcd"),
		"kube-apiserver":          filepath.Join(o.BinDir, "kube-apiserver"),
		"kube-controller-manager": filepath.Join(o.BinDir, "kube-controller-manager"),
		"kube-scheduler":          filepath.Join(o.BinDir, "kube-scheduler"),
	}
	for name, p := range need {
		if _, err := os.Stat(p); err != nil {
			return fmt.Errorf("localcluster: %s not found at %s: build it with `make controlplane` (hack/build-controlplane.sh)", name, p)
		}
	}
	if nodeCount(o) > 0 {
		for _, b := range []string{"kubectl", "routeagent", "kube-proxy"} {
			if _, err := os.Stat(filepath.Join(o.BinDir, b)); err != nil {
				return fmt.Errorf("localcluster: %s not found in %s: a multi-node cluster needs it (`make multinode-deps`)", b, o.BinDir)
			}
		}
	}
	if !o.NoContainerd || nodeCount(o) > 0 {
		for _, b := range []string{"containerd", "runc"} {
			if _, err := exec.LookPath(b); err != nil {
				return fmt.Errorf("localcluster: %s not found: install Debian's containerd and runc (`make deps` or `apt-get install containerd runc`)", b)
			}
		}
	}
	return nil
}

func start(ctx context.Context, o Options) (*State, error) {
	dir := o.Dir
	for _, d := range []string{"pki", "logs", "kubeconfig"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			return nil, err
		}
	}
	// Fresh data for every start: a cluster is cheap, stale state is not.
	for _, d := range []string{"etcd", "containerd"} {
		if err := os.RemoveAll(filepath.Join(dir, d)); err != nil {
			return nil, err
		}
	}
	ports, err := freePorts("etcd", "etcd-peer", "kube-apiserver", "kube-controller-manager", "kube-scheduler")
	if err != nil {
		return nil, err
	}
	s := &State{
		Dir:                    dir,
		AgentBin:               o.AgentBin,
		EtcdURL:                fmt.Sprintf("http://127.0.0.1:%d", ports["etcd"]),
		AdminKubeconfig:        filepath.Join(dir, "kubeconfig", "admin.kubeconfig"),
		NodeCIDRMaskSize:       o.NodeCIDRMaskSize,
		ClusterSigningDuration: o.ClusterSigningDuration,
		ClusterCIDR:            o.ClusterCIDR,
		TLSBootstrap:           true,
		Aggregation:            true,
		Etcd:                   filepath.Join(o.BinDir, "etcd"),
		CACert:                 filepath.Join(dir, "pki", "ca.crt"),
		Pids:                   map[string]int{},
		Ports:                  ports,
	}
	// A multi-node cluster's control plane listens on the node network's
	// host address (the nodes reach it there), the rest on loopback.
	bindAddr := "127.0.0.1"
	if nodeCount(o) > 0 {
		if err := s.setupNodeNetwork(); err != nil {
			return s, err
		}
		bindAddr = s.HostIP
	}
	s.APIServerURL = fmt.Sprintf("https://%s:%d", bindAddr, ports["kube-apiserver"])
	if err := s.writePKI(); err != nil {
		return s, err
	}
	fmt.Fprintf(o.Log, "localcluster: starting etcd on %s\n", s.EtcdURL)
	peer := fmt.Sprintf("http://127.0.0.1:%d", ports["etcd-peer"])
	if err := s.spawn("etcd", s.Etcd,
		"--name=local", "--data-dir="+filepath.Join(dir, "etcd"),
		"--listen-client-urls="+s.EtcdURL, "--advertise-client-urls="+s.EtcdURL,
		"--listen-peer-urls="+peer, "--initial-advertise-peer-urls="+peer,
		"--initial-cluster=local="+peer, "--initial-cluster-state=new",
		"--quota-backend-bytes=4294967296", "--snapshot-count=50000",
		"--unsafe-no-fsync", // test cluster: speed over durability
	); err != nil {
		return s, err
	}
	if err := waitFor(ctx, 30*time.Second, s, "etcd", func(ctx context.Context) error { return httpGet(ctx, http.DefaultClient, s.EtcdURL+"/health") }); err != nil {
		return s, err
	}
	if !o.NoContainerd {
		if err := s.startContainerd(ctx); err != nil {
			return s, err
		}
	}
	pkiDir := filepath.Join(dir, "pki")
	fmt.Fprintf(o.Log, "localcluster: starting kube-apiserver on %s\n", s.APIServerURL)
	var apiMulti []string
	if nodeCount(o) > 0 {
		// The kubernetes Service's endpoint is the advertised address,
		// reached from pods through kube-proxy.
		apiMulti = append(apiMulti, "--endpoint-reconciler-type=lease")
		// Admission webhooks and aggregated API servers (pods) are dialed
		// at their endpoints' pod IPs, not their Service's ClusterIP: the
		// API server runs in the host's namespace, where no kube-proxy
		// runs (a kubeadm control plane node has one). The host reaches
		// pod IPs by the routes hack/conformance.sh --set=full installs.
		apiMulti = append(apiMulti, "--enable-aggregator-routing=true")
		if o.PodEvictionToleration > 0 {
			sec := strconv.Itoa(int(o.PodEvictionToleration / time.Second))
			apiMulti = append(apiMulti, "--default-not-ready-toleration-seconds="+sec, "--default-unreachable-toleration-seconds="+sec)
		}
	} else {
		apiMulti = append(apiMulti, "--endpoint-reconciler-type=none") // the advertise address is loopback
	}
	if err := s.spawn("kube-apiserver", filepath.Join(o.BinDir, "kube-apiserver"), append(apiMulti,
		"--etcd-servers="+s.EtcdURL,
		"--bind-address="+bindAddr, "--advertise-address="+bindAddr,
		"--secure-port="+strconv.Itoa(ports["kube-apiserver"]),
		"--tls-cert-file="+filepath.Join(pkiDir, "apiserver.crt"),
		"--tls-private-key-file="+filepath.Join(pkiDir, "apiserver.key"),
		"--client-ca-file="+s.CACert,
		// Logs, exec, ... reach the node API with the API server's own
		// client certificate (system:masters, as kubeadm's
		// apiserver-kubelet-client), at the node's InternalIP: node names
		// do not resolve here.
		"--kubelet-client-certificate="+filepath.Join(pkiDir, "apiserver-kubelet-client.crt"),
		"--kubelet-client-key="+filepath.Join(pkiDir, "apiserver-kubelet-client.key"),
		"--kubelet-preferred-address-types=InternalIP,Hostname",
		"--authorization-mode=Node,RBAC",
		"--enable-admission-plugins=NodeRestriction",
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file="+filepath.Join(pkiDir, "sa.pub"),
		"--service-account-signing-key-file="+filepath.Join(pkiDir, "sa.key"),
		"--service-cluster-ip-range="+ServiceCIDR,
		"--allow-privileged=true",
		"--cert-dir="+filepath.Join(dir, "apiserver-certs"),
		"--profiling=false",
		// TLS bootstrap, as kubeadm's API server.
		"--enable-bootstrap-token-auth=true",
		// Image volumes (volumes[].image) are beta but off by default in
		// 1.34: without the gate the API server drops the field. The
		// agent's own gate (featureGates: {ImageVolume: true}) decides
		// whether a node mounts them.
		"--feature-gates=ImageVolume=true",
		// The aggregation layer (metrics.k8s.io from metrics-server, ...),
		// as kubeadm configures it: the API server proxies to an extension
		// API server with the front-proxy client certificate and the
		// user in request headers, which the extension server trusts from
		// the front-proxy CA (published in kube-system's
		// extension-apiserver-authentication ConfigMap).
		"--requestheader-client-ca-file="+filepath.Join(pkiDir, "front-proxy-ca.crt"),
		"--requestheader-allowed-names=front-proxy-client",
		"--requestheader-extra-headers-prefix=X-Remote-Extra-",
		"--requestheader-group-headers=X-Remote-Group",
		"--requestheader-username-headers=X-Remote-User",
		"--proxy-client-cert-file="+filepath.Join(pkiDir, "front-proxy-client.crt"),
		"--proxy-client-key-file="+filepath.Join(pkiDir, "front-proxy-client.key"),
		// No kube-proxy here: a Service's cluster IP leads nowhere, so the
		// API server dials an APIService's endpoints (its pods' IPs).
		"--enable-aggregator-routing=true",
	)...); err != nil {
		return s, err
	}
	if err := waitFor(ctx, 90*time.Second, s, "kube-apiserver", s.apiserverReady); err != nil {
		return s, err
	}
	if err := s.bootstrapRBAC(ctx); err != nil {
		return s, err
	}
	fmt.Fprintln(o.Log, "localcluster: starting kube-controller-manager and kube-scheduler")
	grace := 40 * time.Second
	if o.NodeMonitorGracePeriod > 0 {
		grace = o.NodeMonitorGracePeriod
	}
	kcmSigning := []string{}
	if o.ClusterSigningDuration > 0 {
		kcmSigning = append(kcmSigning, "--cluster-signing-duration="+o.ClusterSigningDuration.String())
	}
	if err := s.spawn("kube-controller-manager", filepath.Join(o.BinDir, "kube-controller-manager"), append(kcmSigning,
		"--kubeconfig="+filepath.Join(dir, "kubeconfig", "controller-manager.kubeconfig"),
		"--authentication-kubeconfig="+filepath.Join(dir, "kubeconfig", "controller-manager.kubeconfig"),
		"--authorization-kubeconfig="+filepath.Join(dir, "kubeconfig", "controller-manager.kubeconfig"),
		"--bind-address=127.0.0.1", "--secure-port="+strconv.Itoa(ports["kube-controller-manager"]),
		"--leader-elect=false",
		"--use-service-account-credentials=true",
		"--service-account-private-key-file="+filepath.Join(pkiDir, "sa.key"),
		"--root-ca-file="+s.CACert,
		"--cluster-signing-cert-file="+s.CACert,
		"--cluster-signing-key-file="+filepath.Join(pkiDir, "ca.key"),
		// Spelled out because the tests depend on them. The monitor period
		// is the upstream default; the grace period is the node Lease's
		// duration (40 s), stricter than kube-controller-manager's default
		// since v1.32 (50 s): "never NotReady" in the fault, soak and fleet
		// tests means no Lease went a whole lease duration unrenewed.
		"--node-monitor-grace-period="+grace.String(), "--node-monitor-period=5s",
		// bootstrapsigner and tokencleaner are off by default; kubeadm
		// turns them on for bootstrap tokens (csrapproving and csrsigning
		// are in *).
		"--controllers=*,bootstrapsigner,tokencleaner,-cloud-node-lifecycle,-service-lb-controller,-route",
		// Node pod CIDRs (spec.podCIDR) for the tests' CNI networks: a
		// private /16 nothing else on the test hosts uses (the network
		// package's own tests take /24s of 10.245.0.0/16).
		"--allocate-node-cidrs=true", "--cluster-cidr="+s.PodNetwork(), "--node-cidr-mask-size="+strconv.Itoa(s.NodeCIDRMaskSize),
	)...); err != nil {
		return s, err
	}
	if err := s.spawn("kube-scheduler", filepath.Join(o.BinDir, "kube-scheduler"),
		"--kubeconfig="+filepath.Join(dir, "kubeconfig", "scheduler.kubeconfig"),
		"--authentication-kubeconfig="+filepath.Join(dir, "kubeconfig", "scheduler.kubeconfig"),
		"--authorization-kubeconfig="+filepath.Join(dir, "kubeconfig", "scheduler.kubeconfig"),
		"--bind-address=127.0.0.1", "--secure-port="+strconv.Itoa(ports["kube-scheduler"]),
		"--leader-elect=false",
	); err != nil {
		return s, err
	}
	if err := waitFor(ctx, 60*time.Second, s, "kube-node-lease namespace", s.adminGet("/api/v1/namespaces/kube-node-lease")); err != nil {
		return s, err
	}
	// The default namespace's ServiceAccount, made by the controller
	// manager's serviceaccount controller a moment after it starts: until
	// it exists the ServiceAccount admission refuses every pod there (a test
	// that applied a pod 2 s after up failed so).
	if err := waitFor(ctx, 60*time.Second, s, "the default ServiceAccount", s.adminGet("/api/v1/namespaces/default/serviceaccounts/default")); err != nil {
		return s, err
	}
	// The controllers start within a second; a dead one shows up here.
	time.Sleep(time.Second)
	for _, c := range []string{"kube-controller-manager", "kube-scheduler"} {
		if !alive(s.Pids[c]) {
			return s, s.exitError(c)
		}
	}
	if err := s.save(); err != nil {
		return s, err
	}
	if nodeCount(o) > 0 {
		if err := s.deployAddons(ctx, o); err != nil {
			return s, err
		}
		if err := s.startNodes(ctx, o); err != nil {
			return s, err
		}
		if err := s.waitNodesReady(ctx, o, 4*time.Minute); err != nil {
			return s, err
		}
		if err := s.save(); err != nil {
			return s, err
		}
	}
	fmt.Fprintf(o.Log, "localcluster: ready: apiserver %s, admin kubeconfig %s\n", s.APIServerURL, s.AdminKubeconfig)
	return s, nil
}

func (s *State) startContainerd(ctx context.Context) error {
	cdir := filepath.Join(s.Dir, "containerd")
	sock := filepath.Join(cdir, "containerd.sock")
	if len(sock) > 100 {
		return fmt.Errorf("localcluster: containerd socket path %s is longer than a unix socket allows (108): use a shorter cluster dir", sock)
	}
	for _, d := range []string{"root", "state"} {
		if err := os.MkdirAll(filepath.Join(cdir, d), 0o711); err != nil {
			return err
		}
	}
	cfg := ContainerdConfig(filepath.Join(cdir, "root"), filepath.Join(cdir, "state"), sock)
	cfgPath := filepath.Join(cdir, "config.toml")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
		return err
	}
	if err := s.spawn("containerd", "containerd", "--config="+cfgPath); err != nil {
		return err
	}
	s.ContainerdAddress = sock
	return waitFor(ctx, 30*time.Second, s, "containerd", func(ctx context.Context) error {
		c, err := (&net.Dialer{}).DialContext(ctx, "unix", sock)
		if err != nil {
			return err
		}
		return c.Close()
	})
}

// ContainerdConfig is the configuration of a private containerd (1.6 to
// 2.x): its own root, state dir and sockets, no CRI plugin (the agent talks
// to containerd's own API), no debug or metrics listener.
func ContainerdConfig(root, state, address string) string {
	return fmt.Sprintf(`version = 2
root = %q
state = %q
disabled_plugins = ["io.containerd.grpc.v1.cri", "io.containerd.cri.v1.images", "io.containerd.cri.v1.runtime"]

[grpc]
  address = %q

[ttrpc]
  address = %q

[debug]
  address = ""

[metrics]
  address = ""
`, root, state, address, address+".ttrpc")
}

// writePKI creates the CA (kept across restarts, so node kubeconfigs minted
// earlier stay valid) and the control plane's certificates and kubeconfigs.
func (s *State) writePKI() error {
	pkiDir := filepath.Join(s.Dir, "pki")
	ca, err := pki.LoadOrCreateCA(pkiDir, "nodeagent-local-ca")
	if err != nil {
		return err
	}
	if _, err := os.Stat(filepath.Join(pkiDir, "sa.key")); err != nil {
		if _, keyPEM, err := ca.Issue("service-accounts", nil, nil); err != nil {
			return err
		} else if err := pki.WriteFile(filepath.Join(pkiDir, "sa.key"), keyPEM, 0o600); err != nil {
			return err
		}
	}
	saKey, err := os.ReadFile(filepath.Join(pkiDir, "sa.key"))
	if err != nil {
		return err
	}
	signer, err := pki.DecodeKey(saKey)
	if err != nil {
		return err
	}
	pub, err := pki.PublicKeyPEM(signer)
	if err != nil {
		return err
	}
	if err := pki.WriteFile(filepath.Join(pkiDir, "sa.pub"), pub, 0o644); err != nil {
		return err
	}
	sans := []string{"127.0.0.1", "localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local", "10.96.0.1"}
	if s.HostIP != "" {
		sans = append(sans, s.HostIP)
	}
	cert, key, err := ca.Issue("kube-apiserver", nil, sans)
	if err != nil {
		return err
	}
	if err := pki.WriteFile(filepath.Join(pkiDir, "apiserver.crt"), cert, 0o644); err != nil {
		return err
	}
	if err := pki.WriteFile(filepath.Join(pkiDir, "apiserver.key"), key, 0o600); err != nil {
		return err
	}
	cert, key, err = ca.Issue("kube-apiserver-kubelet-client", []string{"system:masters"}, nil)
	if err != nil {
		return err
	}
	if err := pki.WriteFile(filepath.Join(pkiDir, "apiserver-kubelet-client.crt"), cert, 0o644); err != nil {
		return err
	}
	if err := pki.WriteFile(filepath.Join(pkiDir, "apiserver-kubelet-client.key"), key, 0o600); err != nil {
		return err
	}
	// The aggregation layer's front proxy: a CA of its own (kept across
	// restarts, as the cluster CA) and the API server's client certificate
	// for extension API servers, named as kubeadm names them.
	fp, err := pki.LoadOrCreateCAFiles(filepath.Join(pkiDir, "front-proxy-ca.crt"), filepath.Join(pkiDir, "front-proxy-ca.key"), "front-proxy-ca")
	if err != nil {
		return err
	}
	cert, key, err = fp.Issue("front-proxy-client", nil, nil)
	if err != nil {
		return err
	}
	if err := pki.WriteFile(filepath.Join(pkiDir, "front-proxy-client.crt"), cert, 0o644); err != nil {
		return err
	}
	if err := pki.WriteFile(filepath.Join(pkiDir, "front-proxy-client.key"), key, 0o600); err != nil {
		return err
	}
	for _, k := range []struct{ file, user, group string }{
		{"admin.kubeconfig", "kubernetes-admin", "system:masters"},
		{"controller-manager.kubeconfig", "system:kube-controller-manager", ""},
		{"scheduler.kubeconfig", "system:kube-scheduler", ""},
	} {
		var groups []string
		if k.group != "" {
			groups = []string{k.group}
		}
		if err := s.writeKubeconfig(ca, filepath.Join(s.Dir, "kubeconfig", k.file), k.user, groups); err != nil {
			return err
		}
	}
	return nil
}

// NodeKubeconfig writes (or reuses) a kubeconfig with node credentials for
// nodeName, as a kubelet has them: CN=system:node:<nodeName>, O=system:nodes.
func (s *State) NodeKubeconfig(nodeName string) (string, error) {
	path := filepath.Join(s.Dir, "kubeconfig", "node-"+nodeName+".kubeconfig")
	if b, err := os.ReadFile(path); err == nil && strings.Contains(string(b), s.APIServerURL) {
		return path, nil
	}
	ca, err := pki.LoadCA(s.CACert, filepath.Join(s.Dir, "pki", "ca.key"))
	if err != nil {
		return "", err
	}
	return path, s.writeKubeconfig(ca, path, "system:node:"+nodeName, []string{"system:nodes"})
}

func (s *State) writeKubeconfig(ca *pki.CA, path, user string, groups []string) error {
	cert, key, err := ca.Issue(user, groups, nil)
	if err != nil {
		return err
	}
	return pki.WriteFile(path, []byte(Kubeconfig(s.APIServerURL, ca.CertPEM, cert, key)), 0o600)
}

// Kubeconfig renders a kubeconfig with embedded client certificate credentials.
func Kubeconfig(server string, caPEM, certPEM, keyPEM []byte) string {
	b64 := func(b []byte) string { return base64Std(b) }
	return fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: local
  cluster:
    server: %s
    certificate-authority-data: %s
users:
- name: user
  user:
    client-certificate-data: %s
    client-key-data: %s
contexts:
- name: local
  context: {cluster: local, user: user}
current-context: local
`, server, b64(caPEM), b64(certPEM), b64(keyPEM))
}

func (s *State) save() error {
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return err
	}
	return pki.WriteFile(filepath.Join(s.Dir, stateFile), b, 0o644)
}

// spawn starts a component detached, logging to Dir/logs/<name>.log.
func (s *State) spawn(name, bin string, args ...string) error {
	logf, err := os.OpenFile(filepath.Join(s.Dir, "logs", name+".log"), os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	defer logf.Close()
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.Dir = s.Dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("localcluster: starting %s: %w", name, err)
	}
	s.Pids[name] = cmd.Process.Pid
	// Save after every start so that Down can clean up a half-started cluster.
	if err := s.save(); err != nil {
		return err
	}
	go func() { _ = cmd.Wait() }() // reap it if it dies while we are still here
	return nil
}

// exitError explains why a component died, from the end of its log.
func (s *State) exitError(name string) error {
	logPath := filepath.Join(s.Dir, "logs", name+".log")
	b, _ := os.ReadFile(logPath)
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) > 15 {
		lines = lines[len(lines)-15:]
	}
	tail := strings.Join(lines, "\n")
	if strings.Contains(tail, "address already in use") {
		return fmt.Errorf("localcluster: %s could not bind its port (address already in use): stop whatever holds it, or run `hack/localcluster.sh down` and try again; log: %s", name, logPath)
	}
	return fmt.Errorf("localcluster: %s exited during start-up; last lines of %s:\n%s", name, logPath, tail)
}

func waitFor(ctx context.Context, timeout time.Duration, s *State, what string, check func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var last error
	for {
		if pid, ok := s.Pids[what]; ok && !alive(pid) {
			return s.exitError(what)
		}
		cctx, ccancel := context.WithTimeout(ctx, 5*time.Second)
		last = check(cctx)
		ccancel()
		if last == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("localcluster: %s not ready after %s: %v (logs in %s)", what, timeout, last, filepath.Join(s.Dir, "logs"))
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func (s *State) adminHTTPClient() (*http.Client, error) {
	kc, err := os.ReadFile(s.AdminKubeconfig)
	if err != nil {
		return nil, err
	}
	caPEM, certPEM, keyPEM, err := parseKubeconfigCreds(kc)
	if err != nil {
		return nil, err
	}
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	return &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{pair}}}}, nil
}

func (s *State) apiserverReady(ctx context.Context) error {
	return s.adminGet("/readyz")(ctx)
}

// adminGet returns a waitFor check that GETs path on the API server as the
// admin and succeeds on 200.
func (s *State) adminGet(path string) func(context.Context) error {
	return func(ctx context.Context) error {
		c, err := s.adminHTTPClient()
		if err != nil {
			return err
		}
		defer c.CloseIdleConnections()
		return httpGet(ctx, c, s.APIServerURL+path)
	}
}

func httpGet(ctx context.Context, c *http.Client, url string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s: %s", url, resp.Status, strings.TrimSpace(string(body)))
	}
	return nil
}

func stopAll(s *State) error {
	stopNodes(s)
	// Reverse start order: clients before servers.
	for i := len(components) - 1; i >= 0; i-- {
		name := components[i]
		pid, ok := s.Pids[name]
		if !ok {
			continue
		}
		stop(pid, 10*time.Second)
		delete(s.Pids, name)
	}
	if s.ContainerdAddress != "" {
		cleanupContainerd(s)
	}
	return nil
}

// stop sends SIGTERM to the process group, then SIGKILL after grace.
func stop(pid int, grace time.Duration) {
	if !alive(pid) {
		return
	}
	_ = syscall.Kill(-pid, syscall.SIGTERM)
	deadline := time.Now().Add(grace)
	for time.Now().Before(deadline) {
		if !alive(pid) {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	_ = syscall.Kill(-pid, syscall.SIGKILL)
	for i := 0; i < 100 && alive(pid); i++ {
		time.Sleep(20 * time.Millisecond)
	}
}

// alive reports whether pid is a running (not zombie) process.
func alive(pid int) bool {
	if pid <= 0 {
		return false
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// Field 3, after the parenthesised command name, is the state.
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 || i+2 >= len(b) {
		return false
	}
	return b[i+2] != 'Z' && b[i+2] != 'X'
}

func freePorts(names ...string) (map[string]int, error) {
	ports := map[string]int{}
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	for _, n := range names {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("localcluster: no free loopback port: %w", err)
		}
		ls = append(ls, l)
		ports[n] = l.Addr().(*net.TCPAddr).Port
	}
	return ports, nil
}
