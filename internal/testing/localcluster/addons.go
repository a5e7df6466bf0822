package localcluster

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// The add-ons of a multi-node cluster, deployed as kubeadm deploys them
// (docs/multinode.md), from images built here out of local binaries:
//
//   - the pod network: hack/routeagent as a DaemonSet (what flannel's
//     host-gw backend does: each node's CNI configuration from its
//     spec.podCIDR, a route per other node via its InternalIP);
//   - kube-proxy (iptables mode) as a DaemonSet with its ConfigMap;
//   - CoreDNS as a Deployment behind the kube-dns Service at ClusterDNS
//     (when BinDir has coredns).
//
// The add-ons run the node's own ip and iptables: their images (built by
// hack/localcluster, Options.ImportImages) are the program alone at /, and
// the host's /usr and /etc/alternatives are mounted in (on a merged-/usr
// host, as Debian's), so what they run is what the CNI plugins, also the
// host's, run.

// Image references of the add-ons.
const (
	RouteAgentImage = "docker.io/nodeagent/routeagent:test"
	KubeProxyImage  = "registry.k8s.io/kube-proxy:v1.34.4"
	CoreDNSImage    = "registry.k8s.io/coredns/coredns:v1.12.1"
)

// deployAddons applies the add-ons' objects (before the nodes start: their
// DaemonSets' pods are the first each node runs).
func (s *State) deployAddons(ctx context.Context, o Options) error {
	m := s.addonManifests(o)
	dir := filepath.Join(s.Dir, "addons")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	file := filepath.Join(dir, "addons.yaml")
	if err := os.WriteFile(file, []byte(m), 0o644); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, filepath.Join(o.BinDir, "kubectl"), "--kubeconfig", s.AdminKubeconfig, "apply", "-f", file).CombinedOutput()
	if err != nil {
		return fmt.Errorf("localcluster: applying the add-ons (%s): %w: %s", file, err, out)
	}
	fmt.Fprintf(o.Log, "localcluster: add-ons applied (%s)\n", file)
	return nil
}

// apiserverHostPort is the API server's address as the nodes reach it.
func (s *State) apiserverHostPort() (string, string) {
	u := strings.TrimPrefix(s.APIServerURL, "https://")
	h, p, _ := strings.Cut(u, ":")
	return h, p
}

// hostToolsMounts are the volumeMounts and volumes of hostToolsLayout
// (/lib/modules is the host's /usr/lib/modules, through the image's lib
// symlink).
const hostToolsMounts = `
        - {name: usr, mountPath: /usr, readOnly: true}
        - {name: alternatives, mountPath: /etc/alternatives, readOnly: true}
        - {name: xtables-lock, mountPath: /run/xtables.lock}`

const hostToolsVolumes = `
      - {name: usr, hostPath: {path: /usr}}
      - {name: alternatives, hostPath: {path: /etc/alternatives}}
      - {name: xtables-lock, hostPath: {path: /run/xtables.lock, type: FileOrCreate}}`

