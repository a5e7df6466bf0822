package config

import (
	"errors"
	"strings"
	"testing"
)

// KubeletEnsureSecretPulledImages and its fields, as kubelet validates
// them; the gate and policy reach the configuration from either kind.
func TestSecretPulledImagesConfig(t *testing.T) {
	const kc = "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n"
	for _, tc := range []struct {
		desc, body string
		wantErr    string // substring of the error; "" for none
		gate       bool
		policy     string
	}{
		{"off by default, as in 1.34", "", "", false, ""},
		{"on, default policy", "featureGates:\n  KubeletEnsureSecretPulledImages: true\n", "", true, ""},
		{"on, allowlist", "featureGates:\n  KubeletEnsureSecretPulledImages: true\nimagePullCredentialsVerificationPolicy: NeverVerifyAllowlistedImages\npreloadedImagesVerificationAllowlist: [\"registry.example/team/*\"]\n", "", true, "NeverVerifyAllowlistedImages"},
		{"policy without the gate", "imagePullCredentialsVerificationPolicy: AlwaysVerify\n", "must not be set if KubeletEnsureSecretPulledImages feature gate is not enabled", false, ""},
		{"allowlist with another policy", "featureGates:\n  KubeletEnsureSecretPulledImages: true\nimagePullCredentialsVerificationPolicy: AlwaysVerify\npreloadedImagesVerificationAllowlist: [\"a.example/x\"]\n", "can't set `preloadedImagesVerificationAllowlist`", false, ""},
		{"unknown policy", "featureGates:\n  KubeletEnsureSecretPulledImages: true\nimagePullCredentialsVerificationPolicy: Sometimes\n", "imagePullCredentialsVerificationPolicy", false, ""},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			cfg, _, err := DecodeBytes("k.yaml", []byte(kc+tc.body))
			if tc.wantErr != "" {
				var ce *Error
				if !errors.As(err, &ce) || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err %v, want one with %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if cfg.SecretPulledImages() != tc.gate || cfg.ImagePullCredentialsVerificationPolicy != tc.policy {
				t.Errorf("gate %v policy %q, want %v %q", cfg.SecretPulledImages(), cfg.ImagePullCredentialsVerificationPolicy, tc.gate, tc.policy)
			}
		})
	}
	// The same in a NodeAgentConfiguration, and its gates are checked too.
	_, _, err := DecodeBytes("n.yaml", []byte("apiVersion: config.nodeagent.io/v1alpha1\nkind: NodeAgentConfiguration\nfeatureGates:\n  UserNamespacesSupport: false\n"))
	if err == nil || !strings.Contains(err.Error(), "featureGates[UserNamespacesSupport]") {
		t.Errorf("a gate nodeagent cannot honour in a NodeAgentConfiguration: %v", err)
	}
}

// userNamespaces.idsPerPod as kubelet validates it, from a
// KubeletConfiguration.
func TestUserNamespacesIDsPerPod(t *testing.T) {
	const kc = "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n"
	cfg, _, err := DecodeBytes("k.yaml", []byte(kc+"userNamespaces:\n  idsPerPod: 131072\n"))
	if err != nil || cfg.UserNamespaces.IDsPerPod != 131072 {
		t.Fatalf("%v %+v", err, cfg)
	}
	if cfg, _, _ := DecodeBytes("k.yaml", []byte(kc)); cfg.UserNamespaces.IDsPerPod != 65536 {
		t.Errorf("default %d, want kubelet's 65536", cfg.UserNamespaces.IDsPerPod)
	}
	for body, want := range map[string]string{
		"userNamespaces:\n  idsPerPod: 1000\n":   "must not be less than 65536",
		"userNamespaces:\n  idsPerPod: 100000\n": "must be a multiple of 65536",
	} {
		if _, _, err := DecodeBytes("k.yaml", []byte(kc+body)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want %q", body, err, want)
		}
	}
}

// The gates nodeagent honours both ways read as set, else as kubelet
// 1.34's default.
func TestFeatureEnabled(t *testing.T) {
	c := Default()
	if !c.FeatureEnabled(FeaturePodLevelResources) || c.FeatureEnabled(FeatureImageVolume) || !c.FeatureEnabled(FeatureKubeletPSI) || c.FeatureEnabled(FeatureCSIVolumeHealth) {
		t.Error("defaults: want PodLevelResources and KubeletPSI on and ImageVolume and CSIVolumeHealth off, as in Kubernetes 1.34")
	}
	c.FeatureGates = map[string]bool{FeaturePodLevelResources: false, FeatureImageVolume: true, FeatureKubeletPSI: false, FeatureCSIVolumeHealth: true}
	if c.FeatureEnabled(FeaturePodLevelResources) || !c.FeatureEnabled(FeatureImageVolume) || c.FeatureEnabled(FeatureKubeletPSI) || !c.FeatureEnabled(FeatureCSIVolumeHealth) {
		t.Error("gates set against their defaults not honoured")
	}
	if errs := validateFeatureGates(c); len(errs) != 0 {
		t.Errorf("honoured gates refused: %v", errs)
	}
	if c.FeatureEnabled("NoSuchGate") {
		t.Error("an unknown gate is on")
	}
}
