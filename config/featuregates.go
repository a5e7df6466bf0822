package config

import (
	"fmt"
	"maps"
	"slices"
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
		field := "featureGates." + name
		val, ok := m[name].(bool)
		if !ok {
			probs = append(probs, Problem{Source: source, Field: field, Detail: fmt.Sprintf("invalid value %v: must be true or false", m[name])})
			continue
		}
		g, known := kubeletGates[name]
		switch {
		case !known:
			probs = append(probs, Problem{Source: source, Field: field, Detail: "unrecognized feature gate: " + name})
		case g.Locked && val != g.Default:
			probs = append(probs, Problem{Source: source, Field: field, Detail: fmt.Sprintf("cannot set feature gate %s to %v, feature is locked to %v", name, val, g.Default)})
		case val == g.Default:
		case gatesImplemented[name] != "":
			probs = append(probs, Problem{Source: source, Field: field, Detail: fmt.Sprintf("%v is not supported: nodeagent implements %s (on by default in kubelet 1.34) and cannot turn it off; remove the gate", val, gatesImplemented[name])})
		default:
			probs = append(probs, Problem{Source: source, Field: field, Detail: fmt.Sprintf("%v is not supported: nodeagent does not implement this gate's non-default behaviour (kubelet 1.34's default is %v); remove the gate", val, g.Default)})
		}
	}
	return probs
}
