package config

import (
	"fmt"
	"maps"
	"math"
	"net"
	"net/url"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	kubeletapis "k8s.io/kubelet/pkg/apis"

	"github.com/nodeagent/nodeagent/internal/evictionapi"
)

// reservedPorts are used by other node components (kubelet healthz, kube-proxy
// metrics, kubelet API, kube-proxy healthz, ...).
var reservedPorts = map[int32]string{
	10248: "kubelet healthz",
	10249: "kube-proxy metrics",
	10250: "kubelet API",
	10255: "kubelet read-only API",
	10256: "kube-proxy healthz",
	20256: "kube-proxy",
	20257: "kube-proxy",
}

// reservableResources are the resources systemReserved and kubeReserved
// may name, as in kubelet.
var reservableResources = []string{"cpu", "memory", "ephemeral-storage", "pid"}

// evictionSignals are the signals evictionHard may name, as in kubelet.
var evictionSignals = evictionapi.Signals()

var containerdNamespaceRE = regexp.MustCompile(`^[A-Za-z0-9]+(?:[._-][A-Za-z0-9]+)*$`)

// Validate checks a complete configuration. It returns every error, each
// with its field path, and warnings for settings that are valid but likely
// mistakes.
func Validate(c *NodeAgentConfiguration) (field.ErrorList, []string) {
	var errs field.ErrorList
	var warnings []string

	if c.APIVersion != APIVersion {
		errs = append(errs, field.NotSupported(field.NewPath("apiVersion"), c.APIVersion, []string{APIVersion}))
	}
	if c.Kind != Kind {
		errs = append(errs, field.NotSupported(field.NewPath("kind"), c.Kind, []string{Kind}))
	}

	// Timing.
	if c.NodeLeaseDurationSeconds <= 0 {
		errs = append(errs, field.Invalid(field.NewPath("nodeLeaseDurationSeconds"), c.NodeLeaseDurationSeconds, "must be greater than 0"))
	} else if renew := c.RenewInterval(); renew > ControlPlaneGracePeriod {
		warnings = append(warnings, fmt.Sprintf(
			"nodeLeaseDurationSeconds: %d means the Lease is renewed every %s, longer than the control plane's default node-monitor-grace-period of %s: "+
				"unless kube-controller-manager's --node-monitor-grace-period is raised above %s, the node will be marked NotReady between renewals",
			c.NodeLeaseDurationSeconds, renew, ControlPlaneGracePeriod, renew))
	}
	errs = append(errs, positiveDuration(c.NodeStatusUpdateFrequency, field.NewPath("nodeStatusUpdateFrequency"))...)
	errs = append(errs, positiveDuration(c.NodeStatusReportFrequency, field.NewPath("nodeStatusReportFrequency"))...)
	if c.NodeStatusUpdateFrequency.Duration > 0 && c.NodeStatusReportFrequency.Duration > 0 &&
		c.NodeStatusReportFrequency.Duration < c.NodeStatusUpdateFrequency.Duration {
		errs = append(errs, field.Invalid(field.NewPath("nodeStatusReportFrequency"), c.NodeStatusReportFrequency.Duration.String(),
			fmt.Sprintf("must not be less than nodeStatusUpdateFrequency (%s)", c.NodeStatusUpdateFrequency.Duration)))
	}
	if c.NodeStatusMaxImages < -1 {
		errs = append(errs, field.Invalid(field.NewPath("nodeStatusMaxImages"), c.NodeStatusMaxImages, "must be greater than or equal to -1"))
	}

	// Runtime.
	if e := c.ContainerRuntimeEndpoint; filepath.IsAbs(e) {
		// kubelet still accepts a bare path, with a deprecation warning.
		warnings = append(warnings, fmt.Sprintf("containerRuntimeEndpoint: %q has no scheme; use \"unix://%s\"", e, e))
	} else {
		errs = append(errs, validateEndpoint(e, field.NewPath("containerRuntimeEndpoint"))...)
	}
	if p := field.NewPath("containerRuntimeNamespace"); c.ContainerRuntimeNamespace == "" {
		errs = append(errs, field.Required(p, "the containerd namespace, normally \"k8s.io\""))
	} else if len(c.ContainerRuntimeNamespace) > 76 || !containerdNamespaceRE.MatchString(c.ContainerRuntimeNamespace) {
		errs = append(errs, field.Invalid(p, c.ContainerRuntimeNamespace, "must be a containerd namespace: letters and digits separated by '.', '_' or '-', at most 76 characters"))
	}

	// Pods and resources.
	if c.StaticPodPath != "" && !filepath.IsAbs(c.StaticPodPath) {
		errs = append(errs, field.Invalid(field.NewPath("staticPodPath"), c.StaticPodPath, "must be an absolute path or empty (disabled)"))
	}
	// kubelet's checks and messages (pkg/kubelet/apis/config/validation).
	if c.MaxOpenFiles < 0 {
		errs = append(errs, field.Invalid(field.NewPath("maxOpenFiles"), c.MaxOpenFiles, "must not be a negative number"))
	}
	if c.OOMScoreAdj < -1000 || c.OOMScoreAdj > 1000 {
		errs = append(errs, field.Invalid(field.NewPath("oomScoreAdj"), c.OOMScoreAdj, "must be between -1000 and 1000, inclusive"))
	}
	if c.PodsPerCore < 0 {
		errs = append(errs, field.Invalid(field.NewPath("podsPerCore"), c.PodsPerCore, "must not be a negative number"))
	}
	if c.MaxPods <= 0 {
		errs = append(errs, field.Invalid(field.NewPath("maxPods"), c.MaxPods, "must be greater than 0"))
	}
	errs = append(errs, positiveDuration(c.SyncFrequency, field.NewPath("syncFrequency"))...)
	errs = append(errs, positiveDuration(c.FileCheckFrequency, field.NewPath("fileCheckFrequency"))...)
	errs = append(errs, positiveDuration(c.RuntimeRequestTimeout, field.NewPath("runtimeRequestTimeout"))...)
	if d := c.StreamingConnectionIdleTimeout.Duration; d < 0 {
		errs = append(errs, field.Invalid(field.NewPath("streamingConnectionIdleTimeout"), d.String(), "must be greater than or equal to 0 (no idle timeout)"))
	}
	errs = append(errs, validateReserved(c.SystemReserved, field.NewPath("systemReserved"))...)
	errs = append(errs, validateReserved(c.KubeReserved, field.NewPath("kubeReserved"))...)
	errs = append(errs, validateEviction(c.EvictionHard, field.NewPath("evictionHard"))...)
	if c.EvictionPressureTransitionPeriod.Duration < 0 {
		errs = append(errs, field.Invalid(field.NewPath("evictionPressureTransitionPeriod"), c.EvictionPressureTransitionPeriod.Duration.String(), "must be greater than or equal to 0"))
	}
	softErrs, softWarnings := validateSoftEviction(c)
	errs, warnings = append(errs, softErrs...), append(warnings, softWarnings...)
	tlsErrs, tlsWarnings := validateTLS(c)
	errs, warnings = append(errs, tlsErrs...), append(warnings, tlsWarnings...)
	errs = append(errs, validateImageGC(c)...)
	errs = append(errs, validateShutdown(c)...)
	errs = append(errs, validateCPUManager(c)...)
	errs = append(errs, validateCPUCFSQuota(c)...)
	errs = append(errs, validateTopologyManager(c)...)

	// Endpoints.
	if c.HealthzPort < 0 || c.HealthzPort > 65535 {
		errs = append(errs, field.Invalid(field.NewPath("healthzPort"), c.HealthzPort, "must be between 0 (disabled) and 65535"))
	} else if what, ok := reservedPorts[c.HealthzPort]; ok {
		warnings = append(warnings, fmt.Sprintf("healthzPort: %d is the %s port; it fails to bind if that component runs on this node", c.HealthzPort, what))
	}
	if c.HealthzPort != 0 {
		if p := field.NewPath("healthzBindAddress"); c.HealthzBindAddress == "" {
			errs = append(errs, field.Required(p, "an IP address to serve the health endpoints on (or set healthzPort to 0)"))
		} else if net.ParseIP(c.HealthzBindAddress) == nil {
			errs = append(errs, field.Invalid(p, c.HealthzBindAddress, "must be an IP address"))
		}
	} else if c.HealthzBindAddress != "" && net.ParseIP(c.HealthzBindAddress) == nil {
		errs = append(errs, field.Invalid(field.NewPath("healthzBindAddress"), c.HealthzBindAddress, "must be an IP address"))
	}

	errs = append(errs, validateNodeAPI(c)...)

	// Node.
	errs = append(errs, validateNodeLabels(c.NodeLabels, field.NewPath("nodeLabels"))...)
	errs = append(errs, validateTaints(c.RegisterWithTaints, field.NewPath("registerWithTaints"))...)
	if c.NodeIP != "" && net.ParseIP(c.NodeIP) == nil {
		errs = append(errs, field.Invalid(field.NewPath("nodeIP"), c.NodeIP, "must be an IP address or empty (the address of the default route's interface)"))
	}
	if c.HostnameOverride != "" {
		for _, msg := range validation.IsDNS1123Subdomain(c.HostnameOverride) {
			errs = append(errs, field.Invalid(field.NewPath("hostnameOverride"), c.HostnameOverride, msg))
		}
	}

	// Files.
	errs = append(errs, absPathRequired(c.Kubeconfig, field.NewPath("kubeconfig"))...)
	errs = append(errs, absPathRequired(c.RootDir, field.NewPath("rootDir"))...)
	if c.BootstrapKubeconfig != "" {
		errs = append(errs, absPathRequired(c.BootstrapKubeconfig, field.NewPath("bootstrapKubeconfig"))...)
	}
	if c.CertDir != "" {
		errs = append(errs, absPathRequired(c.CertDir, field.NewPath("certDir"))...)
	}

	errs = append(errs, validateAPIClients(c)...)

	// Pod networking and DNS.
	for i, s := range c.ClusterDNS {
		if net.ParseIP(s) == nil {
			errs = append(errs, field.Invalid(field.NewPath("clusterDNS").Index(i), s, "must be an IP address"))
		}
	}
	if d := c.ClusterDomain; d != "" {
		for _, msg := range validation.IsDNS1123Subdomain(strings.TrimSuffix(d, ".")) {
			errs = append(errs, field.Invalid(field.NewPath("clusterDomain"), d, msg))
		}
	}
	if c.ResolvConf != "" && !filepath.IsAbs(c.ResolvConf) {
		errs = append(errs, field.Invalid(field.NewPath("resolvConf"), c.ResolvConf, "must be an absolute path or empty (no host resolver file)"))
	}
	errs = append(errs, validateImages(c)...)
	if c.CNIConfDir != "" && !filepath.IsAbs(c.CNIConfDir) {
		errs = append(errs, field.Invalid(field.NewPath("cniConfDir"), c.CNIConfDir, "must be an absolute path or empty (pod networking disabled)"))
	}
	if bins := c.CNIBinDirs(); c.CNIConfDir != "" && len(bins) == 0 {
		errs = append(errs, field.Required(field.NewPath("cniBinDir"), "a comma-separated list of directories holding CNI plugins, such as "+DefaultCNIBinDir))
	} else {
		for _, d := range bins {
			if !filepath.IsAbs(d) {
				errs = append(errs, field.Invalid(field.NewPath("cniBinDir"), c.CNIBinDir, fmt.Sprintf("%q must be an absolute path", d)))
			}
		}
	}

	// Pod security.
	for i, s := range c.AllowedUnsafeSysctls {
		if err := validateSysctlPattern(s); err != nil {
			errs = append(errs, field.Invalid(field.NewPath("allowedUnsafeSysctls").Index(i), s, err.Error()))
		}
	}

	errs = append(errs, validateCgroups(c)...)
	errs = append(errs, validateFeatureGates(c)...)
	if n := c.UserNamespaces.IDsPerPod; n < 65536 {
		errs = append(errs, field.Invalid(field.NewPath("userNamespaces", "idsPerPod"), n, "userNamespaces.idsPerPod must not be less than 65536"))
	} else if n%65536 != 0 {
		errs = append(errs, field.Invalid(field.NewPath("userNamespaces", "idsPerPod"), n, "userNamespaces.idsPerPod must be a multiple of 65536"))
	} else if n > math.MaxUint32 {
		errs = append(errs, field.Invalid(field.NewPath("userNamespaces", "idsPerPod"), n, fmt.Sprintf("userNamespaces.idsPerPod must not be more than %d", int64(math.MaxUint32))))
	}
	errs = append(errs, validateImagePullCredentials(c)...)

	for _, h := range slices.Sorted(maps.Keys(c.RuntimeHandlers)) {
		p := field.NewPath("runtimeHandlers").Key(h)
		for _, msg := range validation.IsDNS1123Label(h) {
			errs = append(errs, field.Invalid(p, h, msg))
		}
		if c.RuntimeHandlers[h] == "" {
			errs = append(errs, field.Required(p, "a containerd runtime type, such as io.containerd.runc.v2"))
		}
	}

	// Logging.
	if p := field.NewPath("logging", "format"); c.Logging.Format != "text" && c.Logging.Format != "json" {
		errs = append(errs, field.NotSupported(p, c.Logging.Format, []string{"text", "json"}))
	}
	if c.Logging.Verbosity < 0 {
		errs = append(errs, field.Invalid(field.NewPath("logging", "verbosity"), c.Logging.Verbosity, "must be greater than or equal to 0"))
	}

	// PLEG.
	pp := field.NewPath("pleg")
	errs = append(errs, positiveDuration(c.PLEG.RelistPeriod, pp.Child("relistPeriod"))...)
	errs = append(errs, positiveDuration(c.PLEG.FallbackRelistPeriod, pp.Child("fallbackRelistPeriod"))...)
	errs = append(errs, positiveDuration(c.PLEG.HealthThreshold, pp.Child("healthThreshold"))...)
	if f, r := c.PLEG.FallbackRelistPeriod.Duration, c.PLEG.RelistPeriod.Duration; f > 0 && r > 0 && f > r {
		errs = append(errs, field.Invalid(pp.Child("fallbackRelistPeriod"), f.String(), fmt.Sprintf("must not be greater than pleg.relistPeriod (%s)", r)))
	}
	if h, f := c.PLEG.HealthThreshold.Duration, c.PLEG.FallbackRelistPeriod.Duration; h > 0 && f > 0 && h <= f {
		errs = append(errs, field.Invalid(pp.Child("healthThreshold"), h.String(), fmt.Sprintf("must be greater than pleg.fallbackRelistPeriod (%s)", f)))
	}
	seen := map[string]bool{}
	for i, s := range c.PLEG.EventSources {
		p := pp.Child("eventSources").Index(i)
		switch {
		case s != EventSourceCgroups && s != EventSourceContainerd:
			errs = append(errs, field.NotSupported(p, s, []string{EventSourceCgroups, EventSourceContainerd}))
		case seen[s]:
			errs = append(errs, field.Duplicate(p, s))
		}
		seen[s] = true
	}
	return errs, warnings
}

