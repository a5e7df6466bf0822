package config

import (
	"maps"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodeagent/nodeagent/internal/evictionapi"
)

func dur(d time.Duration) metav1.Duration { return metav1.Duration{Duration: d} }

func TestDefaultIsValid(t *testing.T) {
	errs, warnings := Validate(Default())
	if len(errs) > 0 || len(warnings) > 0 {
		t.Errorf("Default() has errors %v, warnings %q", errs, warnings)
	}
}

// TestDefaultEvictionHard: the default is kubelet 1.34's, imagefs.inodesFree
// included, and the one nodestatus applies when given none.
func TestDefaultEvictionHard(t *testing.T) {
	got := Default().EvictionHard
	if !maps.Equal(got, evictionapi.DefaultHard()) {
		t.Errorf("Default().EvictionHard = %v, want eviction.DefaultHard() %v", got, evictionapi.DefaultHard())
	}
	if got["imagefs.inodesFree"] != "5%" {
		t.Errorf("imagefs.inodesFree = %q, want kubelet's 5%%", got["imagefs.inodesFree"])
	}
}

func TestValidate(t *testing.T) {
	for _, tc := range []struct {
		desc     string
		mutate   func(c *NodeAgentConfiguration)
		want     []string // full error lines, in order
		warnings []string // substrings, one per warning
	}{
		{desc: "defaults", mutate: func(c *NodeAgentConfiguration) {}},
		{
			desc: "images",
			mutate: func(c *NodeAgentConfiguration) {
				c.RegistryConfigPath = "/etc/containerd/certs.d:certs.d"
				c.ImagePullProgressTimeout = dur(-time.Second)
				c.ImageCredentialProviderConfig = "/etc/kubernetes/credential-providers.yaml"
			},
			want: []string{
				`registryConfigPath: Invalid value: "/etc/containerd/certs.d:certs.d": must be absolute directories separated by ':', or empty`,
				`imagePullProgressTimeout: Invalid value: "-1s": must not be negative (0 disables it)`,
				`imageCredentialProviderBinDir: Required value: the plugins' directory is required with imageCredentialProviderConfig`,
			},
		},
		{
			desc: "runtimeHandlers",
			mutate: func(c *NodeAgentConfiguration) {
				c.RuntimeHandlers = map[string]string{"Bad_Name": "io.containerd.runc.v2", "empty": ""}
			},
			want: []string{
				`runtimeHandlers[Bad_Name]: Invalid value: "Bad_Name": a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')`,
				`runtimeHandlers[empty]: Required value: a containerd runtime type, such as io.containerd.runc.v2`,
			},
		},
		{
			desc: "allowedUnsafeSysctls",
			mutate: func(c *NodeAgentConfiguration) {
				c.AllowedUnsafeSysctls = []string{"net.core.*", "kernel.msgmax", "vm.swappiness", "Net.x"}
			},
			want: []string{
				`allowedUnsafeSysctls[2]: Invalid value: "vm.swappiness": the sysctls "vm.swappiness" are not known to be namespaced`,
				`allowedUnsafeSysctls[3]: Invalid value: "Net.x": sysctl "Net.x" must have at most 253 characters and be dot- or slash-separated lower-case segments, optionally ending in "*"`,
			},
		},
		{
			desc: "pod networking and DNS",
			mutate: func(c *NodeAgentConfiguration) {
				c.ClusterDNS = []string{"10.96.0.10", "dns.local"}
				c.ClusterDomain = "Cluster_Local"
				c.ResolvConf = "resolv.conf"
				c.CNIConfDir = "net.d"
				c.CNIBinDir = "/opt/cni/bin,bin"
			},
			want: []string{
				`clusterDNS[1]: Invalid value: "dns.local": must be an IP address`,
				`clusterDomain: Invalid value: "Cluster_Local": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')`,
				`resolvConf: Invalid value: "resolv.conf": must be an absolute path or empty (no host resolver file)`,
				`cniConfDir: Invalid value: "net.d": must be an absolute path or empty (pod networking disabled)`,
				`cniBinDir: Invalid value: "/opt/cni/bin,bin": "bin" must be an absolute path`,
			},
		},
		{
			desc: "empty networking fields are valid choices",
			mutate: func(c *NodeAgentConfiguration) {
				c.ClusterDomain, c.ResolvConf, c.CNIConfDir, c.CNIBinDir = "cluster.local.", "", "", ""
			},
		},
		{
			desc:   "cniBinDir required with a cniConfDir",
			mutate: func(c *NodeAgentConfiguration) { c.CNIBinDir = " , " },
			want:   []string{`cniBinDir: Required value: a comma-separated list of directories holding CNI plugins, such as /opt/cni/bin,/usr/lib/cni`},
		},
		{
			desc:   "negative lease duration",
			mutate: func(c *NodeAgentConfiguration) { c.NodeLeaseDurationSeconds = -1 },
			want:   []string{"nodeLeaseDurationSeconds: Invalid value: -1: must be greater than 0"},
		},
		{
			desc:     "lease renew interval beyond the grace period",
			mutate:   func(c *NodeAgentConfiguration) { c.NodeLeaseDurationSeconds = 200 },
			warnings: []string{"nodeLeaseDurationSeconds: 200 means the Lease is renewed every 50s, longer than the control plane's default node-monitor-grace-period of 40s: unless kube-controller-manager's --node-monitor-grace-period is raised above 50s, the node will be marked NotReady between renewals"},
		},
		{
			desc:   "lease renew interval exactly the grace period is fine",
			mutate: func(c *NodeAgentConfiguration) { c.NodeLeaseDurationSeconds = 160 },
		},
		{
			desc: "frequencies",
			mutate: func(c *NodeAgentConfiguration) {
				c.NodeStatusUpdateFrequency = dur(time.Minute)
				c.NodeStatusReportFrequency = dur(30 * time.Second)
			},
			want: []string{"nodeStatusReportFrequency: Invalid value: \"30s\": must not be less than nodeStatusUpdateFrequency (1m0s)"},
		},
		{
			desc: "zero and negative durations",
			mutate: func(c *NodeAgentConfiguration) {
				c.NodeStatusUpdateFrequency = dur(0)
				c.NodeStatusReportFrequency = dur(-time.Second)
				c.EvictionPressureTransitionPeriod = dur(-time.Second)
			},
			want: []string{
				`nodeStatusUpdateFrequency: Invalid value: "0s": must be greater than 0`,
				`nodeStatusReportFrequency: Invalid value: "-1s": must be greater than 0`,
				`evictionPressureTransitionPeriod: Invalid value: "-1s": must be greater than or equal to 0`,
			},
		},
		{
			desc:   "max images",
			mutate: func(c *NodeAgentConfiguration) { c.NodeStatusMaxImages = -2 },
			want:   []string{"nodeStatusMaxImages: Invalid value: -2: must be greater than or equal to -1"},
		},
		{
			desc: "runtime",
			mutate: func(c *NodeAgentConfiguration) {
				c.ContainerRuntimeEndpoint = "tcp://localhost:1"
				c.ContainerRuntimeNamespace = "k8s io"
			},
			want: []string{
				`containerRuntimeEndpoint: Invalid value: "tcp://localhost:1": must be a unix:// URL with an absolute socket path, such as unix:///run/containerd/containerd.sock`,
				`containerRuntimeNamespace: Invalid value: "k8s io": must be a containerd namespace: letters and digits separated by '.', '_' or '-', at most 76 characters`,
			},
		},
		{
			desc:     "runtime endpoint without a scheme, as kubelet still accepts",
			mutate:   func(c *NodeAgentConfiguration) { c.ContainerRuntimeEndpoint = "/run/containerd/containerd.sock" },
			warnings: []string{`containerRuntimeEndpoint: "/run/containerd/containerd.sock" has no scheme; use "unix:///run/containerd/containerd.sock"`},
		},
		{
			desc:   "relative runtime endpoint",
			mutate: func(c *NodeAgentConfiguration) { c.ContainerRuntimeEndpoint = "unix://run/containerd.sock" },
			want:   []string{`containerRuntimeEndpoint: Invalid value: "unix://run/containerd.sock": must be a unix:// URL with an absolute socket path, such as unix:///run/containerd/containerd.sock`},
		},
		{
			desc: "required strings",
			mutate: func(c *NodeAgentConfiguration) {
				c.ContainerRuntimeEndpoint = ""
				c.ContainerRuntimeNamespace = ""
				c.Kubeconfig = ""
				c.RootDir = "var/lib"
			},
			want: []string{
				`containerRuntimeEndpoint: Required value: the containerd socket as a unix:// URL, such as unix:///run/containerd/containerd.sock`,
				`containerRuntimeNamespace: Required value: the containerd namespace, normally "k8s.io"`,
				`kubeconfig: Required value: an absolute path`,
				`rootDir: Invalid value: "var/lib": must be an absolute path`,
			},
		},
		{
			desc: "pods and resources",
			mutate: func(c *NodeAgentConfiguration) {
				c.StaticPodPath = "manifests"
				c.MaxPods = 0
				c.SystemReserved = map[string]string{"cpu": "lots", "gpu": "1"}
				c.KubeReserved = map[string]string{"memory": "-1Gi"}
			},
			want: []string{
				`staticPodPath: Invalid value: "manifests": must be an absolute path or empty (disabled)`,
				`maxPods: Invalid value: 0: must be greater than 0`,
				`systemReserved[cpu]: Invalid value: "lots": must be a quantity such as "500m", "1Gi" or "100"`,
				`systemReserved[gpu]: Unsupported value: "gpu": supported values: "cpu", "memory", "ephemeral-storage", "pid"`,
				`kubeReserved[memory]: Invalid value: "-1Gi": must not be negative`,
			},
		},
		{
			desc: "kubelet's periods and timeouts",
			mutate: func(c *NodeAgentConfiguration) {
				c.SyncFrequency.Duration = 0
				c.FileCheckFrequency.Duration = -time.Second
				c.RuntimeRequestTimeout.Duration = 0
				c.StreamingConnectionIdleTimeout.Duration = -time.Second
				c.VolumeStatsAggPeriod.Duration = -time.Second // disables volume stats, as in kubelet
			},
			want: []string{
				`syncFrequency: Invalid value: "0s": must be greater than 0`,
				`fileCheckFrequency: Invalid value: "-1s": must be greater than 0`,
				`runtimeRequestTimeout: Invalid value: "0s": must be greater than 0`,
				`streamingConnectionIdleTimeout: Invalid value: "-1s": must be greater than or equal to 0 (no idle timeout)`,
			},
		},
		{
			desc: "cgroups",
			mutate: func(c *NodeAgentConfiguration) {
				c.CgroupDriver = "cgroupv2"
				c.CgroupRoot = "kube/"
				c.EnforceNodeAllocatable = []string{"pods", "system-reserved", "none"}
				c.PodPidsLimit = -2
			},
			want: []string{
				`cgroupDriver: Unsupported value: "cgroupv2": supported values: "cgroupfs", "systemd"`,
				`cgroupRoot: Invalid value: "kube/": must be a clean absolute cgroup path such as /kube (or a slice path such as /kube.slice with the systemd driver)`,
				`enforceNodeAllocatable[1]: Unsupported value: "system-reserved": supported values: "pods", "none"`,
				`enforceNodeAllocatable[2]: Invalid value: "none": none cannot be combined with other values`,
				`podPidsLimit: Invalid value: -2: must be -1 (no limit) or greater`,
			},
		},
		{
			desc: "cgroups: systemd root must be slices; pods allocatable needs cgroupsPerQOS",
			mutate: func(c *NodeAgentConfiguration) {
				c.CgroupDriver = "systemd"
				c.CgroupRoot = "/kube.slice/pods"
				c.CgroupsPerQOS = false
			},
			want: []string{
				`cgroupRoot: Invalid value: "/kube.slice/pods": with cgroupDriver systemd every component must be a slice (name.slice), such as /kube.slice`,
				`enforceNodeAllocatable[0]: Invalid value: "pods": enforcing node allocatable on pods requires cgroupsPerQOS`,
			},
		},
		{
			desc: "eviction",
			mutate: func(c *NodeAgentConfiguration) {
				c.EvictionHard = map[string]string{
					"memory.available":  "ten",
					"nodefs.available":  "110%",
					"imagefs.available": "x%",
					"disk.available":    "1Gi",
					"pid.available":     "5.5%",
					"nodefs.inodesFree": "0",
				}
			},
			want: []string{
				`evictionHard[disk.available]: Unsupported value: "disk.available": supported values: "memory.available", "allocatableMemory.available", "nodefs.available", "nodefs.inodesFree", "imagefs.available", "imagefs.inodesFree", "containerfs.available", "containerfs.inodesFree", "pid.available"`,
				`evictionHard[imagefs.available]: Invalid value: "x%": must be a percentage such as "10%" or a quantity such as "100Mi"`,
				`evictionHard[memory.available]: Invalid value: "ten": must be a percentage such as "10%" or a quantity such as "100Mi"`,
				`evictionHard[nodefs.available]: Invalid value: "110%": must be a percentage between 0% and 100%`,
				`evictionHard[nodefs.inodesFree]: Invalid value: "0": eviction threshold nodefs.inodesFree must be positive`,
			},
		},
		{
			desc: "soft eviction, as kubelet's ParseThresholdConfig",
			mutate: func(c *NodeAgentConfiguration) {
				c.EvictionSoft = map[string]string{"memory.available": "1Gi", "nodefs.available": "15%", "imagefs.available": "0%", "pid.available": "lots", "nodefs.inodesFree": "0"}
				c.EvictionSoftGracePeriod = map[string]string{"nodefs.available": "-1s", "pid.available": "1m", "disk.available": "1m", "imagefs.inodesFree": "soon"}
				c.EvictionMinimumReclaim = map[string]string{"memory.available": "-1Mi", "nodefs.available": "0%", "imagefs.available": "2Gi", "nodefs.inodesFree": "5%x"}
				c.EvictionMaxPodGracePeriod = -1
			},
			want: []string{
				`evictionSoft[nodefs.inodesFree]: Invalid value: "0": eviction threshold nodefs.inodesFree must be positive`,
				`evictionSoft[pid.available]: Invalid value: "lots": must be a percentage such as "10%" or a quantity such as "100Mi"`,
				`evictionSoftGracePeriod[memory.available]: Required value: grace period must be specified for the soft eviction threshold memory.available`,
				`evictionSoftGracePeriod[disk.available]: Unsupported value: "disk.available": supported values: "memory.available", "allocatableMemory.available", "nodefs.available", "nodefs.inodesFree", "imagefs.available", "imagefs.inodesFree", "containerfs.available", "containerfs.inodesFree", "pid.available"`,
				`evictionSoftGracePeriod[imagefs.inodesFree]: Invalid value: "soon": must be a duration such as "1m30s"`,
				`evictionSoftGracePeriod[nodefs.available]: Invalid value: "-1s": invalid eviction grace period specified: -1s, must be a positive value`,
				`evictionMinimumReclaim[memory.available]: Invalid value: "-1Mi": negative eviction minimum reclaim specified for memory.available`,
				`evictionMinimumReclaim[nodefs.available]: Invalid value: "0%": eviction percentage minimum reclaim nodefs.available must be positive: 0%`,
				`evictionMinimumReclaim[nodefs.inodesFree]: Invalid value: "5%x": must be a percentage such as "5%" or a quantity such as "500Mi"`,
			},
			warnings: []string{
				"evictionSoftGracePeriod[imagefs.inodesFree]: no soft threshold for imagefs.inodesFree in evictionSoft",
				"evictionMaxPodGracePeriod: -1 gives pods evicted for a soft threshold a 1s grace period",
			},
		},
		{
			desc: "endpoints",
			mutate: func(c *NodeAgentConfiguration) {
				c.HealthzPort = 70000
				c.HealthzBindAddress = "localhost"
			},
			want: []string{
				`healthzPort: Invalid value: 70000: must be between 0 (disabled) and 65535`,
				`healthzBindAddress: Invalid value: "localhost": must be an IP address`,
			},
		},
		{
			desc:   "healthz disabled needs no address",
			mutate: func(c *NodeAgentConfiguration) { c.HealthzPort, c.HealthzBindAddress = 0, "" },
		},
		{
			desc:   "healthz enabled needs an address",
			mutate: func(c *NodeAgentConfiguration) { c.HealthzBindAddress = "" },
			want:   []string{`healthzBindAddress: Required value: an IP address to serve the health endpoints on (or set healthzPort to 0)`},
		},
		{
			desc:     "healthz on kubelet's port",
			mutate:   func(c *NodeAgentConfiguration) { c.HealthzPort, c.Port = 10250, 0 },
			warnings: []string{"healthzPort: 10250 is the kubelet API port"},
		},
		{
			desc:   "node API on the health port",
			mutate: func(c *NodeAgentConfiguration) { c.Port = c.HealthzPort },
			want:   []string{`port: Invalid value: 10266: must differ from healthzPort`},
		},
		{
			desc: "node API fields",
			mutate: func(c *NodeAgentConfiguration) {
				c.Port, c.Address = 70000, "localhost"
				c.TLSCertFile = "rel.crt"
				c.Authentication.X509.ClientCAFile = "ca.crt"
				c.Authentication.Webhook.CacheTTL.Duration = -time.Second
				c.Authorization.Mode = "RBAC"
				c.ContainerLogMaxSize = "ten"
				c.ContainerLogMaxFiles = 1
			},
			want: []string{
				`port: Invalid value: 70000: must be between 0 (disabled) and 65535`,
				`address: Invalid value: "localhost": must be an IP address`,
				`tlsPrivateKeyFile: Invalid value: "": tlsCertFile and tlsPrivateKeyFile must be set together`,
				`tlsCertFile: Invalid value: "rel.crt": must be an absolute path`,
				`authentication.x509.clientCAFile: Invalid value: "ca.crt": must be an absolute path`,
				`authentication.webhook.cacheTTL: Invalid value: "-1s": must be greater than or equal to 0 (no cache)`,
				`authorization.mode: Unsupported value: "RBAC": supported values: "Webhook", "AlwaysAllow"`,
				`containerLogMaxSize: Invalid value: "ten": must be a quantity such as 10Mi`,
				`containerLogMaxFiles: Invalid value: 1: must be greater than or equal to 2`,
			},
		},
		{
			desc:   "zero log size",
			mutate: func(c *NodeAgentConfiguration) { c.ContainerLogMaxSize = "0" },
			want:   []string{`containerLogMaxSize: Invalid value: "0": must be greater than 0`},
		},
		{
			desc: "log directories",
			mutate: func(c *NodeAgentConfiguration) {
				c.PodLogsDir = "/var/log/pods/"
				c.ContainerLogsDir = "var/log/containers"
			},
			want: []string{
				`podLogsDir: Invalid value: "/var/log/pods/": must be normalized (as filepath.Clean leaves it)`,
				`containerLogsDir: Invalid value: "var/log/containers": must be an absolute path`,
			},
		},
		{
			desc: "log directories: ASCII, distinct, required",
			mutate: func(c *NodeAgentConfiguration) {
				c.PodLogsDir = "/var/log/pöds"
				c.ContainerLogsDir = ""
			},
			want: []string{
				`podLogsDir: Invalid value: "/var/log/pöds": must contain ASCII characters only`,
				`containerLogsDir: Required value: an absolute path`,
			},
		},
		{
			desc:   "symlinks in the log directory",
			mutate: func(c *NodeAgentConfiguration) { c.ContainerLogsDir = c.PodLogsDir },
			want:   []string{`containerLogsDir: Invalid value: "/var/log/pods": must not be podLogsDir`},
		},
		{
			desc: "labels",
			mutate: func(c *NodeAgentConfiguration) {
				c.NodeLabels = map[string]string{
					"bad key!":                       "v",
					"example.com/ok":                 "not valid value",
					"node-role.kubernetes.io/worker": "",
					"node.kubernetes.io/pool":        "edge",   // allowed namespace
					"topology.kubernetes.io/zone":    "zone-a", // allowed label
				}
			},
			want: []string{
				`nodeLabels[bad key!]: Invalid value: "bad key!": label key name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')`,
				`nodeLabels[example.com/ok]: Invalid value: "not valid value": label value a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')`,
				`nodeLabels[node-role.kubernetes.io/worker]: Forbidden: labels in the kubernetes.io and k8s.io namespaces must begin with an allowed prefix (kubelet.kubernetes.io, node.kubernetes.io) or be one of beta.kubernetes.io/arch, beta.kubernetes.io/instance-type, beta.kubernetes.io/os, failure-domain.beta.kubernetes.io/region, failure-domain.beta.kubernetes.io/zone, kubernetes.io/arch, kubernetes.io/hostname, kubernetes.io/os, node.kubernetes.io/instance-type, topology.kubernetes.io/region, topology.kubernetes.io/zone; the NodeRestriction admission plugin rejects others`,
			},
		},
		{
			desc: "taints",
			mutate: func(c *NodeAgentConfiguration) {
				now := metav1.Now()
				c.RegisterWithTaints = []v1.Taint{
					{Key: "a", Effect: v1.TaintEffectNoSchedule},
					{Key: "a", Effect: v1.TaintEffectNoSchedule},
					{Key: "", Value: "x y", Effect: "Sometimes"},
					{Key: "b", Effect: v1.TaintEffectNoExecute, TimeAdded: &now},
				}
			},
			want: []string{
				`registerWithTaints[1]: Duplicate value: "a with effect NoSchedule"`,
				`registerWithTaints[2].key: Required value: a taint key`,
				`registerWithTaints[2].value: Invalid value: "x y": a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')`,
				`registerWithTaints[2].effect: Unsupported value: "Sometimes": supported values: "NoSchedule", "PreferNoSchedule", "NoExecute"`,
				`registerWithTaints[3].timeAdded: Forbidden: is set by the API server, not in configuration`,
			},
		},
		{
			desc: "node identity",
			mutate: func(c *NodeAgentConfiguration) {
				c.NodeIP = "10.0.0.300"
				c.HostnameOverride = "Node_1"
			},
			want: []string{
				`nodeIP: Invalid value: "10.0.0.300": must be an IP address or empty (the address of the default route's interface)`,
				`hostnameOverride: Invalid value: "Node_1": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')`,
			},
		},
		{
			desc: "logging",
			mutate: func(c *NodeAgentConfiguration) {
				c.Logging.Format = "xml"
				c.Logging.Verbosity = -1
			},
			want: []string{
				`logging.format: Unsupported value: "xml": supported values: "text", "json"`,
				`logging.verbosity: Invalid value: -1: must be greater than or equal to 0`,
			},
		},
		{
			desc: "pleg",
			mutate: func(c *NodeAgentConfiguration) {
				c.PLEG.RelistPeriod = dur(time.Second)
				c.PLEG.FallbackRelistPeriod = dur(2 * time.Second)
				c.PLEG.HealthThreshold = dur(time.Second)
				c.PLEG.EventSources = []string{"cgroups", "cgroups", "kernel"}
			},
			want: []string{
				`pleg.fallbackRelistPeriod: Invalid value: "2s": must not be greater than pleg.relistPeriod (1s)`,
				`pleg.healthThreshold: Invalid value: "1s": must be greater than pleg.fallbackRelistPeriod (2s)`,
				`pleg.eventSources[1]: Duplicate value: "cgroups"`,
				`pleg.eventSources[2]: Unsupported value: "kernel": supported values: "cgroups", "containerd"`,
			},
		},
		{
			desc:   "relist only",
			mutate: func(c *NodeAgentConfiguration) { c.PLEG.EventSources = []string{} },
		},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			c := Default()
			tc.mutate(c)
			errs, warnings := Validate(c)
			var got []string
			for _, e := range errs {
				got = append(got, e.Error())
			}
			if strings.Join(got, "\n") != strings.Join(tc.want, "\n") {
				t.Errorf("errors:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
			}
			if len(warnings) != len(tc.warnings) {
				t.Fatalf("warnings %q, want %q", warnings, tc.warnings)
			}
			for i := range warnings {
				if !strings.Contains(warnings[i], tc.warnings[i]) {
					t.Errorf("warning %q does not contain %q", warnings[i], tc.warnings[i])
				}
			}
		})
	}
}

