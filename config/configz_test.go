package config

import (
	"encoding/json"
	"testing"
)

func TestKubeletConfigz(t *testing.T) {
	cfg := Default()
	cfg.StaticPodPath = "/etc/kubernetes/manifests"
	b, err := KubeletConfigz(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		KubeletConfig map[string]any `json:"kubeletconfig"`
	}
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatalf("%v: %s", err, b)
	}
	kc := got.KubeletConfig
	if kc["staticPodPath"] != "/etc/kubernetes/manifests" || kc["nodeStatusUpdateFrequency"] != "10s" || kc["port"] != float64(10250) {
		t.Errorf("kubeletconfig %s", b)
	}
	if kc["syncFrequency"] != "1m0s" || kc["runtimeRequestTimeout"] != "2m0s" || kc["streamingConnectionIdleTimeout"] != "4h0m0s" {
		t.Errorf("kubeletconfig %s", b)
	}
	if a, _ := kc["authentication"].(map[string]any); a == nil || a["webhook"].(map[string]any)["enabled"] != true {
		t.Errorf("authentication %v", kc["authentication"])
	}
	// The image pull settings with kubelet's defaults; serializeImagePulls
	// unset is shown as kubelet's defaulting sets it.
	if kc["serializeImagePulls"] != true || kc["registryPullQPS"] != float64(5) || kc["registryBurst"] != float64(10) {
		t.Errorf("image pulls in %s", b)
	}
	if _, ok := kc["maxParallelImagePulls"]; ok {
		t.Errorf("maxParallelImagePulls served while unset: %s", b)
	}
	par := Default()
	par.MaxParallelImagePulls = new(int32)
	*par.MaxParallelImagePulls = 3
	if b, err := KubeletConfigz(par); err != nil || json.Unmarshal(b, &got) != nil ||
		got.KubeletConfig["serializeImagePulls"] != false || got.KubeletConfig["maxParallelImagePulls"] != float64(3) {
		t.Errorf("with maxParallelImagePulls 3: %s, %v", b, err)
	}
	// Only what nodeagent shares with kubelet, without kind/apiVersion
	// (kubelet's /configz has none).
	for _, k := range []string{"kind", "apiVersion", "rootDir", "netnsDir", "httpCheckFrequency"} {
		if _, ok := kc[k]; ok {
			t.Errorf("%s served: %s", k, b)
		}
	}
}
