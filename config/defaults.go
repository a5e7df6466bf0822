package config

import (
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodeagent/nodeagent/internal/evictionapi"
)

// Default values; the kubelet's where the field has the same meaning.
const (
	DefaultNodeLeaseDurationSeconds  = 40
	DefaultNodeStatusUpdateFrequency = 10 * time.Second
	DefaultNodeStatusReportFrequency = 5 * time.Minute
	DefaultNodeStatusMaxImages       = 50
	DefaultContainerRuntimeEndpoint  = "unix:///run/containerd/containerd.sock"
	DefaultContainerRuntimeNamespace = "k8s.io"
	DefaultMaxPods                   = 110
	// kubelet's maxOpenFiles and oomScoreAdj (KubeletOOMScoreAdj: below
	// every pod's, so that the kernel's OOM killer takes pods first).
	DefaultMaxOpenFiles                     = 1000000
	DefaultOOMScoreAdj                      = -999
	DefaultSyncFrequency                    = time.Minute
	DefaultFileCheckFrequency               = 20 * time.Second
	DefaultRuntimeRequestTimeout            = 2 * time.Minute
	DefaultStreamingConnectionIdleTimeout   = 4 * time.Hour
	DefaultVolumeStatsAggPeriod             = time.Minute
	DefaultEvictionPressureTransitionPeriod = 5 * time.Minute
	DefaultHealthzBindAddress               = "127.0.0.1"
	DefaultHealthzPort                      = 10266
	DefaultKubeconfig                       = "/etc/nodeagent/kubeconfig"
	DefaultRootDir                          = "/var/lib/nodeagent"
	DefaultLoggingFormat                    = "text"
	DefaultPLEGRelistPeriod                 = 5 * time.Minute
	DefaultPLEGFallbackRelistPeriod         = time.Second
	DefaultPLEGHealthThreshold              = 3 * time.Minute
	DefaultResolvConf                       = "/etc/resolv.conf"
	DefaultCNIConfDir                       = "/etc/cni/net.d"
	// DefaultCNIBinDir: the upstream location, then Debian's
	// containernetworking-plugins.
	DefaultCNIBinDir = "/opt/cni/bin,/usr/lib/cni"
	// DefaultRegistryConfigPath is where containerd's packages and
	// documentation put hosts.toml files (its config_path).
	DefaultRegistryConfigPath = "/etc/containerd/certs.d"
	// DefaultImagePullProgressTimeout is containerd CRI's
	// image_pull_progress_timeout.
	DefaultImagePullProgressTimeout = 5 * time.Minute

	// DefaultConfigPath and DefaultStaticPodPath are what the packages
	// install; they are not defaults of the fields (staticPodPath defaults
	// to "", disabled).
	DefaultConfigPath    = "/etc/nodeagent/config.yaml"
	DefaultStaticPodPath = "/etc/nodeagent/manifests"

	// ControlPlaneGracePeriod is kube-controller-manager's default
	// --node-monitor-grace-period: a node whose Lease is older than this is
	// marked NotReady (Ready=Unknown).
	ControlPlaneGracePeriod = 40 * time.Second
)

// Defaults of the node API and container log fields (kubelet's).
const (
	DefaultAddress                           = "0.0.0.0"
	DefaultPort                              = 10250
	DefaultAuthenticationWebhookCacheTTL     = 2 * time.Minute
	DefaultAuthorizationCacheAuthorizedTTL   = 5 * time.Minute
	DefaultAuthorizationCacheUnauthorizedTTL = 30 * time.Second
	DefaultContainerLogMaxSize               = "10Mi"
	DefaultContainerLogMaxFiles              = 5
	// DefaultPodLogsDir is kubelet's podLogsDir default.
	DefaultPodLogsDir = "/var/log/pods"
	// DefaultContainerLogsDir is where kubelet keeps its container log
	// symlinks (a constant in kubelet).
	DefaultContainerLogsDir = "/var/log/containers"
)

// Defaults of the API clients' fields (kubelet's).
const (
	DefaultKubeAPIQPS     = 50
	DefaultKubeAPIBurst   = 100
	DefaultEventRecordQPS = 50
	DefaultEventBurst     = 100
	// ContentTypeProtobuf and ContentTypeJSON are the media types the
	// agent's clients can send; protobuf is kubelet's default.
	ContentTypeProtobuf = "application/vnd.kubernetes.protobuf"
	ContentTypeJSON     = "application/json"
	DefaultContentType  = ContentTypeProtobuf
)

// Defaults of the image pull limits (kubelet's): pulls are serialized
// unless maxParallelImagePulls is 2 or more (ImagePullsSerialized).
const (
	DefaultRegistryPullQPS = 5
	DefaultRegistryBurst   = 10
)

// Cgroup defaults and values (kubelet's).
const (
	CgroupDriverCgroupfs       = "cgroupfs"
	CgroupDriverSystemd        = "systemd"
	DefaultCgroupDriver        = CgroupDriverCgroupfs
	EnforceNodeAllocatablePods = "pods"
	EnforceNodeAllocatableNone = "none"
)