func positiveDuration(d metav1.Duration, p *field.Path) field.ErrorList {
	if d.Duration <= 0 {
		return field.ErrorList{field.Invalid(p, d.Duration.String(), "must be greater than 0")}
	}
	return nil
}

func absPathRequired(s string, p *field.Path) field.ErrorList {
	switch {
	case s == "":
		return field.ErrorList{field.Required(p, "an absolute path")}
	case !filepath.IsAbs(s):
		return field.ErrorList{field.Invalid(p, s, "must be an absolute path")}
	}
	return nil
}

func validateEndpoint(s string, p *field.Path) field.ErrorList {
	if s == "" {
		return field.ErrorList{field.Required(p, "the containerd socket as a unix:// URL, such as "+DefaultContainerRuntimeEndpoint)}
	}
	u, err := url.Parse(s)
	if err != nil || u.Scheme != "unix" || u.Host != "" || !filepath.IsAbs(u.Path) || u.RawQuery != "" || u.Fragment != "" {
		return field.ErrorList{field.Invalid(p, s, "must be a unix:// URL with an absolute socket path, such as "+DefaultContainerRuntimeEndpoint)}
	}
	return nil
}

func validateReserved(m map[string]string, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	for _, k := range slices.Sorted(maps.Keys(m)) {
		kp := p.Key(k)
		if !contains(reservableResources, k) {
			errs = append(errs, field.NotSupported(kp, k, reservableResources))
			continue
		}
		q, err := resource.ParseQuantity(m[k])
		if err != nil {
			errs = append(errs, field.Invalid(kp, m[k], "must be a quantity such as \"500m\", \"1Gi\" or \"100\""))
			continue
		}
		if q.Sign() < 0 {
			errs = append(errs, field.Invalid(kp, m[k], "must not be negative"))
		}
	}
	return errs
}

