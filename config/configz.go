package config

import (
	"encoding/json"
	"fmt"

	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"
)

// KubeletConfigz is cfg as kubelet's /configz shows its configuration:
// {"kubeletconfig": <KubeletConfiguration v1beta1, without kind and
// apiVersion>}, holding the fields nodeagent shares with kubelet (same
// name, type and meaning; KubeletSupportedFields) with their effective
// values. Fields of kubelet's that nodeagent does not have are absent
// rather than shown with values nodeagent does not use.
func KubeletConfigz(cfg *NodeAgentConfiguration) ([]byte, error) {
	b, err := json.Marshal(cfg)
	if err != nil {
		return nil, fmt.Errorf("configz: %w", err)
	}
	var all map[string]any
	if err := json.Unmarshal(b, &all); err != nil {
		return nil, fmt.Errorf("configz: %w", err)
	}
	shared := map[string]any{}
	for k, v := range all {
		if kubeletSupported[k] {
			shared[k] = v
		}
	}
	// Unset in the file, serializeImagePulls is kubelet's default for
	// maxParallelImagePulls, which kubelet's configz shows.
	shared["serializeImagePulls"] = cfg.ImagePullsSerialized()
	if lm, ok := all["logging"].(map[string]any); ok {
		sub := map[string]any{}
		for k := range kubeletLoggingSupported {
			if v, ok := lm[k]; ok {
				sub[k] = v
			}
		}
		shared["logging"] = sub
	}
	// Checked against kubelet's own type, so that what is served has its
	// shape; served as it is, since the type would add fields nodeagent
	// does not have, with zero values (httpCheckFrequency "0s").
	b, err = json.Marshal(shared)
	if err != nil {
		return nil, fmt.Errorf("configz: %w", err)
	}
	var kc kubeletv1beta1.KubeletConfiguration
	if err := json.Unmarshal(b, &kc); err != nil {
		return nil, fmt.Errorf("configz: as a KubeletConfiguration: %w", err)
	}
	return json.Marshal(map[string]any{"kubeletconfig": shared})
}