// Default returns a complete, valid configuration with every default set.
func Default() *NodeAgentConfiguration {
	c := &NodeAgentConfiguration{
		TypeMeta:                             metav1.TypeMeta{APIVersion: APIVersion, Kind: Kind},
		NodeLeaseDurationSeconds:             DefaultNodeLeaseDurationSeconds,
		NodeStatusUpdateFrequency:            metav1.Duration{Duration: DefaultNodeStatusUpdateFrequency},
		NodeStatusReportFrequency:            metav1.Duration{Duration: DefaultNodeStatusReportFrequency},
		NodeStatusMaxImages:                  DefaultNodeStatusMaxImages,
		ContainerRuntimeEndpoint:             DefaultContainerRuntimeEndpoint,
		ContainerRuntimeNamespace:            DefaultContainerRuntimeNamespace,
		StaticPodPath:                        "",
		MaxPods:                              DefaultMaxPods,
		SyncFrequency:                        metav1.Duration{Duration: DefaultSyncFrequency},
		FileCheckFrequency:                   metav1.Duration{Duration: DefaultFileCheckFrequency},
		RuntimeRequestTimeout:                metav1.Duration{Duration: DefaultRuntimeRequestTimeout},
		StreamingConnectionIdleTimeout:       metav1.Duration{Duration: DefaultStreamingConnectionIdleTimeout},
		VolumeStatsAggPeriod:                 metav1.Duration{Duration: DefaultVolumeStatsAggPeriod},
		SystemReserved:                       map[string]string{},
		KubeReserved:                         map[string]string{},
		CPUManagerPolicy:                     CPUManagerPolicyNone,
		CPUCFSQuota:                          true,
		CPUCFSQuotaPeriod:                    metav1.Duration{Duration: DefaultCPUCFSQuotaPeriod},
		CPUManagerPolicyOptions:              map[string]string{},
		TopologyManagerPolicy:                TopologyManagerPolicyNone,
		TopologyManagerScope:                 TopologyManagerScopeContainer,
		TopologyManagerPolicyOptions:         map[string]string{},
		CPUManagerReconcilePeriod:            metav1.Duration{Duration: DefaultCPUManagerReconcilePeriod},
		EvictionHard:                         evictionapi.DefaultHard(),
		EvictionPressureTransitionPeriod:     metav1.Duration{Duration: DefaultEvictionPressureTransitionPeriod},
		EvictionSoft:                         map[string]string{},
		EvictionSoftGracePeriod:              map[string]string{},
		EvictionMinimumReclaim:               map[string]string{},
		ImageGCHighThresholdPercent:          DefaultImageGCHighThresholdPercent,
		ImageGCLowThresholdPercent:           DefaultImageGCLowThresholdPercent,
		ImageMinimumGCAge:                    metav1.Duration{Duration: DefaultImageMinimumGCAge},
		HealthzBindAddress:                   DefaultHealthzBindAddress,
		HealthzPort:                          DefaultHealthzPort,
		EnableDebuggingHandlers:              true,
		EnableProfilingHandler:               true,
		EnableDebugFlagsHandler:              true,
		EnableSystemLogHandler:               true,
		NodeLabels:                           map[string]string{},
		RegisterWithTaints:                   []v1.Taint{},
		ProviderID:                           "",
		NodeIP:                               "",
		HostnameOverride:                     "",
		Kubeconfig:                           DefaultKubeconfig,
		RootDir:                              DefaultRootDir,
		KubeAPIQPS:                           DefaultKubeAPIQPS,
		KubeAPIBurst:                         DefaultKubeAPIBurst,
		EventRecordQPS:                       DefaultEventRecordQPS,
		EventBurst:                           DefaultEventBurst,
		ContentType:                          DefaultContentType,
		ClusterDNS:                           []string{},
		TLSCipherSuites:                      []string{},
		ClusterDomain:                        "",
		ResolvConf:                           DefaultResolvConf,
		CNIConfDir:                           DefaultCNIConfDir,
		CNIBinDir:                            DefaultCNIBinDir,
		SeccompDefault:                       false,
		AllowedUnsafeSysctls:                 []string{},
		ShutdownGracePeriodByPodPriority:     []ShutdownGracePeriodByPodPriority{},
		FeatureGates:                         map[string]bool{},
		UserNamespaces:                       UserNamespacesConfiguration{IDsPerPod: 65536},
		PreloadedImagesVerificationAllowlist: []string{},
		CgroupDriver:                         DefaultCgroupDriver,
		CgroupRoot:                           "",
		CgroupsPerQOS:                        true,
		EnforceNodeAllocatable:               []string{EnforceNodeAllocatablePods},
		PodPidsLimit:                         -1,
		FailSwapOn:                           true,
		MaxOpenFiles:                         DefaultMaxOpenFiles,
		OOMScoreAdj:                          DefaultOOMScoreAdj,
		RuntimeHandlers:                      map[string]string{"runc": "io.containerd.runc.v2"},
		RegistryConfigPath:                   DefaultRegistryConfigPath,
		ImagePullProgressTimeout:             metav1.Duration{Duration: DefaultImagePullProgressTimeout},
		RegistryPullQPS:                      DefaultRegistryPullQPS,
		RegistryBurst:                        DefaultRegistryBurst,
		Logging: LoggingConfiguration{
			Format:    DefaultLoggingFormat,
			Verbosity: 0,
		},
		PLEG: PLEGConfiguration{
			RelistPeriod:         metav1.Duration{Duration: DefaultPLEGRelistPeriod},
			FallbackRelistPeriod: metav1.Duration{Duration: DefaultPLEGFallbackRelistPeriod},
			HealthThreshold:      metav1.Duration{Duration: DefaultPLEGHealthThreshold},
			EventSources:         []string{EventSourceCgroups, EventSourceContainerd},
		},
	}
	setNodeAPIDefaults(c)
	return c
}