func validateEviction(m map[string]string, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	for _, k := range slices.Sorted(maps.Keys(m)) {
		kp := p.Key(k)
		v := m[k]
		if !contains(evictionSignals, k) {
			errs = append(errs, field.NotSupported(kp, k, evictionSignals))
			continue
		}
		if pct, ok := strings.CutSuffix(v, "%"); ok {
			f, err := strconv.ParseFloat(pct, 64)
			if !numericRE.MatchString(pct) || err != nil {
				errs = append(errs, field.Invalid(kp, v, "must be a percentage such as \"10%\" or a quantity such as \"100Mi\""))
			} else if f > 100 {
				errs = append(errs, field.Invalid(kp, v, "must be a percentage between 0% and 100%"))
			}
			continue
		}
		q, err := resource.ParseQuantity(v)
		if err != nil {
			errs = append(errs, field.Invalid(kp, v, "must be a percentage such as \"10%\" or a quantity such as \"100Mi\""))
			continue
		}
		if q.Sign() <= 0 {
			// kubelet: "eviction threshold <signal> must be positive".
			errs = append(errs, field.Invalid(kp, v, "eviction threshold "+k+" must be positive"))
		}
	}
	return errs
}

var numericRE = regexp.MustCompile(`^[0-9]+(\.[0-9]+)?$`)

