package config

import (
	"fmt"
	"maps"
	"slices"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/nodeagent/nodeagent/pods/pullmanager"
)

// gateDefault is a kubelet feature gate's default at 1.34 and whether it
// is locked to it.
type gateDefault struct{ Default, Locked bool }

// gatesImplemented are the default-on kubelet gates whose features
// nodeagent implements (always on: it cannot turn them off).
var gatesImplemented = map[string]string{
	"InPlacePodVerticalScaling":     "in-place pod resize",
	"PodObservedGenerationTracking": "observedGeneration in pod status",
	"UserNamespacesSupport":         "user namespaces (hostUsers: false)",
	"ProcMountType":                 "procMount Unmasked with hostUsers: false",
	"SidecarContainers":             "sidecar containers",
	// With cpuManagerPolicy static; nothing to do with none.
	"DisableCPUQuotaWithExclusiveCPUs": "no CFS quota for containers with exclusive CPUs (static CPU manager policy)",
}

// Feature gate names nodeagent reads.
const (
	// FeaturePodLevelResources: spec.resources (beta, on by default in
	// 1.34). Off, pods with pod-level resources are rejected
	// (PodLevelResourcesNotSupported), as kubelet does.
	FeaturePodLevelResources = "PodLevelResources"
	// FeatureImageVolume: the volume source `image` (beta, off by default
	// in 1.34). On, image volumes are mounted read-only; off, pods with
	// one are rejected naming the field.
	FeatureImageVolume = "ImageVolume"
	// FeatureSecretPulledImages: off (1.34's default), cached images are
	// served to any pod; on, package pods/pullmanager checks credentials.
	FeatureSecretPulledImages = "KubeletEnsureSecretPulledImages"
	// FeatureGracefulNodeShutdownBasedOnPodPriority:
	// shutdownGracePeriodByPodPriority (beta, on by default in 1.34).
	FeatureGracefulNodeShutdownBasedOnPodPriority = "GracefulNodeShutdownBasedOnPodPriority"
	// FeatureCustomCPUCFSQuotaPeriod: a cpuCFSQuotaPeriod other than
	// 100ms (alpha, off); nodeagent does not implement it.
	FeatureCustomCPUCFSQuotaPeriod = "CustomCPUCFSQuotaPeriod"
	// FeatureKubeletPSI: pressure stall information in /stats/summary and
	// cAdvisor's container_pressure_* metrics (beta, on by default in
	// 1.34); off, neither, as kubelet.
	FeatureKubeletPSI = "KubeletPSI"
	// FeatureContainerCheckpoint: the node API's /checkpoint (beta, on by
	// default in 1.34); off, the path is not served, as kubelet.
	FeatureContainerCheckpoint = "ContainerCheckpoint"
	// FeatureCSIVolumeHealth: the volume condition of CSI drivers with
	// VOLUME_CONDITION in the volume stats (volumeHealthStats in
	// /stats/summary, kubelet_volume_stats_health_status_abnormal) and
	// kubelet's VolumeConditionAbnormal Event (alpha, off by default in
	// 1.34); off, none of them, as kubelet.
	FeatureCSIVolumeHealth = "CSIVolumeHealth"
	// FeatureNodeLogQuery: kubelet's node log query on /logs/ (beta, off
	// by default in 1.34), served with enableSystemLogQuery; the gate
	// alone changes nothing, as in kubelet.
	FeatureNodeLogQuery = "NodeLogQuery"
)

// gatesHonoured are the gates nodeagent implements with both values.
var gatesHonoured = map[string]bool{
	FeaturePodLevelResources:   true,
	FeatureImageVolume:         true,
	FeatureSecretPulledImages:  true,
	FeatureKubeletPSI:          true,
	FeatureContainerCheckpoint: true,
	FeatureCSIVolumeHealth:     true,
	FeatureNodeLogQuery:        true,
	// Off, shutdownGracePeriodByPodPriority is refused, as in kubelet.
	FeatureGracefulNodeShutdownBasedOnPodPriority: true,
}

// FeatureEnabled reports whether the feature gate name is on: as set in
// featureGates, else kubelet 1.34's default (false for a gate kubelet does
// not know, which validation refuses anyway).
func (c *NodeAgentConfiguration) FeatureEnabled(name string) bool {
	if v, ok := c.FeatureGates[name]; ok {
		return v
	}
	return kubeletGates[name].Default
}

