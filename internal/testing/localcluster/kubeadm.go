package localcluster

import (
	"context"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"net/url"
	"os"
	"time"
)

// KubeadmJoinOptions say how PrepareKubeadmJoin sets the cluster up.
type KubeadmJoinOptions struct {
	// KubernetesVersion is the ClusterConfiguration's kubernetesVersion
	// (kubeadm's preflight refuses a kubelet newer than it).
	KubernetesVersion string
	// HealthzPort and Port are the kubelet-config ConfigMap's healthzPort
	// and port: 0 is kubelet's (10248, 10250). A test on a shared host
	// passes free ports when kubelet's are taken.
	HealthzPort, Port int
	// TokenTTL is how long the bootstrap token is valid; 0 is kubeadm's
	// default, 24 hours.
	TokenTTL time.Duration
}

// KubeadmJoin is what `kubeadm join` needs on its command line, as
// `kubeadm token create --print-join-command` prints it.
type KubeadmJoin struct {
	// Endpoint is the API server's host:port.
	Endpoint string
	// Token is the bootstrap token "<id>.<secret>".
	Token string
	// CACertHash is "sha256:<hex>" of the cluster CA's public key
	// (--discovery-token-ca-cert-hash).
	CACertHash string
}

// The ConfigMaps and RBAC objects of kubeadm's, by kubeadm's names
// (cmd/kubeadm/app/constants, phases/bootstraptoken/clusterinfo,
// phases/uploadconfig, phases/kubelet).
const (
	kubeadmClusterInfoRole   = "kubeadm:bootstrap-signer-clusterinfo"
	kubeadmNodesConfigRole   = "kubeadm:nodes-kubeadm-config"
	kubeadmKubeletConfigRole = "kubeadm:kubelet-config"
	kubeadmGetNodesRole      = "kubeadm:get-nodes"
)

