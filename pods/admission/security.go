package admission

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	utilsysctl "k8s.io/component-helpers/node/util/sysctl"
)

// Reasons of kubelet's security admission handlers.
const (
	// ReasonPodOSNotSupported: the pod's OS is not the node's (Linux).
	ReasonPodOSNotSupported = "PodOSNotSupported"
	// ReasonPodOSSelectorNodeLabelDoesNotMatch: the pod's kubernetes.io/os
	// label (kubelet reads the label, not the nodeSelector) is not linux.
	ReasonPodOSSelectorNodeLabelDoesNotMatch = "PodOSSelectorNodeLabelDoesNotMatch"
	// ReasonSysctlForbidden: a sysctl is neither safe nor allowed.
	ReasonSysctlForbidden = "SysctlForbidden"
	// ReasonAppArmor: an AppArmor profile on a host without AppArmor.
	ReasonAppArmor = "AppArmor"
	// ReasonSupplementalGroupsPolicyNotSupported: supplementalGroupsPolicy
	// Strict on a node that does not advertise it.
	ReasonSupplementalGroupsPolicyNotSupported = "SupplementalGroupsPolicyNotSupported"
)

// SecurityOptions are the node's settings for AdmitSecurity.
type SecurityOptions struct {
	// SafeSysctls are the sysctls every pod may set (SafeSysctls).
	SafeSysctls []string
	// AllowedUnsafeSysctls are further sysctls or patterns ending in "*"
	// (kubelet's allowedUnsafeSysctls, validated by the config package).
	AllowedUnsafeSysctls []string
	// AppArmorEnabled: the host enforces AppArmor.
	AppArmorEnabled bool
	// StrictSupplementalGroups: the node advertises
	// supplementalGroupsPolicy Strict (status.features). Without it a pod
	// asking for Strict is rejected, as kubelet does.
	StrictSupplementalGroups bool
	// SELinuxEnabled: the host has SELinux. nodeagent does not label
	// containers, so seLinuxOptions are refused there and ignored
	// elsewhere (as a runtime does without SELinux).
	SELinuxEnabled bool
	// PodLevelResourcesDisabled: the feature gate PodLevelResources is
	// off (config featureGates); AdmitFeatures rejects pods with
	// pod-level resources as kubelet does.
	PodLevelResourcesDisabled bool
	// ImageVolume: the feature gate ImageVolume is on (config
	// featureGates; off by default in 1.34): image volumes are mounted.
	// Off, AdmitFeatures rejects pods with image volumes.
	ImageVolume bool
}

// safeSysctls is kubelet's safe set (v1.34), with the kernel version from
// which each is namespaced ("" always).
var safeSysctls = []struct{ name, kernel string }{
	{"kernel.shm_rmid_forced", ""},
	{"net.ipv4.ip_local_port_range", ""},
	{"net.ipv4.tcp_syncookies", ""},
	{"net.ipv4.ping_group_range", ""},
	{"net.ipv4.ip_unprivileged_port_start", ""},
	{"net.ipv4.ip_local_reserved_ports", "3.16"},
	{"net.ipv4.tcp_keepalive_time", "4.5"},
	{"net.ipv4.tcp_fin_timeout", "4.6"},
	{"net.ipv4.tcp_keepalive_intvl", "4.5"},
	{"net.ipv4.tcp_keepalive_probes", "4.5"},
	{"net.ipv4.tcp_rmem", "4.15"},
	{"net.ipv4.tcp_wmem", "4.15"},
}

// SafeSysctls is kubelet's safe sysctl list for a kernel release (uname
// -r, "6.1.0-18-amd64"): sysctls namespaced only from some kernel version
// are left out on older kernels (and when the release does not parse).
func SafeSysctls(kernelRelease string) []string {
	major, minor, ok := parseKernel(kernelRelease)
	var out []string
	for _, s := range safeSysctls {
		if s.kernel != "" {
			wmaj, wmin, _ := parseKernel(s.kernel)
			if !ok || major < wmaj || (major == wmaj && minor < wmin) {
				continue
			}
		}
		out = append(out, s.name)
	}
	return out
}

func parseKernel(r string) (int, int, bool) {
	majS, rest, ok := strings.Cut(r, ".")
	if !ok {
		return 0, 0, false
	}
	end := strings.IndexFunc(rest, func(c rune) bool { return c < '0' || c > '9' })
	if end >= 0 {
		rest = rest[:end]
	}
	major, err1 := strconv.Atoi(majS)
	minor, err2 := strconv.Atoi(rest)
	return major, minor, err1 == nil && err2 == nil
}

