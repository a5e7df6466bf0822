package config

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"

	v1 "k8s.io/api/core/v1"
)

// FieldDoc documents one configuration field. Its type and default are
// derived from the Go types and Default, so only the meaning is written by
// hand; docs/configuration.md and `nodeagent config defaults` are built from
// these.
type FieldDoc struct {
	Path    string // JSON path, "pleg.relistPeriod"
	Meaning string
}

// fieldDocs must hold every field of NodeAgentConfiguration (a test checks).
var fieldDocs = []FieldDoc{
	{"nodeLeaseDurationSeconds", "Duration in seconds the agent sets on its Lease (`kube-node-lease/<node name>`); the Lease is renewed every quarter of it (40 → 10s, 60 → 15s). A renew interval above the control plane's node-monitor-grace-period (40s by default) gets a warning: the node would be marked NotReady between renewals."},
	{"nodeStatusUpdateFrequency", "How often the node status is computed. A status that changed meaningfully is reported at once."},
	{"nodeStatusReportFrequency", "How often an unchanged node status is reported anyway. Must not be less than nodeStatusUpdateFrequency. If absent while nodeStatusUpdateFrequency is set, it takes that value (as in kubelet)."},
	{"nodeStatusMaxImages", "Maximum number of images reported in the node status; -1 means no cap, 0 reports none."},
	{"containerRuntimeEndpoint", "The containerd socket, as a unix:// URL with an absolute path. A bare absolute path is accepted with a warning, as kubelet does."},
	{"containerRuntimeNamespace", "The containerd namespace of the pods' containers and images (nodeagent's own field; kubelet's CRI plugin uses k8s.io)."},
	{"staticPodPath", "Directory of static pod manifests, watched for changes; empty disables static pods. The packages' config.yaml sets /etc/nodeagent/manifests. Relative paths are relative to the file that sets them."},
	{"maxPods", "Number of pods the node accepts (its pods capacity)."},
	{"podsPerCore", "As kubelet: greater than 0 caps the node's pods capacity (and so the pods it admits) at podsPerCore × the host's online CPUs, read at start, when that is less than maxPods; 0 leaves maxPods alone. Not negative (kubelet's message)."},
	{"syncFrequency", "As kubelet: the longest a pod's worker waits without news (a container event, a change of the pod, a timer of its own such as a restart back-off) before it syncs the pod again, rewriting its status and restarting what should run. As in kubelet, a worker whose sync succeeded waits this plus up to half of it at random, so that pods started together do not resync together. Must be greater than 0."},
	{"fileCheckFrequency", "As kubelet: how often staticPodPath is read in full. nodeagent also watches the directory with inotify, so a change is normally seen within 100ms; this rescan catches what a watch misses. Must be greater than 0."},
	{"runtimeRequestTimeout", "As kubelet: the bound on a container runtime request, except pulls (which end when no byte arrived for imagePullProgressTimeout), container logs, exec, attach and port-forward. nodeagent talks to containerd in finer calls than CRI's: creating and starting a container (and its pod sandbox) are bounded by this; every other call by the smaller of this and 10s, so that a hung containerd shows in the PLEG's health and the node status within seconds. Must be greater than 0."},
	{"streamingConnectionIdleTimeout", "How long an exec, attach or port-forward stream may carry no data before the agent closes it; 0 never closes one (in a KubeletConfiguration file, 0s means the default, as there). nodeagent serves these streams itself; kubelet 1.34 ignores the field (its CRI runtime serves them, containerd with its own stream_idle_timeout, also 4h). Not negative."},
	{"volumeStatsAggPeriod", "As kubelet: how long a measure of a pod volume's usage (du of an emptyDir, configMap, secret, projected volume; a CSI driver's NodeGetVolumeStats; statfs of a local PV) is reused by /stats/summary and /metrics, and, with the CSIVolumeHealth gate, how often volume conditions are checked. A negative value disables volume stats and health checks, as in kubelet; 0 means the default."},
	{"systemReserved", "Resources (cpu, memory, ephemeral-storage, pid) reserved for the operating system, subtracted from capacity to compute allocatable. Values are quantities such as \"500m\" or \"1Gi\"."},
	{"kubeReserved", "Resources (cpu, memory, ephemeral-storage, pid) reserved for Kubernetes node components, subtracted from capacity to compute allocatable."},
	{"evictionHard", "Hard eviction thresholds by signal (memory.available, nodefs.available, nodefs.inodesFree, imagefs.available, ...), each a quantity or a percentage. They set the memory, disk and PID pressure conditions and drive node-pressure eviction (docs/eviction.md). A map that is set replaces the default map, unless mergeDefaultEvictionSettings (a drop-in's map merges key by key); {} disables the thresholds."},
	{"mergeDefaultEvictionSettings", "As kubelet 1.34: true, the main file's evictionHard keeps the default threshold of each signal it does not name (memory.available 100Mi, nodefs.available 10%, nodefs.inodesFree 5%, imagefs.available 15%, imagefs.inodesFree 5%); the named ones take precedence, and `evictionHard: {}` then means the defaults. false (the default), a set evictionHard replaces the defaults: the signals it does not name have no hard threshold. evictionSoft and evictionMinimumReclaim have no defaults, so nothing is merged into them. As in kubelet, only the main file's value counts, applied before the drop-ins (whose evictionHard merges key by key anyway). See docs/eviction.md."},
	{"evictionPressureTransitionPeriod", "How long a pressure condition stays true after its signal went back below the threshold, so that it does not flap."},
	{"evictionSoft", "Soft eviction thresholds by signal, with evictionHard's syntax. A soft threshold sets its pressure condition as soon as it is met, but pods are evicted only once it has been met continuously for its evictionSoftGracePeriod; they are then killed with the smaller of their terminationGracePeriodSeconds and evictionMaxPodGracePeriod. Every signal here needs a grace period (docs/eviction.md)."},
	{"evictionSoftGracePeriod", "How long each soft threshold must be met before pods are evicted for it, by signal (a duration such as \"1m30s\"). A grace period of 0 makes the soft threshold act as a hard one (pods killed with a 1s grace period), as in kubelet."},
	{"evictionMaxPodGracePeriod", "Largest grace period, in seconds, given to pods evicted for a soft threshold (the pod's own terminationGracePeriodSeconds when smaller). As in kubelet's code, 0 (the default) or a negative value kills with a 1s grace period."},
	{"evictionMinimumReclaim", "By signal, a quantity or percentage of capacity: once a threshold (hard or soft) of that signal is acted on, it stays met, and pods are evicted one by one, until the signal is above the threshold plus this amount; node-level reclaim (dead containers, unused images) counts as enough only when it reaches that too."},
	{"imageGCHighThresholdPercent", "Percent of the image filesystem (the filesystem of containerd's snapshotter root) in use at or above which image garbage collection runs, every 5 minutes; 100 disables it (unless imageMaximumGCAge is set). Unused images are removed, least recently used first, until usage is below imageGCLowThresholdPercent. Images used by a container of the agent's containerd namespace, and pinned images, are never removed; other namespaces are never touched. Between 0 and 100."},
	{"imageGCLowThresholdPercent", "Percent of the image filesystem in use that image garbage collection frees down to. Between 0 and 100, and less than imageGCHighThresholdPercent."},
	{"imageMinimumGCAge", "Minimum age of an unused image (since the agent first saw it) before garbage collection may remove it."},
	{"imageMaximumGCAge", "Images unused for this long are removed whatever the disk usage, once the agent has run that long; 0 disables it. Must be greater than imageMinimumGCAge."},
	{"healthzBindAddress", "IP address the health and metrics endpoints are served on."},
	{"healthzPort", "Port of /healthz (kubelet healthz port's: the ping check alone), /livez (the agent's liveness), /readyz, /metrics and /events; 0 disables the server. The default is chosen not to collide with kubelet (10248, 10250) or kube-proxy (10249, 10256)."},
	{"address", "IP address the node API (kubelet's HTTPS server: `kubectl logs`, /pods, /healthz; see docs/nodeapi.md) listens on."},
	{"port", "Port of the node API, advertised in the Node's status.daemonEndpoints.kubeletEndpoint; 0 disables it (nodeagent allows 0; kubelet does not)."},
	{"enableServer", "As kubelet: false serves no node API (nothing listens on port; `kubectl logs`, `exec` and the API server's proxy to the node fail), though the Node still advertises port in status.daemonEndpoints.kubeletEndpoint, as kubelet's does. readOnlyPort does not depend on it. Unlike kubelet, which still runs its serving certificate manager, no serving certificate is created or requested (serverTLSBootstrap has no effect)."},
	{"readOnlyPort", "As kubelet (0, the default, disables it): a port on address where kubelet's read-only server is served, in plain HTTP with no authentication or authorization: /healthz, /pods, /stats/summary, /metrics, /metrics/cadvisor, /metrics/resource and /metrics/probes answer anyone who reaches the port; /run/, /exec/, /attach/, /portForward/, /containerLogs/, /runningpods/, /debug/pprof/ and /logs/ answer 405 `Debug endpoints are disabled.`, /configz, /checkpoint and /debug/flags/v 404 (docs/nodeapi.md#read-only-port). Between 0 and 65535 (kubelet's message); different from port and healthzPort. The port in use at start fails the start."},
	{"tlsCertFile", "Serving certificate (PEM, with intermediates) of the node API. Empty, with tlsPrivateKeyFile empty: a self-signed certificate for the node's name and addresses is created and kept in rootDir/pki (kubelet.crt, kubelet.key), as kubelet does."},
	{"tlsPrivateKeyFile", "Private key (PEM) of tlsCertFile."},
	{"serverTLSBootstrap", "Without tlsCertFile: request the node API's serving certificate from the certificates API (signer kubernetes.io/kubelet-serving, the Node's addresses as SANs), kept in rootDir/pki/kubelet-server-current.pem and renewed at 70–90% of its lifetime. Serving CSRs must be approved (`kubectl certificate approve`, or an approver controller); the self-signed certificate is served until then."},
	{"tlsCipherSuites", "As kubelet: the cipher suites the node API offers for TLS 1.2 and below, by Go's names (`TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256`, ...; also the legacy `TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305` and `TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305`). A client offering none of them fails the handshake. An unknown name is refused with kubelet's `Cipher suite X not supported or doesn't exist`; a suite Go lists as insecure is accepted with a warning, as kubelet accepts it with a log line. TLS 1.3's suites are not configurable (Go's). The certificates the agent makes (self-signed, or bootstrapped with serverTLSBootstrap) are ECDSA P-256: with them only ECDHE_ECDSA suites can be negotiated. Empty: Go's default suites."},
	{"tlsMinVersion", "As kubelet: the lowest TLS version the node API accepts: VersionTLS10, VersionTLS11, VersionTLS12 or VersionTLS13; a client that cannot speak it fails the handshake. Any other value is refused with kubelet's `unknown tls version`. Empty: VersionTLS12."},
	{"authentication.x509.clientCAFile", "CA bundle (PEM) that signs client certificates accepted by the node API; the user is the certificate's CN and the groups its O. Empty disables client-certificate authentication. The API server's --kubelet-client-certificate must be signed by one of these CAs."},
	{"authentication.webhook.enabled", "Authenticate bearer tokens with the API server's TokenReview API."},
	{"authentication.webhook.cacheTTL", "How long TokenReview answers are cached; 0 disables the cache."},
	{"authentication.anonymous.enabled", "Let requests without credentials in as system:anonymous (group system:unauthenticated), still subject to authorization. Off: they get 401 Unauthorized."},
	{"authorization.mode", "Authorization of node API requests: Webhook (a SubjectAccessReview per request on the node's subresource: nodes/proxy, nodes/log, nodes/stats, nodes/metrics, nodes/healthz, nodes/pods, nodes/configz, nodes/checkpoint; docs/nodeapi.md#authorization) or AlwaysAllow (any authenticated user)."},
	{"authorization.webhook.cacheAuthorizedTTL", "How long an allowing SubjectAccessReview answer is cached."},
	{"authorization.webhook.cacheUnauthorizedTTL", "How long a denying SubjectAccessReview answer is cached."},
	{"enableDebuggingHandlers", "As kubelet: serve the node API's debugging endpoints: /exec, /attach, /portForward, /run, /containerLogs, /runningpods/, /configz, /checkpoint, and /debug/pprof/, /debug/flags/v and /logs/ as their own fields allow. false answers /run/, /exec/, /attach/, /portForward/, /containerLogs/, /runningpods/, /debug/pprof/ and /logs/ with 405 `Debug endpoints are disabled.` (`kubectl logs`, `exec` and `port-forward` stop working) and /configz, /checkpoint and /debug/flags/v with 404."},
	{"enableContentionProfiling", "As kubelet: with the profiling handler on, record every goroutine blocking event (runtime.SetBlockProfileRate(1)) so that /debug/pprof/block shows where goroutines wait. Costs CPU on every contended lock and channel operation; leave it off except while investigating."},
	{"enableProfilingHandler", "As kubelet (needs enableDebuggingHandlers): serve Go's profiles at /debug/pprof/ (index; profile?seconds=N for CPU, trace?seconds=N, symbol, cmdline; named profiles heap, allocs, goroutine, block, mutex, threadcreate), authorized as nodes/proxy. `kubectl get --raw /api/v1/nodes/<node>/proxy/debug/pprof/heap > heap.pprof` takes one (README, Troubleshooting). false answers 405 `profiling endpoint is disabled.`"},
	{"enableDebugFlagsHandler", "As kubelet (needs enableDebuggingHandlers): /debug/flags/v, where a PUT whose body is a number (0, 4, ...) sets the log verbosity (logging.verbosity) of the running agent until the next restart or configuration change (nodes/proxy, verb update). false answers 405 `flags endpoint is disabled.`"},
	{"enableSystemLogHandler", "As kubelet (needs enableDebuggingHandlers): serve the files and directories under /var/log at /logs/ (a directory is listed; authorized as nodes/log). false answers 405 `logs endpoint is disabled.`"},
	{"enableSystemLogQuery", "kubelet's node log query on the node API: `GET /logs/?query=<service or file>` with `sinceTime`, `untilTime`, `tailLines`, `pattern` and `boot`, a service's journal through journalctl (`journalctl -u`, with kubelet's arguments) or its file under /var/log, `query=/<file>` that file (docs/nodeapi.md). As in kubelet it needs the NodeLogQuery feature gate (`NodeLogQuery feature gate is required for enableSystemLogHandler` otherwise) and enableSystemLogHandler (`enableSystemLogHandler is required for enableSystemLogQuery`); off, /logs/ ignores the query parameters."},
	{"containerLogMaxSize", "Largest size of a container's log file (a quantity such as 10Mi) before it is rotated to <attempt>.log.<yyyymmdd-hhmmss> (UTC; not compressed). Applies to containers started after a change."},
	{"containerLogMaxFiles", "Most log files kept per container attempt, the live one included; at least 2."},
	{"podLogsDir", "Directory of the pods' container logs, as kubelet lays them out: <namespace>_<pod>_<pod UID>/<container>/<restart count>.log, with the rotated files beside each. A pod's directory is removed with the pod. Absolute, normalized and ASCII only, as kubelet requires. Containers an agent older than this field started keep writing under rootDir/logs, and stay readable through the node API and removed with their pods (docs/pods.md#logs); after a change of podLogsDir, logs under the former directory are neither read nor removed."},
	{"containerLogsDir", "Directory of the symlinks log shippers read: <pod>_<namespace>_<container>-<container ID>.log pointing at the container's live log file in podLogsDir, made when the container starts and removed with the container, as kubelet keeps /var/log/containers. kubelet has no field for it (its directory is the constant /var/log/containers); this one exists so that agents sharing a host in tests keep their own. Absolute, normalized, ASCII only."},
	{"nodeLabels", "Labels set on the Node when it registers (kubelet's --node-labels). Labels in the kubernetes.io and k8s.io namespaces are limited to those the NodeRestriction admission plugin lets a node set."},
	{"registerNode", "As kubelet (default true): false, the agent never creates its Node: it waits for the Node of its name to exist (logging `node \"<name>\" not found, and registerNode is false: waiting for it to be created`, retried with registration's back-off, 100ms doubling to 7s; /readyz answers `node not registered yet` meanwhile), then reports status and renews its Lease as usual. The agent's labels (nodeLabels and the kubernetes.io ones), registerWithTaints, providerID and the controller-managed-attach-detach annotation are not set on the Node: whoever creates it sets what it needs, as with kubelet. A Node deleted later is not created again: status reports fail until it exists again."},
	{"registerWithTaints", "Taints (key, value, effect) set on the Node when it registers."},
	{"providerID", "spec.providerID of the Node, the cloud provider's ID of the machine; empty leaves it unset."},
	{"nodeIP", "IP address reported for the node (nodeagent's field for kubelet's --node-ip; flag --node-ip). Empty means the address of the interface that holds the default route."},
	{"hostnameOverride", "Node name to use instead of the hostname (flag --hostname-override). Like the hostname, it is trimmed and lower-cased (as kubelet does) and must then be a DNS subdomain. Empty uses the hostname."},
	{"kubeconfig", "Kubeconfig with the node's credentials (user `system:node:<node name>` in group `system:nodes`) (flag --kubeconfig). Relative paths are relative to the file that sets them."},
	{"bootstrapKubeconfig", "Kubeconfig (a bootstrap token, usually) used to obtain the node's client certificate when the kubeconfig file is missing or its certificate expired or unusable: the agent sends a CSR for signer kubernetes.io/kube-apiserver-client-kubelet (CN=system:node:<node name>, O=system:nodes), stores the issued certificate in certDir (kubelet-client-current.pem) and writes the kubeconfig to name it, as kubelet's TLS bootstrap (flag --bootstrap-kubeconfig). Relative paths are relative to the file that sets them."},
	{"certDir", "Directory of the certificates the agent obtains: kubelet-client-<time>.pem with the kubelet-client-current.pem symlink, kubelet-server-... for serverTLSBootstrap (flag --cert-dir). Empty: rootDir/pki (kubelet: /var/lib/kubelet/pki)."},
	{"rotateCertificates", "As kubelet (default false; kubeadm writes true): renew the client certificate at a jittered 70–90% of its lifetime with a CSR authenticated by the current certificate, and switch the agent's connections to the new one without a restart (the old one stays in use until the new one is issued). Needs a client certificate in the kubeconfig or a bootstrapKubeconfig; a kubeconfig with a token is used as it is."},
	{"kubeAPIQPS", "As kubelet: requests per second of the agent's main API client (pods, their status, volumes' Secrets and ConfigMaps, CSI objects, node registration, reviews of node API requests), refilling a bucket of kubeAPIBurst requests. Events have their own client (eventRecordQPS); node status reports and Lease renewals are not limited, as kubelet's heartbeat client is not. 0 means client-go's default, 5 per second (per API group), as in kubelet. Not negative."},
	{"kubeAPIBurst", "As kubelet: the most requests the main API client sends at once before kubeAPIQPS applies. Not negative; greater than 0 when kubeAPIQPS is (in a KubeletConfiguration file, 0 means the default, as there)."},
	{"eventRecordQPS", "As kubelet: requests per second of the client that writes Events, refilling a bucket of eventBurst; a burst of pod events waits on this client without delaying the main one. 0 means client-go's default, 5 per second, which is what kubelet does too (its documentation says 0 is no limit, but its client applies client-go's default). Not negative."},
	{"eventBurst", "As kubelet: the most Event requests sent at once before eventRecordQPS applies. Not negative; greater than 0 when eventRecordQPS is (in a KubeletConfiguration file, 0 means the default, as there)."},
	{"contentType", "As kubelet: the media type of the agent's requests to the API server, application/vnd.kubernetes.protobuf (answers accepted in protobuf or JSON) or application/json; used by every client (main, Events, heartbeat, certificate requests). Other values are refused: the agent's clients encode only these two (in a KubeletConfiguration file, empty means the default, as there)."},
	{"rootDir", "Directory for the agent's state: pod volumes (pods/<uid>), the node API's certificates (pki/). Container logs are in podLogsDir (older agents kept them in logs/ here; those of running containers are still read and removed with their pods)."},
	{"clusterDNS", "IP addresses of the cluster DNS service (kube-dns/CoreDNS). Pods with dnsPolicy ClusterFirst (or ClusterFirstWithHostNet) get them as nameservers; without them such pods fall back to the Default policy with a MissingClusterDNS event, as in kubelet."},
	{"clusterDomain", "The cluster's DNS domain (usually cluster.local). Pods with a ClusterFirst policy search <namespace>.svc.<domain>, svc.<domain> and <domain> first; spec.subdomain names resolve under it. Empty means no cluster search domains."},
	{"resolvConf", "Host resolver file the pods' resolv.conf is based on (search domains, and nameservers for dnsPolicy Default). Empty means none: Default pods resolve through the node (127.0.0.1). On hosts with systemd-resolved use /run/systemd/resolve/resolv.conf."},
	{"cniConfDir", "Directory of CNI network configurations; the first usable .conflist/.conf/.json in lexical order is used and reloaded when the directory changes. Until one is usable the node is NotReady (kubelet's NetworkPluginNotReady) and only hostNetwork pods start. Empty disables pod networking: pods without hostNetwork get loopback only and readiness does not depend on a network. See docs/networking.md."},
	{"cniBinDir", "Comma-separated directories searched for CNI plugin binaries, in order (the upstream /opt/cni/bin, then Debian's /usr/lib/cni)."},
	{"seccompDefault", "Run containers that set no seccompProfile (neither the container nor its pod) with the runtime's default profile (containerd's RuntimeDefault) instead of Unconfined. Localhost profiles are read from rootDir/seccomp."},
	{"allowedUnsafeSysctls", "Sysctls pods may set beyond kubelet's safe set (kernel.shm_rmid_forced, net.ipv4.ip_local_port_range, net.ipv4.tcp_syncookies, net.ipv4.ping_group_range, net.ipv4.ip_unprivileged_port_start, net.ipv4.ip_local_reserved_ports, net.ipv4.tcp_keepalive_time/_intvl/_probes, net.ipv4.tcp_fin_timeout, net.ipv4.tcp_rmem, net.ipv4.tcp_wmem): names or patterns ending in \"*\" (\"net.core.*\"), of namespaced sysctls only (kernel.shm*, kernel.msg*, kernel.sem, fs.mqueue.*, net.*). A pod with any other sysctl is rejected (SysctlForbidden), as is a net.* sysctl with hostNetwork or an IPC one with hostIPC."},
	{"featureGates", "Kubelet's feature gates, read as a v1.34 kubelet reads them: an unknown gate, or a locked one set against its lock, is refused with kubelet's message; a gate at kubelet 1.34's default is accepted (nodeagent behaves as that default). Honoured both ways: PodLevelResources (on by default; off, pods with spec.resources are rejected with PodLevelResourcesNotSupported as kubelet does), ImageVolume (off by default as in 1.34; on, image volumes are mounted read-only, docs/storage.md; off, pods with one are rejected naming the field, where kubelet leaves them Pending with FailedMount), KubeletEnsureSecretPulledImages (docs/images.md), KubeletPSI (on by default; off, no pressure stall information in /stats/summary or /metrics/cadvisor, docs/nodeapi.md), ContainerCheckpoint (on by default; off, the node API does not serve /checkpoint; on, it answers as kubelet does with a runtime that cannot checkpoint, docs/nodeapi.md), CSIVolumeHealth (off by default as in 1.34; on, the volume condition of CSI drivers with VOLUME_CONDITION is volumeHealthStats in /stats/summary, kubelet_volume_stats_health_status_abnormal and kubelet's VolumeConditionAbnormal Event, docs/storage.md) and NodeLogQuery (off by default as in 1.34; on, with enableSystemLogQuery, the node log query on /logs/, docs/nodeapi.md). Any other value is refused naming the gate (featureGates.<gate>)."},
	{"imagePullCredentialsVerificationPolicy", "With the KubeletEnsureSecretPulledImages gate: which images already on the node a pod must present accepted pull credentials for. NeverVerify, NeverVerifyPreloadedImages (empty: images the agent did not pull are served to any pod), NeverVerifyAllowlistedImages (only those in preloadedImagesVerificationAllowlist), AlwaysVerify. Must be empty without the gate, as in kubelet."},
	{"preloadedImagesVerificationAllowlist", "Images exempt from the check under NeverVerifyAllowlistedImages: image names without tag or digest, or prefixes ending in /* (registry.example/team/*)."},
	{"userNamespaces.idsPerPod", "UIDs and GIDs given to each pod with hostUsers: false (a multiple of 65536, kubelet's default 65536). The agent's range (the kubelet user's /etc/subuid and /etc/subgid entries, else 65536 up to 2^32-1) must start at a multiple of it and hold maxPods such slots."},
	{"cgroupDriver", "How pod cgroups are made: cgroupfs (directories under each cgroup mount) or systemd (slices and scopes through systemd's D-Bus API; containers get runc's SystemdCgroup option, as containerd's CRI plugin with SystemdCgroup = true). Use systemd on hosts where systemd is PID 1."},
	{"cgroupRoot", "Cgroup under which the kubepods hierarchy is made (kubepods, kubepods/burstable, kubepods/besteffort, then pod<uid>). Empty means the root (/), except when containerRuntimeNamespace is not k8s.io: then /nodeagent-<namespace> (a slice nodeagent_<namespace>.slice with systemd), so that several agents on one host keep apart. With the systemd driver a slice path such as /kube.slice."},
	{"cgroupsPerQOS", "Make the kubepods hierarchy with its QoS levels and a cgroup per pod, as kubelet does. false puts the containers directly under cgroupRoot."},
	{"enforceNodeAllocatable", "What node allocatable is enforced on: pods (kubepods gets allocatable memory as its limit: capacity minus systemReserved and kubeReserved) or none. kubepods always gets cpu shares from allocatable. system-reserved and kube-reserved are not supported."},
	{"podPidsLimit", "Most processes (pids.max) in a pod's cgroup; -1 means no limit."},
	{"failSwapOn", "As kubelet: the agent does not start when the host has swap on (`/proc/swaps` lists a device or file), with kubelet's error `running with swap on is not supported, please disable swap or set --fail-swap-on flag to false`. false lets it start; containers then use swap only as memorySwap allows."},
	{"protectKernelDefaults", "As kubelet: at start the agent compares kubelet's kernel tunables with the host's (`vm.overcommit_memory` 1, `vm.panic_on_oom` 0, `kernel.panic` 10, `kernel.panic_on_oops` 1, `kernel.keys.root_maxkeys` 1000000, `kernel.keys.root_maxbytes` 25000000). true: any that differs stops the start with kubelet's error `invalid kernel flag: kernel/panic, expected value: 10, actual value: 0` (one for each), and nothing is written; set them with sysctl (for example in /etc/sysctl.d) first. false: the agent writes the differing ones under /proc/sys, logging `Updating kernel flag`, as kubelet does. In both, a tunable that cannot be read or written stops the start."},
	{"maxOpenFiles", "As kubelet: at start the agent sets its own open files limit (RLIMIT_NOFILE, soft and hard; `Max open files` in /proc/<pid>/limits) to this; processes it starts inherit it. A limit that cannot be set (above fs.nr_open) is logged (`Failed to set rlimit on max file handles`) and the start goes on, as in kubelet. Not negative (kubelet's message); 0 keeps the limit the agent was started with (in a KubeletConfiguration file 0 means the default, as there)."},
	{"oomScoreAdj", "As kubelet: the agent's own oom_score_adj, set at start; the default -999 is below every pod's (Guaranteed containers get -997), so the kernel's OOM killer takes pods before the agent. Between -1000 and 1000 (kubelet's message). A value that cannot be written is logged and the start goes on, as in kubelet."},
	{"failCgroupV1", "As kubelet 1.34: true stops the agent at start on a host without the cgroup v2 unified hierarchy, with kubelet's error `kubelet is configured to not run on a host using cgroup v1. cgroup v1 support is in maintenance mode`. false (the default in 1.34) runs on cgroup v1 too."},
	{"memorySwap.swapBehavior", "As kubelet's NodeSwap: NoSwap (or empty) keeps containers out of swap (cgroup v2 `memory.swap.max` 0; on cgroup v1 `memory.memsw.limit_in_bytes` equal to the memory limit), LimitedSwap gives each Burstable container with a memory request below its limit (not critical pods) `memory request / node memory × swap size` of swap on cgroup v2 (NoSwap on v1). Applied whenever the kernel has the swap controller, swap on or not, as kubelet. See docs/pods.md."},
	{"singleProcessOOMKill", "As kubelet (1.32+): on cgroup v2, false sets `memory.oom.group` to 1 in every container's cgroup (through the OCI spec's `linux.resources.unified`, as kubelet asks containerd through the CRI's unified map), so that an OOM kill takes all of the container's processes; true leaves it 0 and the kernel kills one process, as on cgroup v1. Unset means false on cgroup v2 and true on v1; false on a cgroup v1 host stops the agent at start with kubelet's error `invalid configuration: singleProcessOOMKill must not be explicitly set to false when using cgroup v1`. See docs/vm.md for how OOM kills are reported."},
	{"runtimeHandlers", "RuntimeClass handlers this node runs, each mapped to a containerd runtime type (shim), for example `{runc: io.containerd.runc.v2, test-handler: io.containerd.runc.v2}`. A pod whose RuntimeClass names another handler does not start: it stays Pending with a FailedCreatePodSandBox event `failed to get sandbox runtime: no runtime for \"<handler>\" is configured`, as with containerd. A map that is set replaces the default."},
	{"registryConfigPath", "containerd's registry `config_path` (CRI plugin, `[plugins.\"io.containerd.grpc.v1.cri\".registry] config_path`): one or more absolute directories separated by `:` holding `<host>/hosts.toml` (`<host>_<port>_` for a port; `_default` for any registry without its own) in containerd's layout: `server`, `[host.\"...\"]` mirrors with `capabilities` (pull, resolve), `ca`, `client`, `skip_verify`, `override_path`, `header`. The agent pulls images itself (not through CRI), so it reads these files with containerd's own code on every pull; point it at the directory containerd uses. Credentials for an image (pull secrets, docker config, credential provider plugins) are offered to its mirrors too. A directory that does not exist means no configuration. Empty: registries are used directly. See docs/images.md."},
	{"serializeImagePulls", "As kubelet: pull one image at a time on the node. A pull asked for while another is in progress waits for it, in order (the pod's Pulling event is sent when it asks; its Pulled event gives the pull's own time and the time including the wait: `Successfully pulled image \"...\" in 1.2s (8.5s including waiting)`). false pulls in parallel, up to maxParallelImagePulls. Unset: true, unless maxParallelImagePulls is 2 or more (kubelet's default, which /configz shows)."},
	{"maxParallelImagePulls", "As kubelet: with serializeImagePulls false, the most image pulls in progress at once on the node; a pull beyond it waits for one to end. Unset: no limit. At least 1; more than 1 is refused while serializeImagePulls is true (`cannot be larger than 1 unless serializeImagePulls is set to false`)."},
	{"registryPullQPS", "As kubelet: image pulls per second, a token bucket of registryBurst pulls refilling at this rate, counted when a pull starts (after waiting its turn under serializeImagePulls or maxParallelImagePulls). A pull that finds the bucket empty is not delayed: it fails at once with kubelet's error `pull QPS exceeded`, so the container waits with ErrImagePull and the image goes into its pull back-off (10s, doubling). 0 means no limit. Not negative."},
	{"registryBurst", "As kubelet: the most image pulls started at once before registryPullQPS applies (the bucket's size). Not negative; greater than 0 when registryPullQPS is (in a KubeletConfiguration file, 0 means the default, as there)."},
	{"imagePullProgressTimeout", "A pull is cancelled when a request to the registry is open and no byte arrived for this long (containerd CRI's `image_pull_progress_timeout`, same default); a pull that keeps receiving bytes is never cut off, however long it takes. 0 disables the check."},
	{"imageCredentialProviderConfig", "kubelet's `--image-credential-provider-config` (also a flag here): a `CredentialProviderConfig` (`kubelet.config.k8s.io/v1`, `v1beta1`, `v1alpha1`) file, or a directory whose *.json, *.yaml and *.yml files are merged in lexical order. Its plugins are asked for the credentials of matching images, after the pod's pull secrets and the node's docker config. Invalid configuration, or a plugin missing from imageCredentialProviderBinDir, stops the agent at start as it stops kubelet. `tokenAttributes` (service account token mode) is refused. Empty: no plugins. See docs/images.md."},
	{"imageCredentialProviderBinDir", "kubelet's `--image-credential-provider-bin-dir` (also a flag here): the directory of the credential provider plugin executables, each named as its provider. Required with imageCredentialProviderConfig."},
	{"cpuCFSQuota", "As kubelet: a container with a cpu limit gets a CFS quota of limit × cpuCFSQuotaPeriod (cpu.cfs_quota_us on cgroup v1, cpu.max on v2), and so does its pod's cgroup (the sum of its containers' limits, when all have one). false: no container or pod cgroup gets a quota (-1, \"max\"); the limits stay in the pod's spec and in containerStatuses[].resources, and an in-place resize of a cpu limit is recorded without a quota, as in kubelet. Containers with exclusive CPUs of the static CPU manager get none either way (DisableCPUQuotaWithExclusiveCPUs). See docs/pods.md."},
	{"cpuCFSQuotaPeriod", "As kubelet: the CFS period of the quotas. Only 100ms is accepted: another value needs the CustomCPUCFSQuotaPeriod gate (kubelet's message), which nodeagent does not implement (turning it on is refused)."},
	{"cpuManagerPolicy", "As kubelet: none, or static, which gives the containers of Guaranteed pods whose cpu request is an integer CPUs of their own (cpuset.cpus), taken at admission from the shared pool every other container runs on (all CPUs but the exclusive ones, the reserved ones included); a pod that does not fit is rejected with UnexpectedAdmissionError. static needs a CPU reservation: reservedSystemCPUs, or systemReserved + kubeReserved cpu greater than 0 (rounded up to whole CPUs, taken lowest cores first). Assignments are kept in rootDir/cpu_manager_state (kubelet's format); the agent refuses to start on a file written for another policy (drain the node and delete the file). See docs/pods.md, CPU manager."},
	{"cpuManagerPolicyOptions", "Options of the static policy (kubelet's full-pcpus-only, distribute-cpus-across-numa, ...). nodeagent implements none: each set is refused by name."},
	{"topologyManagerPolicy", "As kubelet: none, best-effort, restricted or single-numa-node, on machines with ONE NUMA node (a policy other than none is refused on a machine with more, read from /sys/devices/system/node). There every CPU and device is on node 0, so the policy decides only whether a container whose resources cannot be allocated is rejected with kubelet's TopologyAffinityError (\"Resources cannot be allocated with Topology locality\"; restricted and single-numa-node) or left to the CPU and device managers (best-effort, none: UnexpectedAdmissionError). Counted in kubelet_topology_manager_admission_* on /metrics. See docs/pods.md, Topology manager."},
	{"topologyManagerScope", "As kubelet: container (the default: each container's hints are checked before its CPUs and devices are allocated) or pod (the pod's, before any of its containers is allocated)."},
	{"topologyManagerPolicyOptions", "With a policy other than none: prefer-closest-numa-nodes (a bool) and max-allowable-numa-nodes (an integer of at least 8; needs the TopologyManagerPolicyBetaOptions gate, on by default), checked as kubelet does and without effect on one NUMA node; any other option is refused by name."},
	{"cpuManagerReconcilePeriod", "How often the static policy releases the CPUs of pods that ended and pushes the current cpusets (exclusive, or the shared pool) to running containers whose cpuset changed. Greater than 0; in a KubeletConfiguration file 0s means the default."},
	{"reservedSystemCPUs", "As kubelet's --reserved-cpus: a cpuset (\"0,2-3\") reserved for the system. It replaces the cpu of systemReserved (its size) and kubeReserved (none) for allocatable, and is the static CPU manager policy's reserved set, which is never given exclusively."},
	{"shutdownGracePeriod", "How long the agent delays the node's shutdown (a systemd-logind delay inhibitor lock) to stop its pods: on PrepareForShutdown the node turns NotReady (\"node is shutting down\"), regular pods get at most shutdownGracePeriod - shutdownGracePeriodCriticalPods, then critical pods (priority >= 2000000000) the rest; each pod gets the smaller of its own grace period and its group's. logind's InhibitDelayMaxSec is raised to it (/etc/systemd/logind.conf.d/99-nodeagent.conf). 0 disables graceful node shutdown; otherwise at least 1s. See docs/shutdown.md."},
	{"shutdownGracePeriodCriticalPods", "The part of shutdownGracePeriod kept for critical pods, which are stopped after all other pods; at most shutdownGracePeriod, 0 or at least 1s."},
	{"shutdownGracePeriodByPodPriority", "Instead of shutdownGracePeriod and shutdownGracePeriodCriticalPods (setting both is refused, as in kubelet), a list of {priority, shutdownGracePeriodSeconds} bands: on shutdown the pods are stopped band by band from the lowest priority upward, a pod belonging to the band with the highest priority not above its own (a pod below every band to the lowest); each pod gets the smaller of its own grace period and its band's, and each band is waited for at most its grace period. The shutdown is delayed by the sum of the bands' grace periods (logind's InhibitDelayMaxSec is raised to it). Needs the GracefulNodeShutdownBasedOnPodPriority gate (on by default). Grace periods must not be negative. See docs/shutdown.md."},
	{"logging.format", "Log format: text or json."},
	{"logging.verbosity", "Log verbosity (klog -v; flag -v). Higher logs more; 0 logs only important messages."},
	{"pleg.relistPeriod", "Interval of the PLEG's safety-net relist while every event source is healthy; events, not the relist, detect container changes."},
	{"pleg.fallbackRelistPeriod", "Relist interval when no event source is configured or one of them is unhealthy (kubelet's generic PLEG relists every 1s)."},
	{"pleg.healthThreshold", "How long the PLEG may make no progress before it reports itself unhealthy, which sets the node NotReady."},
	{"pleg.eventSources", "Upstream event sources that trigger an immediate inspection: cgroups (inotify on cgroup directories and cgroup.events) and containerd (task events). An empty list means relist only, every fallbackRelistPeriod."},
}