func (s *State) addonManifests(o Options) string {
	host, port := s.apiserverHostPort()
	var b bytes.Buffer
	// The pod network: the route agent. Like flannel's DaemonSet, it
	// reaches the API server at its real address (the kubernetes
	// Service needs kube-proxy, which may not run yet), tolerates
	// everything and runs before the node is Ready.
	fmt.Fprintf(&b, `apiVersion: v1
kind: ServiceAccount
metadata: {name: routeagent, namespace: kube-system}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: routeagent}
rules:
- apiGroups: [""]
  resources: [nodes]
  verbs: [get, list, watch]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: routeagent}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: routeagent}
subjects:
- {kind: ServiceAccount, name: routeagent, namespace: kube-system}
---
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: routeagent, namespace: kube-system, labels: {k8s-app: routeagent}}
spec:
  selector: {matchLabels: {k8s-app: routeagent}}
  template:
    metadata: {labels: {k8s-app: routeagent}}
    spec:
      serviceAccountName: routeagent
      hostNetwork: true
      priorityClassName: system-node-critical
      tolerations: [{operator: Exists}]
      terminationGracePeriodSeconds: 1
      containers:
      - name: routeagent
        image: %s
        securityContext: {privileged: true}
        env:
        - {name: NODE_NAME, valueFrom: {fieldRef: {fieldPath: spec.nodeName}}}
        - {name: NODES_DIR, value: %q}
        - {name: CLUSTER_CIDR, value: %q}
        - {name: KUBERNETES_SERVICE_HOST, value: %q}
        - {name: KUBERNETES_SERVICE_PORT, value: %q}
        volumeMounts:
        - {name: nodes, mountPath: %q}%s
      volumes:
      - {name: nodes, hostPath: {path: %q}}%s
`, RouteAgentImage, s.NodesDir(), s.PodNetwork(), host, port, s.NodesDir(), hostToolsMounts, s.NodesDir(), hostToolsVolumes)
	// kube-proxy, as kubeadm deploys it: its ServiceAccount bound to
	// system:node-proxier, a ConfigMap with the KubeProxyConfiguration and
	// a kubeconfig naming the API server's real address, a DaemonSet.
	fmt.Fprintf(&b, `---
apiVersion: v1
kind: ServiceAccount
metadata: {name: kube-proxy, namespace: kube-system}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: kubeadm:node-proxier}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: system:node-proxier}
subjects:
- {kind: ServiceAccount, name: kube-proxy, namespace: kube-system}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: kube-proxy, namespace: kube-system, labels: {app: kube-proxy}}
data:
  config.conf: |-
    apiVersion: kubeproxy.config.k8s.io/v1alpha1
    kind: KubeProxyConfiguration
    bindAddress: 0.0.0.0
    clientConnection:
      kubeconfig: /var/lib/kube-proxy/kubeconfig.conf
    clusterCIDR: %s
    mode: iptables
    # The nodes share this machine's conntrack table limits: leave them.
    conntrack:
      maxPerCore: 0
    metricsBindAddress: 127.0.0.1:10249
    healthzBindAddress: 127.0.0.1:10256
  kubeconfig.conf: |-
    apiVersion: v1
    kind: Config
    clusters:
    - cluster:
        certificate-authority: /var/run/secrets/kubernetes.io/serviceaccount/ca.crt
        server: %s
      name: default
    contexts:
    - context: {cluster: default, namespace: default, user: default}
      name: default
    current-context: default
    users:
    - name: default
      user:
        tokenFile: /var/run/secrets/kubernetes.io/serviceaccount/token
---
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: kube-proxy, namespace: kube-system, labels: {k8s-app: kube-proxy}}
spec:
  selector: {matchLabels: {k8s-app: kube-proxy}}
  template:
    metadata: {labels: {k8s-app: kube-proxy}}
    spec:
      serviceAccountName: kube-proxy
      hostNetwork: true
      priorityClassName: system-node-critical
      tolerations: [{operator: Exists}]
      containers:
      - name: kube-proxy
        image: %s
        command: [/kube-proxy, --config=/var/lib/kube-proxy/config.conf, --hostname-override=$(NODE_NAME)]
        env:
        - {name: NODE_NAME, valueFrom: {fieldRef: {fieldPath: spec.nodeName}}}
        securityContext: {privileged: true}
        volumeMounts:
        - {name: kube-proxy, mountPath: /var/lib/kube-proxy}%s
      volumes:
      - {name: kube-proxy, configMap: {name: kube-proxy}}%s
`, s.PodNetwork(), s.APIServerURL, KubeProxyImage, hostToolsMounts, hostToolsVolumes)
	if _, err := os.Stat(filepath.Join(o.BinDir, "coredns")); err == nil {
		b.WriteString(coreDNSManifests())
	}
	return b.String()
}

// waitNodesReady waits until every node is Ready (its pod network written
// by the add-on) and the add-ons' DaemonSets run everywhere.
func (s *State) waitNodesReady(ctx context.Context, o Options, timeout time.Duration) error {
	kubectl := filepath.Join(o.BinDir, "kubectl")
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var last string
	for {
		out, err := exec.CommandContext(ctx, kubectl, "--kubeconfig", s.AdminKubeconfig, "get", "nodes", "-o",
			`jsonpath={range .items[*]}{.metadata.name}={.status.conditions[?(@.type=="Ready")].status} {end}`).CombinedOutput()
		last = strings.TrimSpace(string(out))
		if err == nil && strings.Count(last, "=True") == len(s.Nodes) {
			fmt.Fprintf(o.Log, "localcluster: nodes Ready: %s\n", last)
			return nil
		}
		for _, n := range s.Nodes {
			if pid, ok := s.Pids[n.Name+"-agent"]; ok && !alive(pid) {
				return s.exitError(n.Name + "-agent")
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("localcluster: nodes not Ready after %s: %s (logs in %s)", timeout, last, filepath.Join(s.Dir, "logs"))
		case <-time.After(time.Second):
		}
	}
}
