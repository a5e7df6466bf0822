package config

import (
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// APIVersion and Kind identify a nodeagent configuration file.
const (
	APIVersion = "config.nodeagent.io/v1alpha1"
	Kind       = "NodeAgentConfiguration"
)

// KubeletAPIVersion and KubeletKind identify an upstream kubelet configuration
// file, which Load also accepts (supported fields are used, the others are
// reported in one warning).
const (
	KubeletAPIVersion = "kubelet.config.k8s.io/v1beta1"
	KubeletKind       = "KubeletConfiguration"
)

// NodeAgentConfiguration is the versioned configuration of nodeagent.
//
// JSON names, types and defaults follow kubelet.config.k8s.io/v1beta1
// KubeletConfiguration wherever the meaning is the same. Fields the kubelet
// does not have are marked "nodeagent" in docs/configuration.md.
//
// A field that is absent from every file takes its default; a field that is
// present is used as written, even when it is empty or zero (so
// `evictionHard: {}` disables hard eviction thresholds and `healthzPort: 0`
// disables the health server). `null` means absent.
type NodeAgentConfiguration struct {
	metav1.TypeMeta `json:",inline"`

	// NodeLeaseDurationSeconds is the duration the agent sets on its Lease; it
	// renews the Lease every NodeLeaseDurationSeconds × 0.25.
	NodeLeaseDurationSeconds int32 `json:"nodeLeaseDurationSeconds"`
	// NodeStatusUpdateFrequency is how often the node status is computed.
	NodeStatusUpdateFrequency metav1.Duration `json:"nodeStatusUpdateFrequency"`
	// NodeStatusReportFrequency is how often an unchanged node status is
	// reported anyway. When only NodeStatusUpdateFrequency is set it defaults
	// to that value (as in kubelet).
	NodeStatusReportFrequency metav1.Duration `json:"nodeStatusReportFrequency"`
	// NodeStatusMaxImages caps the images reported in the node status; -1
	// means no cap, 0 reports none.
	NodeStatusMaxImages int32 `json:"nodeStatusMaxImages"`

	// ContainerRuntimeEndpoint is the containerd socket, as a unix:// URL.
	ContainerRuntimeEndpoint string `json:"containerRuntimeEndpoint"`
	// ContainerRuntimeNamespace is the containerd namespace the agent's
	// containers live in (nodeagent).
	ContainerRuntimeNamespace string `json:"containerRuntimeNamespace"`

	// StaticPodPath is the directory of static pod manifests; "" disables
	// static pods.
	StaticPodPath string `json:"staticPodPath"`
	// MaxPods is the pod capacity of the node.
	MaxPods int32 `json:"maxPods"`
	// SyncFrequency is the longest a pod worker waits without news before
	// it syncs its pod again (kubelet's pod resync period).
	SyncFrequency metav1.Duration `json:"syncFrequency"`
	// FileCheckFrequency is the period of the full rescan of
	// StaticPodPath that backs up its inotify watch.
	FileCheckFrequency metav1.Duration `json:"fileCheckFrequency"`
	// RuntimeRequestTimeout bounds a container runtime request other than
	// a pull, logs, exec, attach and port-forward.
	RuntimeRequestTimeout metav1.Duration `json:"runtimeRequestTimeout"`
	// StreamingConnectionIdleTimeout closes an exec, attach or
	// port-forward stream idle this long; 0 never does.
	StreamingConnectionIdleTimeout metav1.Duration `json:"streamingConnectionIdleTimeout"`
	// VolumeStatsAggPeriod is how often volume usage is measured (and how
	// long a measure is reused); negative disables volume stats.
	VolumeStatsAggPeriod metav1.Duration `json:"volumeStatsAggPeriod"`

	// SystemReserved and KubeReserved are resources (cpu, memory,
	// ephemeral-storage, pid) subtracted from capacity to compute allocatable.
	SystemReserved map[string]string `json:"systemReserved"`
	KubeReserved   map[string]string `json:"kubeReserved"`
	// EvictionHard maps eviction signals to thresholds (a quantity or a
	// percentage). A present map replaces the default map, unless
	// MergeDefaultEvictionSettings.
	EvictionHard map[string]string `json:"evictionHard"`
	// MergeDefaultEvictionSettings is kubelet's (1.34): the main file's
	// evictionHard gets the default thresholds of the signals it does not
	// name (evictionSoft and evictionMinimumReclaim have no defaults).
	MergeDefaultEvictionSettings bool `json:"mergeDefaultEvictionSettings"`
	// EvictionPressureTransitionPeriod is how long a pressure condition stays
	// true after its signal went below the threshold.
	EvictionPressureTransitionPeriod metav1.Duration `json:"evictionPressureTransitionPeriod"`
	// EvictionSoft maps eviction signals to soft thresholds, acted on once
	// met for the signal's EvictionSoftGracePeriod (a duration);
	// EvictionMaxPodGracePeriod caps the grace period (seconds) of pods
	// evicted for them. EvictionMinimumReclaim maps signals to how far
	// above a threshold acted on the signal must come back.
	EvictionSoft              map[string]string `json:"evictionSoft"`
	EvictionSoftGracePeriod   map[string]string `json:"evictionSoftGracePeriod"`
	EvictionMaxPodGracePeriod int32             `json:"evictionMaxPodGracePeriod"`
	EvictionMinimumReclaim    map[string]string `json:"evictionMinimumReclaim"`

	// Image garbage collection, as kubelet's: above
	// ImageGCHighThresholdPercent of the image filesystem, unused images
	// are removed down to ImageGCLowThresholdPercent, none younger than
	// ImageMinimumGCAge; ImageMaximumGCAge (0: off) removes images unused
	// that long.
	ImageGCHighThresholdPercent int32           `json:"imageGCHighThresholdPercent"`
	ImageGCLowThresholdPercent  int32           `json:"imageGCLowThresholdPercent"`
	ImageMinimumGCAge           metav1.Duration `json:"imageMinimumGCAge"`
	ImageMaximumGCAge           metav1.Duration `json:"imageMaximumGCAge"`

	// HealthzBindAddress and HealthzPort is where /healthz, /livez, /readyz,
	// /metrics and /events are served; port 0 disables the server.
	HealthzBindAddress string `json:"healthzBindAddress"`
	HealthzPort        int32  `json:"healthzPort"`

	// Address and Port are where the node API (kubelet's HTTPS server:
	// container logs, /pods, /healthz) is served; port 0 disables it
	// (nodeagent; kubelet requires a port).
	Address string `json:"address"`
	Port    int32  `json:"port"`
	// EnableServer false serves no node API at all (kubelet's
	// enableServer); the port is still advertised, as kubelet's.
	EnableServer bool `json:"enableServer"`
	// ReadOnlyPort, when not 0, serves kubelet's read-only server on
	// Address: plain HTTP without authentication, /healthz, /pods,
	// /stats/summary and the metrics endpoints.
	ReadOnlyPort int32 `json:"readOnlyPort"`
	// RegisterNode false: the agent does not create its Node; it waits
	// for it to exist (kubelet's registerNode).
	RegisterNode bool `json:"registerNode"`
	// TLSCertFile and TLSPrivateKeyFile are the node API's serving
	// certificate and key; empty: a self-signed certificate kept in
	// rootDir/pki.
	TLSCertFile       string `json:"tlsCertFile"`
	TLSPrivateKeyFile string `json:"tlsPrivateKeyFile"`
	// ServerTLSBootstrap requests the serving certificate from the
	// certificates API (when tlsCertFile is not set).
	ServerTLSBootstrap bool `json:"serverTLSBootstrap"`
	// TLSCipherSuites and TLSMinVersion restrict the node API's TLS, as
	// kubelet's: Go's cipher suite names (TLS 1.2 and below) and
	// VersionTLS10 to VersionTLS13; empty: Go's suites and TLS 1.2.
	TLSCipherSuites []string `json:"tlsCipherSuites"`
	TLSMinVersion   string   `json:"tlsMinVersion"`
	// Authentication and Authorization of node API requests, as kubelet's.
	Authentication NodeAPIAuthentication `json:"authentication"`
	Authorization  NodeAPIAuthorization  `json:"authorization"`
	// EnableDebuggingHandlers serves the node API's debugging endpoints
	// (kubelet's field): exec, attach, port-forward, run, container logs,
	// /runningpods/, /configz, /checkpoint and the four below; false
	// answers them "Debug endpoints are disabled." as kubelet does.
	EnableDebuggingHandlers bool `json:"enableDebuggingHandlers"`
	// EnableContentionProfiling records goroutine blocking events
	// (runtime.SetBlockProfileRate(1)) for /debug/pprof/block.
	EnableContentionProfiling bool `json:"enableContentionProfiling"`
	// EnableProfilingHandler serves /debug/pprof/ (with the debugging
	// handlers).
	EnableProfilingHandler bool `json:"enableProfilingHandler"`
	// EnableDebugFlagsHandler serves /debug/flags/v (PUT sets the log
	// verbosity).
	EnableDebugFlagsHandler bool `json:"enableDebugFlagsHandler"`
	// EnableSystemLogHandler serves /var/log under /logs/ (with the
	// debugging handlers).
	EnableSystemLogHandler bool `json:"enableSystemLogHandler"`
	// EnableSystemLogQuery is kubelet's node log query (/logs/?query=
	// <service or file>, journalctl or a file under /var/log); it needs
	// the NodeLogQuery gate and EnableSystemLogHandler, as in kubelet.
	EnableSystemLogQuery bool `json:"enableSystemLogQuery"`

	// ContainerLogMaxSize is the largest size of a container log file
	// before it is rotated (a quantity, "10Mi"); ContainerLogMaxFiles is
	// the most files kept per container, the live one included.
	ContainerLogMaxSize  string `json:"containerLogMaxSize"`
	ContainerLogMaxFiles int32  `json:"containerLogMaxFiles"`
	// PodLogsDir holds the pods' container logs,
	// <namespace>_<pod>_<uid>/<container>/<attempt>.log (kubelet's field).
	PodLogsDir string `json:"podLogsDir"`
	// ContainerLogsDir holds a symlink to each running container's log,
	// <pod>_<namespace>_<container>-<id>.log (nodeagent; kubelet's is the
	// constant /var/log/containers).
	ContainerLogsDir string `json:"containerLogsDir"`

	// NodeLabels are added to the Node when it is registered.
	NodeLabels map[string]string `json:"nodeLabels"`
	// RegisterWithTaints are set on the Node when it is registered.
	RegisterWithTaints []v1.Taint `json:"registerWithTaints"`
	// ProviderID is set as spec.providerID of the Node.
	ProviderID string `json:"providerID"`

	// NodeIP is the address reported for the node (nodeagent; kubelet only
	// has --node-ip). "" means the address of the default route's interface.
	NodeIP string `json:"nodeIP"`
	// HostnameOverride replaces the hostname as the node name (nodeagent;
	// flag --hostname-override).
	HostnameOverride string `json:"hostnameOverride"`
	// Kubeconfig is the kubeconfig file with the node's credentials
	// (nodeagent; flag --kubeconfig).
	Kubeconfig string `json:"kubeconfig"`
	// RootDir is the agent's state directory (nodeagent).
	RootDir string `json:"rootDir"`
	// BootstrapKubeconfig is the kubeconfig used to obtain the node's
	// client certificate when Kubeconfig is missing or its certificate is
	// unusable (TLS bootstrap; kubelet's flag --bootstrap-kubeconfig).
	BootstrapKubeconfig string `json:"bootstrapKubeconfig"`
	// CertDir holds the client and serving certificates the agent obtains
	// (kubelet's flag --cert-dir); "" means rootDir/pki.
	CertDir string `json:"certDir"`
	// RotateCertificates renews the client certificate through the
	// certificates API before it expires, as kubelet.
	RotateCertificates bool `json:"rotateCertificates"`
	// KubeAPIQPS and KubeAPIBurst rate-limit the agent's main API client;
	// EventRecordQPS and EventBurst the separate client that writes
	// Events (kubelet's fields). Node status and Lease renewals are not
	// limited. A QPS of 0 means client-go's default, 5 per second (as in
	// kubelet, whatever its documentation says of eventRecordQPS).
	KubeAPIQPS     int32 `json:"kubeAPIQPS"`
	KubeAPIBurst   int32 `json:"kubeAPIBurst"`
	EventRecordQPS int32 `json:"eventRecordQPS"`
	EventBurst     int32 `json:"eventBurst"`
	// ContentType is the media type of the requests to the API server
	// (kubelet's contentType): protobuf or JSON.
	ContentType string `json:"contentType"`

	// ClusterDNS are the cluster DNS server addresses pods with the
	// ClusterFirst DNS policy use.
	ClusterDNS []string `json:"clusterDNS"`
	// ClusterDomain is the cluster's DNS domain; pods get
	// <namespace>.svc.<domain>, svc.<domain> and <domain> as search
	// domains. "" means none.
	ClusterDomain string `json:"clusterDomain"`
	// ResolvConf is the host resolver file the pods' resolv.conf is based
	// on; "" means none (pods with the Default policy resolve through the
	// node).
	ResolvConf string `json:"resolvConf"`
	// CNIConfDir holds the CNI network configurations (nodeagent; kubelet
	// had --cni-conf-dir); "" disables pod networking.
	CNIConfDir string `json:"cniConfDir"`
	// CNIBinDir is a comma-separated list of directories searched for CNI
	// plugins (nodeagent; kubelet had --cni-bin-dir).
	CNIBinDir string `json:"cniBinDir"`

	// SeccompDefault runs containers without a seccomp profile with the
	// runtime's default profile (RuntimeDefault) instead of Unconfined.
	SeccompDefault bool `json:"seccompDefault"`
	// AllowedUnsafeSysctls are sysctls (or patterns ending in "*") pods may
	// set beyond kubelet's safe set.
	AllowedUnsafeSysctls []string `json:"allowedUnsafeSysctls"`

	// FeatureGates are kubelet's feature gates: each must be kubelet
	// 1.34's default or one nodeagent honours (see featureGateProblems).
	FeatureGates map[string]bool `json:"featureGates"`
	// ImagePullCredentialsVerificationPolicy is which images already on
	// the node a pod must present accepted credentials for, with
	// KubeletEnsureSecretPulledImages (package pods/pullmanager); ""
	// means NeverVerifyPreloadedImages.
	ImagePullCredentialsVerificationPolicy string `json:"imagePullCredentialsVerificationPolicy"`
	// PreloadedImagesVerificationAllowlist are the images
	// NeverVerifyAllowlistedImages exempts.
	PreloadedImagesVerificationAllowlist []string `json:"preloadedImagesVerificationAllowlist"`
	// UserNamespaces configures pods' user namespaces (package userns).
	UserNamespaces UserNamespacesConfiguration `json:"userNamespaces"`

	// CgroupDriver is how pod cgroups are made: cgroupfs (directories) or
	// systemd (slices through systemd's D-Bus API).
	CgroupDriver string `json:"cgroupDriver"`
	// CgroupRoot is the cgroup the kubepods hierarchy is made under; ""
	// means the root ("/"), or a root of the agent's own when
	// containerRuntimeNamespace is not k8s.io (see docs/pods.md).
	CgroupRoot string `json:"cgroupRoot"`
	// CgroupsPerQOS makes the kubepods, QoS and pod cgroups; false puts
	// containers directly under cgroupRoot.
	CgroupsPerQOS bool `json:"cgroupsPerQOS"`
	// EnforceNodeAllocatable lists what node allocatable is enforced on:
	// "pods" (a memory limit on kubepods), or "none".
	EnforceNodeAllocatable []string `json:"enforceNodeAllocatable"`
	// PodPidsLimit is the most processes in a pod; -1 means no limit.
	PodPidsLimit int64 `json:"podPidsLimit"`
	// FailSwapOn stops the agent at start when the host has swap on
	// (kubelet's failSwapOn, default true).
	FailSwapOn bool `json:"failSwapOn"`
	// ProtectKernelDefaults makes kernel tunables that differ from
	// kubelet's an error at start; false sets them (kubelet's field).
	ProtectKernelDefaults bool `json:"protectKernelDefaults"`
	// MaxOpenFiles is the agent's own RLIMIT_NOFILE, soft and hard, set
	// at start (kubelet's maxOpenFiles); 0 keeps the inherited limit.
	MaxOpenFiles int64 `json:"maxOpenFiles"`
	// OOMScoreAdj is the agent's own oom_score_adj (kubelet's), -1000 to
	// 1000.
	OOMScoreAdj int32 `json:"oomScoreAdj"`
	// FailCgroupV1 stops the agent at start on a cgroup v1 host
	// (kubelet's failCgroupV1).
	FailCgroupV1 bool `json:"failCgroupV1"`
	// PodsPerCore caps the pods capacity at this many pods per CPU when
	// greater than 0 (kubelet's podsPerCore; PodCapacity).
	PodsPerCore int32 `json:"podsPerCore"`
	// MemorySwap is how containers may use the host's swap (kubelet's
	// memorySwap).
	MemorySwap MemorySwapConfiguration `json:"memorySwap"`
	// SingleProcessOOMKill is kubelet's singleProcessOOMKill: on cgroup v2,
	// false (the default there) sets memory.oom.group=1 in every
	// container's cgroup so that an OOM kill takes the whole container;
	// true kills single processes, as cgroup v1 does. nil means false on
	// cgroup v2 and true on v1; false is refused on v1 (see
	// EffectiveSingleProcessOOMKill).
	SingleProcessOOMKill *bool `json:"singleProcessOOMKill,omitempty"`
	// RuntimeHandlers maps RuntimeClass handler names to containerd
	// runtime types (nodeagent; containerd's CRI plugin has them as
	// runtimes in its own configuration).
	RuntimeHandlers map[string]string `json:"runtimeHandlers"`

	// RegistryConfigPath is containerd's registry config_path: directories
	// of <host>/hosts.toml files (mirrors, CA, skip_verify) the agent's
	// pulls follow (nodeagent; containerd CRI's registry.config_path).
	RegistryConfigPath string `json:"registryConfigPath"`
	// ImagePullProgressTimeout cancels a pull that received no byte for
	// this long (nodeagent; containerd CRI's image_pull_progress_timeout);
	// 0 means never.
	ImagePullProgressTimeout metav1.Duration `json:"imagePullProgressTimeout"`
	// SerializeImagePulls pulls one image at a time on the node
	// (kubelet's serializeImagePulls); nil means kubelet's default, true
	// unless MaxParallelImagePulls is 2 or more (ImagePullsSerialized).
	SerializeImagePulls *bool `json:"serializeImagePulls,omitempty"`
	// MaxParallelImagePulls bounds the pulls in progress when they are
	// not serialized (kubelet's); nil means no bound.
	MaxParallelImagePulls *int32 `json:"maxParallelImagePulls,omitempty"`
	// RegistryPullQPS and RegistryBurst are kubelet's token bucket on
	// image pulls: a pull that finds it empty fails at once (ErrImagePull).
	// A QPS of 0 means no limit.
	RegistryPullQPS int32 `json:"registryPullQPS"`
	RegistryBurst   int32 `json:"registryBurst"`
	// ImageCredentialProviderConfig is kubelet's
	// --image-credential-provider-config: a CredentialProviderConfig file
	// or directory; "" means no plugins (nodeagent field; flag of the same
	// name).
	ImageCredentialProviderConfig string `json:"imageCredentialProviderConfig"`
	// ImageCredentialProviderBinDir is kubelet's
	// --image-credential-provider-bin-dir: where the plugins are.
	ImageCredentialProviderBinDir string `json:"imageCredentialProviderBinDir"`

	// CPUCFSQuota is kubelet's: containers with a cpu limit get a CFS
	// quota (and so does their pod's cgroup); false: none, the limit is
	// only in the spec and status.
	CPUCFSQuota bool `json:"cpuCFSQuota"`
	// CPUCFSQuotaPeriod is kubelet's CFS period; only its default (100ms)
	// is accepted: another needs the CustomCPUCFSQuotaPeriod gate, which
	// nodeagent does not implement.
	CPUCFSQuotaPeriod metav1.Duration `json:"cpuCFSQuotaPeriod"`

	// CPUManagerPolicy is kubelet's CPU manager policy: none, or static
	// (exclusive CPUs for the integer CPU requests of Guaranteed pods).
	CPUManagerPolicy string `json:"cpuManagerPolicy"`
	// CPUManagerPolicyOptions are the policy's options; nodeagent
	// implements none (each is refused by name).
	CPUManagerPolicyOptions map[string]string `json:"cpuManagerPolicyOptions"`
	// TopologyManagerPolicy is kubelet's topology manager policy: none,
	// best-effort, restricted or single-numa-node (on machines with one
	// NUMA node only).
	TopologyManagerPolicy string `json:"topologyManagerPolicy"`
	// TopologyManagerScope is the policy's scope: container or pod.
	TopologyManagerScope string `json:"topologyManagerScope"`
	// TopologyManagerPolicyOptions are the policy's options
	// (prefer-closest-numa-nodes, max-allowable-numa-nodes).
	TopologyManagerPolicyOptions map[string]string `json:"topologyManagerPolicyOptions"`
	// CPUManagerReconcilePeriod is how often the static policy's cpusets
	// are pushed to running containers.
	CPUManagerReconcilePeriod metav1.Duration `json:"cpuManagerReconcilePeriod"`
	// ReservedSystemCPUs are CPUs (a cpuset, "0,2-3") reserved for the
	// system: they replace the cpu of systemReserved and kubeReserved and
	// are the static policy's reserved CPUs.
	ReservedSystemCPUs string `json:"reservedSystemCPUs"`

	// ShutdownGracePeriod is how long the node's shutdown is delayed (a
	// systemd-logind delay inhibitor) for its pods to stop; 0 disables
	// graceful node shutdown (kubelet's).
	ShutdownGracePeriod metav1.Duration `json:"shutdownGracePeriod"`
	// ShutdownGracePeriodCriticalPods is the part of ShutdownGracePeriod
	// kept for critical pods, which stop after the others (kubelet's).
	ShutdownGracePeriodCriticalPods metav1.Duration `json:"shutdownGracePeriodCriticalPods"`
	// ShutdownGracePeriodByPodPriority replaces the two fields above with
	// priority bands, each with its grace period; the shutdown is delayed
	// by their sum (kubelet's, GracefulNodeShutdownBasedOnPodPriority).
	ShutdownGracePeriodByPodPriority []ShutdownGracePeriodByPodPriority `json:"shutdownGracePeriodByPodPriority"`

	// Logging configures the agent's logs, like kubelet's logging section.
	Logging LoggingConfiguration `json:"logging"`
	// PLEG tunes the pod lifecycle event generator (nodeagent).
	PLEG PLEGConfiguration `json:"pleg"`
}

// ShutdownGracePeriodByPodPriority is kubelet's: pods whose priority is at
// least Priority (and below the next band's) are stopped together with at
// most ShutdownGracePeriodSeconds.
type ShutdownGracePeriodByPodPriority struct {
	Priority                   int32 `json:"priority"`
	ShutdownGracePeriodSeconds int64 `json:"shutdownGracePeriodSeconds"`
}

// NodeAPIAuthentication is kubelet's KubeletAuthentication.
type NodeAPIAuthentication struct {
	X509      NodeAPIX509Authentication      `json:"x509"`
	Webhook   NodeAPIWebhookAuthentication   `json:"webhook"`
	Anonymous NodeAPIAnonymousAuthentication `json:"anonymous"`
}

// NodeAPIX509Authentication authenticates client certificates.
type NodeAPIX509Authentication struct {
	// ClientCAFile is a PEM bundle of the CAs that sign client
	// certificates; the user is the certificate's CN, the groups its O.
	// Empty disables client-certificate authentication.
	ClientCAFile string `json:"clientCAFile"`
}

// NodeAPIWebhookAuthentication authenticates bearer tokens with
// TokenReview.
type NodeAPIWebhookAuthentication struct {
	Enabled  bool            `json:"enabled"`
	CacheTTL metav1.Duration `json:"cacheTTL"`
}

// NodeAPIAnonymousAuthentication lets requests without credentials in as
// system:anonymous (then subject to authorization).
type NodeAPIAnonymousAuthentication struct {
	Enabled bool `json:"enabled"`
}

// NodeAPIAuthorization is kubelet's KubeletAuthorization.
type NodeAPIAuthorization struct {
	// Mode is Webhook (SubjectAccessReview) or AlwaysAllow.
	Mode    string                      `json:"mode"`
	Webhook NodeAPIWebhookAuthorization `json:"webhook"`
}

// NodeAPIWebhookAuthorization caches SubjectAccessReview answers.
type NodeAPIWebhookAuthorization struct {
	CacheAuthorizedTTL   metav1.Duration `json:"cacheAuthorizedTTL"`
	CacheUnauthorizedTTL metav1.Duration `json:"cacheUnauthorizedTTL"`
}

// Authorization modes of the node API.
const (
	AuthorizationModeWebhook     = "Webhook"
	AuthorizationModeAlwaysAllow = "AlwaysAllow"
)

// LoggingConfiguration is the subset of kubelet's logging configuration that
// nodeagent supports.
type LoggingConfiguration struct {
	// Format is "text" or "json".
	Format string `json:"format"`
	// Verbosity is the log verbosity threshold (klog -v). It can change
	// without a restart.
	Verbosity int32 `json:"verbosity"`
}

// UserNamespacesConfiguration is kubelet's userNamespaces.
type UserNamespacesConfiguration struct {
	// IDsPerPod is the number of UIDs and GIDs of a pod with hostUsers:
	// false: a multiple of 65536.
	IDsPerPod int64 `json:"idsPerPod"`
}

// PLEGConfiguration tunes the pod lifecycle event generator.
type PLEGConfiguration struct {
	// RelistPeriod is the safety-net relist interval while every event
	// source is healthy.
	RelistPeriod metav1.Duration `json:"relistPeriod"`
	// FallbackRelistPeriod is the relist interval when no event source is
	// configured or one of them is unhealthy.
	FallbackRelistPeriod metav1.Duration `json:"fallbackRelistPeriod"`
	// HealthThreshold is how long the PLEG may make no progress before it
	// reports itself unhealthy (which makes the node NotReady).
	HealthThreshold metav1.Duration `json:"healthThreshold"`
	// EventSources are the upstream event sources: "cgroups" (inotify on
	// cgroup directories) and "containerd" (task events). Empty means
	// relist-only.
	EventSources []string `json:"eventSources"`
}

// Event sources of the PLEG.
const (
	EventSourceCgroups    = "cgroups"
	EventSourceContainerd = "containerd"
)

// Overrides are values set by command-line flags; they take precedence over
// every file. A nil pointer means the flag was not given.
type Overrides struct {
	Kubeconfig       *string // --kubeconfig
	HostnameOverride *string // --hostname-override
	NodeIP           *string // --node-ip
	Verbosity        *int32  // -v
	// ImageCredentialProviderConfig and ImageCredentialProviderBinDir
	// are kubelet's --image-credential-provider-config and
	// --image-credential-provider-bin-dir.
	ImageCredentialProviderConfig *string
	ImageCredentialProviderBinDir *string
	// BootstrapKubeconfig and CertDir are kubelet's --bootstrap-kubeconfig
	// and --cert-dir.
	BootstrapKubeconfig *string
	CertDir             *string
	// kubelet's --container-runtime-endpoint, --node-labels,
	// --register-with-taints, --provider-id and --root-dir (the kubelet
	// entry point's flags, as kubeadm's kubeadm-flags.env passes them).
	ContainerRuntimeEndpoint *string
	NodeLabels               map[string]string
	RegisterWithTaints       []v1.Taint
	ProviderID               *string
	RootDir                  *string
	// KubeletDefaults makes the fields no file or flag sets take kubelet's
	// defaults where nodeagent's own differ (KubeletDefaults()): the agent
	// started as kubelet.
	KubeletDefaults bool
}

// LoadOptions say where the configuration comes from.
type LoadOptions struct {
	// Path is the main configuration file (--config); "" means none, so the
	// defaults apply before drop-ins and flags.
	Path string
	// DropInDir is the drop-in directory (--config-dir); "" means none.
	// Its *.conf files are applied in lexical order on top of Path.
	DropInDir string
	// Overrides are the command-line flags.
	Overrides Overrides
}

// MemorySwapConfiguration is kubelet's memorySwap section.
type MemorySwapConfiguration struct {
	// SwapBehavior is NoSwap ("" too) or LimitedSwap.
	SwapBehavior string `json:"swapBehavior"`
}

// Kubelet's memorySwap.swapBehavior values.
const (
	SwapBehaviorNoSwap      = "NoSwap"
	SwapBehaviorLimitedSwap = "LimitedSwap"
)