// FieldInfo is a FieldDoc with its derived type and default.
type FieldInfo struct {
	Path, Type, Default, Meaning string
	// Kubelet says the field has the same name and meaning in
	// KubeletConfiguration; Live says it changes without a restart.
	Kubelet, Live bool
}

// Fields returns the documentation of every field, in declaration order.
func Fields() []FieldInfo {
	docs := map[string]string{}
	for _, d := range fieldDocs {
		docs[d.Path] = d.Meaning
	}
	def := Default()
	var out []FieldInfo
	walkFields(agentType, reflect.ValueOf(*def), "", func(path string, f reflect.StructField, v reflect.Value) {
		top, _, _ := strings.Cut(path, ".")
		out = append(out, FieldInfo{
			Path:    path,
			Type:    typeName(f.Type),
			Default: compactJSON(v.Interface()),
			Meaning: docs[path],
			Kubelet: kubeletSupported[top] || path == "logging.format" || path == "logging.verbosity",
			Live:    isLive(path),
		})
	})
	return out
}

// FieldPaths returns the JSON path of every leaf field of
// NodeAgentConfiguration, found by reflection.
func FieldPaths() []string {
	var out []string
	walkFields(agentType, reflect.ValueOf(*Default()), "", func(path string, _ reflect.StructField, _ reflect.Value) {
		out = append(out, path)
	})
	return out
}

// walkFields calls fn for every leaf field in declaration order, recursing
// into nested configuration sections.
func walkFields(t reflect.Type, v reflect.Value, prefix string, fn func(path string, f reflect.StructField, v reflect.Value)) {
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if f.Anonymous {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if isConfigStruct(f.Type) {
			walkFields(f.Type, v.Field(i), prefix+name+".", fn)
			continue
		}
		fn(prefix+name, f, v.Field(i))
	}
}

func typeName(t reflect.Type) string {
	switch {
	case t == durationT:
		return "duration"
	case t == reflect.TypeOf(v1.Taint{}):
		return "Taint"
	}
	switch t.Kind() {
	case reflect.Pointer: // optional: unset has a meaning of its own
		return typeName(t.Elem())
	case reflect.Slice:
		return "[]" + typeName(t.Elem())
	case reflect.Map:
		return "map[" + typeName(t.Key()) + "]" + typeName(t.Elem())
	}
	return t.Kind().String()
}

func compactJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}