// sysctlAllowed is kubelet's allowlist check of one sysctl.
func sysctlAllowed(name string, o SecurityOptions, hostNet, hostIPC bool) error {
	name = utilsysctl.NormalizeName(name)
	match := func(p string) bool {
		_, s, prefixed := utilsysctl.GetNamespace(p)
		if prefixed {
			return strings.HasPrefix(name, s)
		}
		return name == s
	}
	allowed := false
	for _, p := range o.SafeSysctls {
		allowed = allowed || match(p)
	}
	for _, p := range o.AllowedUnsafeSysctls {
		allowed = allowed || match(p)
	}
	if !allowed {
		return fmt.Errorf("%q not allowlisted", name)
	}
	ns, _, _ := utilsysctl.GetNamespace(name)
	if (ns == utilsysctl.IPCNamespace && hostIPC) || (ns == utilsysctl.NetNamespace && hostNet) {
		return fmt.Errorf("%q not allowed with host %s enabled", name, ns)
	}
	return nil
}

// AdmitSecurity is kubelet's admission of a pod's OS, sysctls and AppArmor
// profiles (its predicate, sysctl and AppArmor admit handlers), with their
// reasons and messages; and, on an SELinux host, the refusal of
// seLinuxOptions (UnsupportedPodSpec).
func AdmitSecurity(pod *v1.Pod, o SecurityOptions) (ok bool, reason, message string) {
	if os, set := pod.Labels[v1.LabelOSStable]; set && os != string(v1.Linux) {
		return false, ReasonPodOSSelectorNodeLabelDoesNotMatch, "Failed to admit pod as the `kubernetes.io/os` label doesn't match node label"
	}
	if pod.Spec.OS != nil && pod.Spec.OS.Name != v1.Linux {
		return false, ReasonPodOSNotSupported, "Failed to admit pod as the OS field doesn't match node OS"
	}
	if sc := pod.Spec.SecurityContext; sc != nil && !o.StrictSupplementalGroups &&
		sc.SupplementalGroupsPolicy != nil && *sc.SupplementalGroupsPolicy == v1.SupplementalGroupsPolicyStrict {
		return false, ReasonSupplementalGroupsPolicyNotSupported,
			fmt.Sprintf("SupplementalGroupsPolicy=%s is not supported in this node", v1.SupplementalGroupsPolicyStrict)
	}
	if sc := pod.Spec.SecurityContext; sc != nil {
		for _, s := range sc.Sysctls {
			if err := sysctlAllowed(s.Name, o, pod.Spec.HostNetwork, pod.Spec.HostIPC); err != nil {
				return false, ReasonSysctlForbidden, fmt.Sprintf("forbidden sysctl: %v", err)
			}
		}
	}
	if !o.AppArmorEnabled && appArmorRequired(pod) {
		return false, ReasonAppArmor, fmt.Sprintf("Cannot enforce AppArmor: %v", errors.New("AppArmor is not enabled on the host"))
	}
	if o.SELinuxEnabled {
		if paths := seLinuxPaths(pod); len(paths) > 0 {
			return false, ReasonUnsupportedPodSpec, UnsupportedMessage(paths)
		}
	}
	return true, "", ""
}

// appArmorRequired: a profile other than Unconfined anywhere in the pod.
func appArmorRequired(pod *v1.Pod) bool {
	confined := func(p *v1.AppArmorProfile) bool { return p != nil && p.Type != v1.AppArmorProfileTypeUnconfined }
	if sc := pod.Spec.SecurityContext; sc != nil && confined(sc.AppArmorProfile) {
		return true
	}
	for _, cs := range [][]v1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for i := range cs {
			if sc := cs[i].SecurityContext; sc != nil && confined(sc.AppArmorProfile) {
				return true
			}
		}
	}
	for k, v := range pod.Annotations {
		if strings.HasPrefix(k, v1.DeprecatedAppArmorBetaContainerAnnotationKeyPrefix) && v != v1.DeprecatedAppArmorBetaProfileNameUnconfined {
			return true
		}
	}
	return false
}

func seLinuxPaths(pod *v1.Pod) []string {
	var out []string
	spec := field.NewPath("spec")
	if sc := pod.Spec.SecurityContext; sc != nil && sc.SELinuxOptions != nil {
		out = append(out, spec.Child("securityContext", "seLinuxOptions").String())
	}
	for _, k := range []struct {
		name string
		cs   []v1.Container
	}{{"initContainers", pod.Spec.InitContainers}, {"containers", pod.Spec.Containers}} {
		for i := range k.cs {
			if sc := k.cs[i].SecurityContext; sc != nil && sc.SELinuxOptions != nil {
				out = append(out, spec.Child(k.name).Index(i).Child("securityContext", "seLinuxOptions").String())
			}
		}
	}
	return out
}
