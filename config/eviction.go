package config

import "github.com/nodeagent/nodeagent/internal/evictionapi"

// mergeDefaultEviction is what kubelet 1.34 does when it loads its main
// configuration file: an evictionHard the file does not set is the
// default map (defaultAbsent already gave it); one it sets is kept as it
// is, unless mergeDefaultEvictionSettings is true, when each default
// signal it does not name is added with its default threshold. Only
// evictionHard has defaults, so evictionSoft, evictionSoftGracePeriod and
// evictionMinimumReclaim are left alone. obj is the main file's object;
// the drop-ins are merged afterwards, as in kubelet.
func mergeDefaultEviction(cfg *NodeAgentConfiguration, obj map[string]any) {
	if !cfg.MergeDefaultEvictionSettings || obj["evictionHard"] == nil {
		return
	}
	if cfg.EvictionHard == nil {
		cfg.EvictionHard = map[string]string{}
	}
	for signal, v := range evictionapi.DefaultHard() {
		if _, set := cfg.EvictionHard[signal]; !set {
			cfg.EvictionHard[signal] = v
		}
	}
}