// SecretPulledImages reports whether KubeletEnsureSecretPulledImages is
// on.
func (c *NodeAgentConfiguration) SecretPulledImages() bool {
	return c.FeatureEnabled(FeatureSecretPulledImages)
}

// featureGateProblems checks a KubeletConfiguration's featureGates as a
// v1.34 kubelet would and as nodeagent can honour them: a gate kubelet
// does not know is refused with kubelet's message, as is a locked gate set
// against its lock; a gate set to kubelet's 1.34 default is accepted
// (nodeagent behaves as that default); any other value is refused, naming
// featureGates.<gate>, since nodeagent would not behave as kubelet with it.
func featureGateProblems(source string, v any) []Problem {
	m, _ := v.(map[string]any)
	var probs []Problem
	for _, name := range slices.Sorted(maps.Keys(m)) {
		if d := gateDetail(name, m[name]); d != "" {
			probs = append(probs, Problem{Source: source, Field: "featureGates." + name, Detail: d})
		}
	}
	return probs
}

// gateDetail is why gate name set to v is refused ("" if it is not).
func gateDetail(name string, v any) string {
	val, ok := v.(bool)
	if !ok {
		return fmt.Sprintf("invalid value %v: must be true or false", v)
	}
	g, known := kubeletGates[name]
	switch {
	case !known:
		return "unrecognized feature gate: " + name
	case g.Locked && val != g.Default:
		return fmt.Sprintf("cannot set feature gate %s to %v, feature is locked to %v", name, val, g.Default)
	case val == g.Default, gatesHonoured[name]:
		return ""
	case gatesImplemented[name] != "":
		return fmt.Sprintf("%v is not supported: nodeagent implements %s (on by default in kubelet 1.34) and cannot turn it off; remove the gate", val, gatesImplemented[name])
	}
	return fmt.Sprintf("%v is not supported: nodeagent does not implement this gate's non-default behaviour (kubelet 1.34's default is %v); remove the gate", val, g.Default)
}

// validateImagePullCredentials checks the gate's fields as kubelet does
// (its messages).
func validateImagePullCredentials(c *NodeAgentConfiguration) field.ErrorList {
	var errs field.ErrorList
	policy, allow := c.ImagePullCredentialsVerificationPolicy, c.PreloadedImagesVerificationAllowlist
	pp, ap := field.NewPath("imagePullCredentialsVerificationPolicy"), field.NewPath("preloadedImagesVerificationAllowlist")
	if !c.SecretPulledImages() {
		if policy != "" {
			errs = append(errs, field.Forbidden(pp, "`imagePullCredentialsVerificationPolicy` must not be set if KubeletEnsureSecretPulledImages feature gate is not enabled"))
		}
		if len(allow) > 0 {
			errs = append(errs, field.Forbidden(ap, "`preloadedImagesVerificationAllowlist` must not be set if KubeletEnsureSecretPulledImages feature gate is not enabled"))
		}
		return errs
	}
	switch policy {
	case "", pullmanager.NeverVerify, pullmanager.NeverVerifyPreloadedImages, pullmanager.NeverVerifyAllowlistedImages, pullmanager.AlwaysVerify:
	default:
		errs = append(errs, field.NotSupported(pp, policy, []string{pullmanager.NeverVerify, pullmanager.NeverVerifyPreloadedImages, pullmanager.NeverVerifyAllowlistedImages, pullmanager.AlwaysVerify}))
	}
	if len(allow) > 0 && policy != pullmanager.NeverVerifyAllowlistedImages {
		errs = append(errs, field.Invalid(ap, allow, "can't set `preloadedImagesVerificationAllowlist` if `imagePullCredentialsVertificationPolicy` is not \"NeverVerifyAllowlistedImages\""))
	} else if err := pullmanager.ValidateAllowlist(allow); err != nil {
		errs = append(errs, field.Invalid(ap, allow, "invalid image pattern in `preloadedImagesVerificationAllowlist`: "+err.Error()))
	}
	return errs
}

// validateFeatureGates is featureGateProblems for a loaded configuration.
func validateFeatureGates(c *NodeAgentConfiguration) field.ErrorList {
	var errs field.ErrorList
	for _, name := range slices.Sorted(maps.Keys(c.FeatureGates)) {
		if d := gateDetail(name, c.FeatureGates[name]); d != "" {
			errs = append(errs, field.Invalid(field.NewPath("featureGates").Key(name), c.FeatureGates[name], d))
		}
	}
	return errs
}