// PrepareKubeadmJoin puts in place what `kubeadm init` would have uploaded
// for `kubeadm join` to work against this cluster, and creates a bootstrap
// token to join with. It is an opt-in: the cluster runs without these
// objects, and they change nothing for nodes that do not use kubeadm.
//
//   - kube-public/cluster-info, the ConfigMap holding a kubeconfig with
//     the API server's address and CA (`kubeadm init phase
//     bootstrap-token`), readable by system:anonymous. The
//     kube-controller-manager's bootstrapsigner (on in this cluster, as in
//     kubeadm's) adds the token's JWS signature, which join verifies.
//   - kube-system/kubeadm-config (ClusterConfiguration) and
//     kube-system/kubelet-config (the KubeletConfiguration every node
//     writes to /var/lib/kubelet/config.yaml), readable by the bootstrap
//     tokens' group and system:nodes (`upload-config kubeadm`,
//     `upload-config kubelet`).
//   - kubeadm:get-nodes: the bootstrap tokens' group may get Nodes (join
//     checks that no Ready Node of its name exists).
//   - the TLS bootstrap bindings, which Up already created.
//
// Existing objects are kept, so it can run against a shared cluster more
// than once; each call creates a new token.
func (s *State) PrepareKubeadmJoin(ctx context.Context, o KubeadmJoinOptions) (*KubeadmJoin, error) {
	if o.KubernetesVersion == "" {
		return nil, errors.New("PrepareKubeadmJoin: no KubernetesVersion")
	}
	if o.HealthzPort == 0 {
		o.HealthzPort = 10248
	}
	if o.Port == 0 {
		o.Port = 10250
	}
	if o.TokenTTL == 0 {
		o.TokenTTL = 24 * time.Hour
	}
	caPEM, err := os.ReadFile(s.CACert)
	if err != nil {
		return nil, err
	}
	hash, err := caCertHash(caPEM)
	if err != nil {
		return nil, err
	}
	u, err := url.Parse(s.APIServerURL)
	if err != nil {
		return nil, err
	}

	clusterInfo := fmt.Sprintf(`apiVersion: v1
clusters:
- cluster:
    certificate-authority-data: %s
    server: %s
  name: ""
contexts: null
current-context: ""
kind: Config
preferences: {}
users: null
`, base64Std(caPEM), s.APIServerURL)
	if err := s.createConfigMap(ctx, "kube-public", "cluster-info", map[string]string{"kubeconfig": clusterInfo}); err != nil {
		return nil, err
	}
	if err := s.createRole(ctx, "kube-public", kubeadmClusterInfoRole, "cluster-info",
		map[string]any{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "system:anonymous"}); err != nil {
		return nil, err
	}

	clusterConfig := fmt.Sprintf(`apiServer: {}
apiVersion: kubeadm.k8s.io/v1beta4
caCertificateValidityPeriod: 87600h0m0s
certificateValidityPeriod: 8760h0m0s
certificatesDir: /etc/kubernetes/pki
clusterName: kubernetes
controlPlaneEndpoint: %s
controllerManager: {}
dns: {}
encryptionAlgorithm: RSA-2048
etcd:
  external:
    endpoints:
    - %s
imageRepository: registry.k8s.io
kind: ClusterConfiguration
kubernetesVersion: %s
networking:
  dnsDomain: cluster.local
  podSubnet: %s
  serviceSubnet: 10.96.0.0/16
proxy: {}
scheduler: {}
`, u.Host, s.EtcdURL, o.KubernetesVersion, ClusterCIDR)
	if err := s.applyConfigMap(ctx, "kube-system", "kubeadm-config", map[string]string{"ClusterConfiguration": clusterConfig}); err != nil {
		return nil, err
	}
	nodeGroups := []map[string]any{
		{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": NodeBootstrapGroup},
		{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": "system:nodes"},
	}
	if err := s.createRole(ctx, "kube-system", kubeadmNodesConfigRole, "kubeadm-config", nodeGroups...); err != nil {
		return nil, err
	}

	if err := s.applyConfigMap(ctx, "kube-system", "kubelet-config", map[string]string{"kubelet": KubeadmKubeletConfig(o.HealthzPort, o.Port)}); err != nil {
		return nil, err
	}
	if err := s.createRole(ctx, "kube-system", kubeadmKubeletConfigRole, "kubelet-config", nodeGroups...); err != nil {
		return nil, err
	}

	if err := s.create(ctx, "/apis/rbac.authorization.k8s.io/v1/clusterroles", map[string]any{
		"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
		"metadata": map[string]any{"name": kubeadmGetNodesRole},
		"rules":    []any{map[string]any{"apiGroups": []string{""}, "resources": []string{"nodes"}, "verbs": []string{"get"}}},
	}); err != nil {
		return nil, err
	}
	if err := s.BindClusterRole(ctx, kubeadmGetNodesRole, kubeadmGetNodesRole, NodeBootstrapGroup); err != nil {
		return nil, err
	}
	if err := s.bootstrapRBAC(ctx); err != nil {
		return nil, err
	}

	token, err := s.CreateBootstrapToken(ctx, o.TokenTTL)
	if err != nil {
		return nil, err
	}
	return &KubeadmJoin{Endpoint: u.Host, Token: token, CACertHash: hash}, nil
}

// KubeadmKubeletConfig is the KubeletConfiguration `kubeadm init` uploads
// as the kubelet-config ConfigMap with its defaults, as kubeadm v1.34.4
// prints it (`kubeadm config print init-defaults --component-configs
// KubeletConfiguration`), with the healthz and API ports given, and, as
// kind's kubeadm configuration does, no disk-based hard eviction: the
// joined node's disk is this shared host's, which builds and caches keep
// near kubelet's 15 % imagefs.available default, and DiskPressure would
// refuse the test's pods (memory.available stays at kubelet's default).
func KubeadmKubeletConfig(healthzPort, port int) string {
	return fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
authentication:
  anonymous:
    enabled: false
  webhook:
    cacheTTL: 0s
    enabled: true
  x509:
    clientCAFile: /etc/kubernetes/pki/ca.crt
authorization:
  mode: Webhook
  webhook:
    cacheAuthorizedTTL: 0s
    cacheUnauthorizedTTL: 0s
cgroupDriver: systemd
clusterDNS:
- 10.96.0.10
clusterDomain: cluster.local
containerRuntimeEndpoint: ""
cpuManagerReconcilePeriod: 0s
crashLoopBackOff: {}
evictionHard:
  imagefs.available: 0%%
  imagefs.inodesFree: 0%%
  memory.available: 100Mi
  nodefs.available: 0%%
  nodefs.inodesFree: 0%%
evictionPressureTransitionPeriod: 0s
fileCheckFrequency: 0s
healthzBindAddress: 127.0.0.1
healthzPort: %d
httpCheckFrequency: 0s
imageMaximumGCAge: 0s
imageMinimumGCAge: 0s
kind: KubeletConfiguration
logging:
  flushFrequency: 0
  options:
    json:
      infoBufferSize: "0"
    text:
      infoBufferSize: "0"
  verbosity: 0
memorySwap: {}
nodeStatusReportFrequency: 0s
nodeStatusUpdateFrequency: 0s
port: %d
rotateCertificates: true
runtimeRequestTimeout: 0s
shutdownGracePeriod: 0s
shutdownGracePeriodCriticalPods: 0s
staticPodPath: /etc/kubernetes/manifests
streamingConnectionIdleTimeout: 0s
syncFrequency: 0s
volumeStatsAggPeriod: 0s
`, healthzPort, port)
}

// caCertHash is kubeadm's --discovery-token-ca-cert-hash of a CA
// certificate: the SHA-256 of its DER SubjectPublicKeyInfo.
func caCertHash(caPEM []byte) (string, error) {
	block, _ := pem.Decode(caPEM)
	if block == nil {
		return "", errors.New("CA certificate: no PEM block")
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(cert.RawSubjectPublicKeyInfo)
	return "sha256:" + hex.EncodeToString(sum[:]), nil
}

// createConfigMap creates a ConfigMap; an existing one is kept.
func (s *State) createConfigMap(ctx context.Context, ns, name string, data map[string]string) error {
	return s.create(ctx, "/api/v1/namespaces/"+ns+"/configmaps", configMap(ns, name, data))
}

// applyConfigMap creates or replaces a ConfigMap (as kubeadm's
// CreateOrUpdate): the kubelet-config of a later call, with other ports,
// wins.
func (s *State) applyConfigMap(ctx context.Context, ns, name string, data map[string]string) error {
	return s.createOrReplace(ctx, "/api/v1/namespaces/"+ns+"/configmaps", name, configMap(ns, name, data))
}

func configMap(ns, name string, data map[string]string) map[string]any {
	return map[string]any{
		"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": name, "namespace": ns},
		"data":     data,
	}
}

// createRole creates a Role allowing get on the ConfigMap cm and a
// RoleBinding of the same name to subjects, as kubeadm's.
func (s *State) createRole(ctx context.Context, ns, name, cm string, subjects ...map[string]any) error {
	if err := s.create(ctx, "/apis/rbac.authorization.k8s.io/v1/namespaces/"+ns+"/roles", map[string]any{
		"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
		"metadata": map[string]any{"name": name, "namespace": ns},
		"rules":    []any{map[string]any{"apiGroups": []string{""}, "resources": []string{"configmaps"}, "resourceNames": []string{cm}, "verbs": []string{"get"}}},
	}); err != nil {
		return err
	}
	subs := make([]any, len(subjects))
	for i, sub := range subjects {
		subs[i] = sub
	}
	return s.create(ctx, "/apis/rbac.authorization.k8s.io/v1/namespaces/"+ns+"/rolebindings", map[string]any{
		"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
		"metadata": map[string]any{"name": name, "namespace": ns},
		"roleRef":  map[string]any{"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
		"subjects": subs,
	})
}
