package config

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

// featureGate is a kubelet feature gate nodeagent knows: its default in
// Kubernetes 1.34 (the version nodeagent matches) and whether nodeagent
// implements the other value too. A gate set to its default is accepted
// (it changes nothing); set to the other value it is accepted only when
// both values are implemented, and refused by name otherwise, so that a
// node never silently runs differently from what its gates say. A gate
// nodeagent does not know is refused, as kubelet refuses a gate it does
// not recognize.
type featureGate struct {
	def  bool
	both bool
	what string // what the gate turns on, for the refusal
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
)

var featureGates = map[string]featureGate{
	FeaturePodLevelResources: {def: true, both: true, what: "pod-level resources"},
	FeatureImageVolume:       {def: false, both: true, what: "image volumes"},
	// On by default in 1.34 and implemented on; off is not implemented.
	"InPlacePodVerticalScaling":     {def: true, what: "in-place pod resize"},
	"PodObservedGenerationTracking": {def: true, what: "observedGeneration in the pod status"},
	"SidecarContainers":             {def: true, what: "sidecar containers"},
}

// KnownFeatureGates lists the feature gates nodeagent accepts, sorted.
func KnownFeatureGates() []string { return slices.Sorted(maps.Keys(featureGates)) }

// FeatureEnabled reports whether the feature gate name is on: as set in
// featureGates, else its Kubernetes 1.34 default (false for a gate
// nodeagent does not know, which validation refuses anyway).
func (c *NodeAgentConfiguration) FeatureEnabled(name string) bool {
	if v, ok := c.FeatureGates[name]; ok {
		return v
	}
	return featureGates[name].def
}

func validateFeatureGates(gates map[string]bool, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	for _, name := range slices.Sorted(maps.Keys(gates)) {
		v := gates[name]
		g, ok := featureGates[name]
		switch {
		case !ok:
			errs = append(errs, field.Invalid(p.Key(name), v,
				fmt.Sprintf("not supported: nodeagent does not implement this feature gate (it accepts %s); remove it", strings.Join(KnownFeatureGates(), ", "))))
		case v != g.def && !g.both:
			errs = append(errs, field.Invalid(p.Key(name), v,
				fmt.Sprintf("not supported: nodeagent implements %s only with the gate %v (the Kubernetes 1.34 default); remove the gate", g.what, g.def)))
		}
	}
	return errs
}