func TestLoadReportsEveryValidationErrorWithItsFile(t *testing.T) {
	dir := t.TempDir()
	p := writeFile(t, dir, "config.yaml", hdr+"nodeLeaseDurationSeconds: -1\nmaxPods: 0\nlogging:\n  format: xml\n")
	writeFile(t, dir, "conf.d/10-pods.conf", hdr+"maxPods: -5\n")
	_, _, err := Load(LoadOptions{Path: p, DropInDir: joinPath(dir, "conf.d")})
	got := problemLines(t, err)
	want := []string{
		p + ":3: nodeLeaseDurationSeconds: Invalid value: -1: must be greater than 0",
		joinPath(dir, "conf.d/10-pods.conf") + ":3: maxPods: Invalid value: -5: must be greater than 0",
		p + `:6: logging.format: Unsupported value: "xml": supported values: "text", "json"`,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("problems:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if !strings.Contains(err.Error(), "invalid configuration (3 problems):") {
		t.Errorf("Error() = %q", err.Error())
	}
}

func joinPath(dir, name string) string { return dir + "/" + name }

func TestProblemLinesPointAtTheKey(t *testing.T) {
	dir := t.TempDir()
	p := writeFile(t, dir, "config.yaml", hdr+"evictionHard:\n  memory.available: 1Gi\n  nodefs.available: 200%\nregisterWithTaints:\n- key: a\n  effect: Never\npleg:\n  eventSources:\n  - cgroups\n  - kernel\n")
	_, _, err := Load(LoadOptions{Path: p})
	got := problemLines(t, err)
	want := []string{
		p + `:5: evictionHard[nodefs.available]: Invalid value: "200%": must be a percentage between 0% and 100%`,
		p + `:8: registerWithTaints[0].effect: Unsupported value: "Never": supported values: "NoSchedule", "PreferNoSchedule", "NoExecute"`,
		p + `:12: pleg.eventSources[1]: Unsupported value: "kernel": supported values: "cgroups", "containerd"`,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("problems:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// A file with wrong fields is still validated without them, so that one run
// reports decoding and validation problems together.
func TestLoadReportsDecodingAndValidationProblemsTogether(t *testing.T) {
	dir := t.TempDir()
	p := writeFile(t, dir, "config.yaml", hdr+"maxpods: 3\nnodeLeaseDurationSeconds: -1\npleg:\n  relistPeriod: 5\n  healthThreshold: 0s\n")
	d := writeFile(t, dir, "d/10.conf", hdr+"healthzPort: x\nlogging:\n  format: xml\n")
	_, _, err := Load(LoadOptions{Path: p, DropInDir: joinPath(dir, "d")})
	got := problemLines(t, err)
	want := []string{
		p + `:3: maxpods: unknown field (did you mean "maxPods"?)`,
		p + `:6: pleg.relistPeriod: Invalid value: 5: must be a duration string such as "10s", "5m" or "1h30m"`,
		d + `:3: healthzPort: Invalid value: "x": must be an integer`,
		p + `:4: nodeLeaseDurationSeconds: Invalid value: -1: must be greater than 0`,
		d + `:5: logging.format: Unsupported value: "xml": supported values: "text", "json"`,
		p + `:7: pleg.healthThreshold: Invalid value: "0s": must be greater than 0`,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("problems:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	// A file that is not a configuration at all stops before validation.
	writeFile(t, dir, "d/20.conf", "maxPods: [\n")
	_, _, err = Load(LoadOptions{Path: p, DropInDir: joinPath(dir, "d")})
	for _, l := range problemLines(t, err) {
		if strings.Contains(l, "nodeLeaseDurationSeconds") {
			t.Errorf("validated although a drop-in is unreadable: %s", l)
		}
	}
}
