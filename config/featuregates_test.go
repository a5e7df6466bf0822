package config

import "testing"

func TestFeatureEnabled(t *testing.T) {
	c := Default()
	if !c.FeatureEnabled(FeaturePodLevelResources) {
		t.Error("PodLevelResources off by default; it is on in Kubernetes 1.34")
	}
	c.FeatureGates = map[string]bool{FeaturePodLevelResources: false}
	if c.FeatureEnabled(FeaturePodLevelResources) {
		t.Error("PodLevelResources: false not honoured")
	}
	if c.FeatureEnabled("NoSuchGate") {
		t.Error("an unknown gate is on")
	}
}