func validateNodeLabels(m map[string]string, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	for _, k := range slices.Sorted(maps.Keys(m)) {
		kp := p.Key(k)
		for _, msg := range validation.IsQualifiedName(k) {
			errs = append(errs, field.Invalid(kp, k, "label key "+msg))
		}
		for _, msg := range validation.IsValidLabelValue(m[k]) {
			errs = append(errs, field.Invalid(kp, m[k], "label value "+msg))
		}
		if isKubernetesLabel(k) && !kubeletapis.IsKubeletLabel(k) {
			errs = append(errs, field.Forbidden(kp, fmt.Sprintf(
				"labels in the kubernetes.io and k8s.io namespaces must begin with an allowed prefix (%s) or be one of %s; the NodeRestriction admission plugin rejects others",
				strings.Join(kubeletapis.KubeletLabelNamespaces(), ", "), strings.Join(kubeletapis.KubeletLabels(), ", "))))
		}
	}
	return errs
}

func isKubernetesLabel(key string) bool {
	ns, _, ok := strings.Cut(key, "/")
	if !ok {
		return false
	}
	ns = strings.ToLower(ns)
	for _, d := range []string{"kubernetes.io", "k8s.io"} {
		if ns == d || strings.HasSuffix(ns, "."+d) {
			return true
		}
	}
	return false
}