// setNodeAPIDefaults sets the node API's and the container logs' defaults.
func setNodeAPIDefaults(c *NodeAgentConfiguration) {
	c.Address, c.Port = DefaultAddress, DefaultPort
	c.EnableServer = true // kubelet's default; readOnlyPort's is 0
	c.RegisterNode = true // kubelet's
	c.Authentication = NodeAPIAuthentication{
		Webhook: NodeAPIWebhookAuthentication{Enabled: true, CacheTTL: metav1.Duration{Duration: DefaultAuthenticationWebhookCacheTTL}},
	}
	c.Authorization = NodeAPIAuthorization{
		Mode: AuthorizationModeWebhook,
		Webhook: NodeAPIWebhookAuthorization{
			CacheAuthorizedTTL:   metav1.Duration{Duration: DefaultAuthorizationCacheAuthorizedTTL},
			CacheUnauthorizedTTL: metav1.Duration{Duration: DefaultAuthorizationCacheUnauthorizedTTL},
		},
	}
	c.ContainerLogMaxSize, c.ContainerLogMaxFiles = DefaultContainerLogMaxSize, DefaultContainerLogMaxFiles
	c.PodLogsDir, c.ContainerLogsDir = DefaultPodLogsDir, DefaultContainerLogsDir
}

// CertDirectory is certDir, or rootDir/pki when it is empty.
func (c *NodeAgentConfiguration) CertDirectory() string {
	if c.CertDir != "" {
		return c.CertDir
	}
	return filepath.Join(c.RootDir, "pki")
}

// CNIBinDirs splits CNIBinDir into its directories.
func (c *NodeAgentConfiguration) CNIBinDirs() []string {
	var out []string
	for _, d := range strings.Split(c.CNIBinDir, ",") {
		if d = strings.TrimSpace(d); d != "" {
			out = append(out, d)
		}
	}
	return out
}

// RenewInterval is how often the Lease is renewed: a quarter of its
// duration, as in kubelet.
func (c *NodeAgentConfiguration) RenewInterval() time.Duration {
	return time.Duration(c.NodeLeaseDurationSeconds) * time.Second / 4
}

// DeepCopy returns a copy that shares no memory with c.
func (c *NodeAgentConfiguration) DeepCopy() *NodeAgentConfiguration {
	if c == nil {
		return nil
	}
	out := *c
	out.SystemReserved = copyMap(c.SystemReserved)
	out.KubeReserved = copyMap(c.KubeReserved)
	out.CPUManagerPolicyOptions = copyMap(c.CPUManagerPolicyOptions)
	out.TopologyManagerPolicyOptions = copyMap(c.TopologyManagerPolicyOptions)
	out.EvictionHard = copyMap(c.EvictionHard)
	out.EvictionSoft = copyMap(c.EvictionSoft)
	out.EvictionSoftGracePeriod = copyMap(c.EvictionSoftGracePeriod)
	out.EvictionMinimumReclaim = copyMap(c.EvictionMinimumReclaim)
	out.NodeLabels = copyMap(c.NodeLabels)
	if c.FeatureGates != nil {
		out.FeatureGates = maps.Clone(c.FeatureGates)
	}
	if c.ClusterDNS != nil {
		out.ClusterDNS = append([]string{}, c.ClusterDNS...)
	}
	if c.TLSCipherSuites != nil {
		out.TLSCipherSuites = append([]string{}, c.TLSCipherSuites...)
	}
	if c.RegisterWithTaints != nil {
		out.RegisterWithTaints = make([]v1.Taint, len(c.RegisterWithTaints))
		for i := range c.RegisterWithTaints {
			c.RegisterWithTaints[i].DeepCopyInto(&out.RegisterWithTaints[i])
		}
	}
	if c.ShutdownGracePeriodByPodPriority != nil {
		out.ShutdownGracePeriodByPodPriority = slices.Clone(c.ShutdownGracePeriodByPodPriority)
	}
	if c.EnforceNodeAllocatable != nil {
		out.EnforceNodeAllocatable = append([]string{}, c.EnforceNodeAllocatable...)
	}
	if c.PLEG.EventSources != nil {
		out.PLEG.EventSources = append([]string{}, c.PLEG.EventSources...)
	}
	return &out
}

func copyMap(m map[string]string) map[string]string {
	if m == nil {
		return nil
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}