func validateTaints(taints []v1.Taint, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	effects := []string{string(v1.TaintEffectNoSchedule), string(v1.TaintEffectPreferNoSchedule), string(v1.TaintEffectNoExecute)}
	seen := map[string]bool{}
	for i, t := range taints {
		ip := p.Index(i)
		if t.Key == "" {
			errs = append(errs, field.Required(ip.Child("key"), "a taint key"))
		} else {
			for _, msg := range validation.IsQualifiedName(t.Key) {
				errs = append(errs, field.Invalid(ip.Child("key"), t.Key, msg))
			}
		}
		for _, msg := range validation.IsValidLabelValue(t.Value) {
			errs = append(errs, field.Invalid(ip.Child("value"), t.Value, msg))
		}
		if !contains(effects, string(t.Effect)) {
			errs = append(errs, field.NotSupported(ip.Child("effect"), string(t.Effect), effects))
		}
		if t.TimeAdded != nil {
			errs = append(errs, field.Forbidden(ip.Child("timeAdded"), "is set by the API server, not in configuration"))
		}
		id := t.Key + ":" + string(t.Effect)
		if seen[id] {
			errs = append(errs, field.Duplicate(ip, fmt.Sprintf("%s with effect %s", t.Key, t.Effect)))
		}
		seen[id] = true
	}
	return errs
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// validateNodeAPI checks the node API's server, authentication,
// authorization and container log fields.
func validateNodeAPI(c *NodeAgentConfiguration) field.ErrorList {
	var errs field.ErrorList
	if c.Port < 0 || c.Port > 65535 {
		errs = append(errs, field.Invalid(field.NewPath("port"), c.Port, "must be between 0 (disabled) and 65535"))
	} else if c.Port != 0 && c.Port == c.HealthzPort {
		errs = append(errs, field.Invalid(field.NewPath("port"), c.Port, "must differ from healthzPort"))
	}
	if c.ReadOnlyPort < 0 || c.ReadOnlyPort > 65535 {
		// kubelet's message, without its flag.
		errs = append(errs, field.Invalid(field.NewPath("readOnlyPort"), c.ReadOnlyPort, "must be between 0 and 65535, inclusive"))
	} else if c.ReadOnlyPort != 0 && c.ReadOnlyPort == c.HealthzPort {
		errs = append(errs, field.Invalid(field.NewPath("readOnlyPort"), c.ReadOnlyPort, "must differ from healthzPort"))
	} else if c.ReadOnlyPort != 0 && c.EnableServer && c.ReadOnlyPort == c.Port {
		errs = append(errs, field.Invalid(field.NewPath("readOnlyPort"), c.ReadOnlyPort, "must differ from port"))
	}
	if (c.Port != 0 || c.ReadOnlyPort != 0) && net.ParseIP(c.Address) == nil {
		errs = append(errs, field.Invalid(field.NewPath("address"), c.Address, "must be an IP address"))
	}
	if (c.TLSCertFile == "") != (c.TLSPrivateKeyFile == "") {
		errs = append(errs, field.Invalid(field.NewPath("tlsPrivateKeyFile"), c.TLSPrivateKeyFile, "tlsCertFile and tlsPrivateKeyFile must be set together"))
	}
	for _, f := range []struct {
		path string
		v    string
	}{{"tlsCertFile", c.TLSCertFile}, {"tlsPrivateKeyFile", c.TLSPrivateKeyFile}, {"authentication.x509.clientCAFile", c.Authentication.X509.ClientCAFile}} {
		if f.v != "" && !filepath.IsAbs(f.v) {
			errs = append(errs, field.Invalid(field.NewPath(f.path), f.v, "must be an absolute path"))
		}
	}
	for _, d := range []struct {
		path string
		v    metav1.Duration
	}{
		{"authentication.webhook.cacheTTL", c.Authentication.Webhook.CacheTTL},
		{"authorization.webhook.cacheAuthorizedTTL", c.Authorization.Webhook.CacheAuthorizedTTL},
		{"authorization.webhook.cacheUnauthorizedTTL", c.Authorization.Webhook.CacheUnauthorizedTTL},
	} {
		if d.v.Duration < 0 {
			errs = append(errs, field.Invalid(field.NewPath(d.path), d.v.Duration.String(), "must be greater than or equal to 0 (no cache)"))
		}
	}
	switch c.Authorization.Mode {
	case AuthorizationModeWebhook, AuthorizationModeAlwaysAllow:
	default:
		errs = append(errs, field.NotSupported(field.NewPath("authorization", "mode"), c.Authorization.Mode, []string{AuthorizationModeWebhook, AuthorizationModeAlwaysAllow}))
	}
	if c.EnableSystemLogQuery {
		// kubelet's checks and messages (the first names the handler
		// where it means the query).
		qp := field.NewPath("enableSystemLogQuery")
		if !c.FeatureEnabled(FeatureNodeLogQuery) {
			errs = append(errs, field.Forbidden(qp, "NodeLogQuery feature gate is required for enableSystemLogHandler"))
		}
		if !c.EnableSystemLogHandler {
			errs = append(errs, field.Forbidden(qp, "enableSystemLogHandler is required for enableSystemLogQuery"))
		}
	}
	if q, err := resource.ParseQuantity(c.ContainerLogMaxSize); err != nil {
		errs = append(errs, field.Invalid(field.NewPath("containerLogMaxSize"), c.ContainerLogMaxSize, "must be a quantity such as 10Mi"))
	} else if q.Value() <= 0 {
		errs = append(errs, field.Invalid(field.NewPath("containerLogMaxSize"), c.ContainerLogMaxSize, "must be greater than 0"))
	}
	if c.ContainerLogMaxFiles < 2 {
		errs = append(errs, field.Invalid(field.NewPath("containerLogMaxFiles"), c.ContainerLogMaxFiles, "must be greater than or equal to 2"))
	}
	errs = append(errs, validateLogsDir(c.PodLogsDir, field.NewPath("podLogsDir"))...)
	errs = append(errs, validateLogsDir(c.ContainerLogsDir, field.NewPath("containerLogsDir"))...)
	if c.PodLogsDir != "" && c.PodLogsDir == c.ContainerLogsDir {
		errs = append(errs, field.Invalid(field.NewPath("containerLogsDir"), c.ContainerLogsDir, "must not be podLogsDir"))
	}
	return errs
}

// validateLogsDir checks a log directory as kubelet checks podLogsDir:
// absolute, normalized, ASCII only (the path appears in metrics).
func validateLogsDir(s string, p *field.Path) field.ErrorList {
	if errs := absPathRequired(s, p); len(errs) > 0 {
		return errs
	}
	if filepath.Clean(s) != s {
		return field.ErrorList{field.Invalid(p, s, "must be normalized (as filepath.Clean leaves it)")}
	}
	for _, r := range s {
		if r > unicode.MaxASCII {
			return field.ErrorList{field.Invalid(p, s, "must contain ASCII characters only")}
		}
	}
	return nil
}

// ContainerLogMaxBytes is containerLogMaxSize in bytes (0 if invalid).
func (c *NodeAgentConfiguration) ContainerLogMaxBytes() int64 {
	q, err := resource.ParseQuantity(c.ContainerLogMaxSize)
	if err != nil {
		return 0
	}
	return q.Value()
}

// validateImages checks the registry and image pull fields.
func validateImages(c *NodeAgentConfiguration) field.ErrorList {
	var errs field.ErrorList
	if c.RegistryConfigPath != "" {
		for _, d := range filepath.SplitList(c.RegistryConfigPath) {
			if !filepath.IsAbs(d) {
				errs = append(errs, field.Invalid(field.NewPath("registryConfigPath"), c.RegistryConfigPath,
					"must be absolute directories separated by ':', or empty"))
				break
			}
		}
	}
	if c.ImagePullProgressTimeout.Duration < 0 {
		errs = append(errs, field.Invalid(field.NewPath("imagePullProgressTimeout"), c.ImagePullProgressTimeout.Duration.String(), "must not be negative (0 disables it)"))
	}
	if c.ImageCredentialProviderConfig != "" {
		if !filepath.IsAbs(c.ImageCredentialProviderConfig) {
			errs = append(errs, field.Invalid(field.NewPath("imageCredentialProviderConfig"), c.ImageCredentialProviderConfig, "must be an absolute path or empty"))
		}
		if c.ImageCredentialProviderBinDir == "" {
			errs = append(errs, field.Required(field.NewPath("imageCredentialProviderBinDir"), "the plugins' directory is required with imageCredentialProviderConfig"))
		}
	}
	errs = append(errs, validateImagePulls(c)...)
	if c.ImageCredentialProviderBinDir != "" && !filepath.IsAbs(c.ImageCredentialProviderBinDir) {
		errs = append(errs, field.Invalid(field.NewPath("imageCredentialProviderBinDir"), c.ImageCredentialProviderBinDir, "must be an absolute path or empty"))
	}
	return errs
}

// validateAPIClients checks the API clients' rates (kubelet's message for
// a negative one) and content type. A QPS above 0 needs a burst above 0:
// client-go refuses to build such a client (in a KubeletConfiguration a
// burst of 0 means the default, so this is reached only from a
// NodeAgentConfiguration).
func validateAPIClients(c *NodeAgentConfiguration) field.ErrorList {
	var errs field.ErrorList
	for _, r := range []struct {
		qpsField, burstField string
		qps, burst           int32
	}{
		{"kubeAPIQPS", "kubeAPIBurst", c.KubeAPIQPS, c.KubeAPIBurst},
		{"eventRecordQPS", "eventBurst", c.EventRecordQPS, c.EventBurst},
	} {
		if r.qps < 0 {
			errs = append(errs, field.Invalid(field.NewPath(r.qpsField), r.qps, "must not be a negative number"))
		}
		if r.burst < 0 {
			errs = append(errs, field.Invalid(field.NewPath(r.burstField), r.burst, "must not be a negative number"))
		} else if r.burst == 0 && r.qps > 0 {
			errs = append(errs, field.Invalid(field.NewPath(r.burstField), r.burst, fmt.Sprintf("must be greater than 0 when %s is greater than 0", r.qpsField)))
		}
	}
	switch c.ContentType {
	case ContentTypeProtobuf, ContentTypeJSON:
	default:
		errs = append(errs, field.NotSupported(field.NewPath("contentType"), c.ContentType, []string{ContentTypeProtobuf, ContentTypeJSON}))
	}
	return errs
}

// validateImagePulls checks the image pull limits with kubelet's rules and
// wording (pkg/kubelet/apis/config/validation), naming the field. A burst
// of 0 under a QPS above 0 would let no pull through; kubelet's
// defaulting makes it unreachable there (0 means the default in a
// KubeletConfiguration), so it is refused here.
func validateImagePulls(c *NodeAgentConfiguration) field.ErrorList {
	var errs field.ErrorList
	if c.RegistryBurst < 0 {
		errs = append(errs, field.Invalid(field.NewPath("registryBurst"), c.RegistryBurst, "must not be a negative number"))
	} else if c.RegistryBurst == 0 && c.RegistryPullQPS > 0 {
		errs = append(errs, field.Invalid(field.NewPath("registryBurst"), c.RegistryBurst, "must be greater than 0 when registryPullQPS is greater than 0"))
	}
	if c.RegistryPullQPS < 0 {
		errs = append(errs, field.Invalid(field.NewPath("registryPullQPS"), c.RegistryPullQPS, "must not be a negative number"))
	}
	if n := c.MaxParallelImagePulls; n != nil {
		if *n < 1 {
			errs = append(errs, field.Invalid(field.NewPath("maxParallelImagePulls"), *n, "must be a positive number"))
		} else if *n > 1 && c.ImagePullsSerialized() {
			errs = append(errs, field.Invalid(field.NewPath("maxParallelImagePulls"), *n, "cannot be larger than 1 unless serializeImagePulls is set to false"))
		}
	}
	return errs
}

// ImagePullsSerialized is serializeImagePulls, or kubelet's default for
// it when unset (true unless maxParallelImagePulls is 2 or more).
func (c *NodeAgentConfiguration) ImagePullsSerialized() bool {
	if c.SerializeImagePulls != nil {
		return *c.SerializeImagePulls
	}
	return c.MaxParallelImagePulls == nil || *c.MaxParallelImagePulls < 2
}
