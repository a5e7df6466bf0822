package config

import (
	"encoding/json"
	"strings"
	"testing"
)

// kubelet's debugging handler fields: its defaults, read from both file
// kinds with kubelet's meaning, shown in /configz; the node log query with
// kubelet's requirements and messages.
func TestDebuggingHandlerFields(t *testing.T) {
	d := Default()
	if !d.EnableDebuggingHandlers || !d.EnableProfilingHandler || !d.EnableDebugFlagsHandler || !d.EnableSystemLogHandler ||
		d.EnableContentionProfiling || d.EnableSystemLogQuery {
		t.Errorf("defaults: debugging %v, profiling %v, flags %v, system log %v, contention %v, log query %v; want kubelet's true, true, true, true, false, false",
			d.EnableDebuggingHandlers, d.EnableProfilingHandler, d.EnableDebugFlagsHandler, d.EnableSystemLogHandler, d.EnableContentionProfiling, d.EnableSystemLogQuery)
	}
	if !d.FeatureEnabled(FeatureContainerCheckpoint) {
		t.Error("ContainerCheckpoint is on by default in kubelet 1.34")
	}

	const kubelet = "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n"
	off := "enableDebuggingHandlers: false\nenableProfilingHandler: false\nenableDebugFlagsHandler: false\nenableSystemLogHandler: false\nenableContentionProfiling: true\nenableSystemLogQuery: false\nfeatureGates:\n  ContainerCheckpoint: false\n"
	for _, head := range []string{kubelet, hdr} {
		cfg, warnings, err := DecodeBytes("c.yaml", []byte(head+off))
		if err != nil {
			t.Fatalf("%s: %v", head, err)
		}
		if cfg.EnableDebuggingHandlers || cfg.EnableProfilingHandler || cfg.EnableDebugFlagsHandler || cfg.EnableSystemLogHandler || !cfg.EnableContentionProfiling ||
			cfg.FeatureEnabled(FeatureContainerCheckpoint) {
			t.Errorf("%s: the fields set were not taken: %+v", head, cfg)
		}
		for _, w := range warnings {
			if strings.Contains(w, "enable") {
				t.Errorf("%s: warning %q names a debugging handler field", head, w)
			}
		}
	}
	// A kubelet file that leaves them out gets kubelet's defaults.
	cfg, _, err := DecodeBytes("c.yaml", []byte(kubelet+"enableContentionProfiling: false\n"))
	if err != nil {
		t.Fatal(err)
	}
	if !cfg.EnableDebuggingHandlers || !cfg.EnableProfilingHandler || !cfg.EnableDebugFlagsHandler || !cfg.EnableSystemLogHandler {
		t.Errorf("kubelet file without the fields: %+v", cfg)
	}

	// The node log query: kubelet's requirements and messages; with the
	// gate (and the handler, on by default) it is on.
	for _, head := range []string{kubelet, hdr} {
		for _, tc := range []struct{ yaml, want string }{
			{"enableSystemLogQuery: true\n", "enableSystemLogQuery: Forbidden: NodeLogQuery feature gate is required for enableSystemLogHandler"},
			{"enableSystemLogQuery: true\nenableSystemLogHandler: false\nfeatureGates:\n  NodeLogQuery: true\n", "enableSystemLogQuery: Forbidden: enableSystemLogHandler is required for enableSystemLogQuery"},
		} {
			_, _, err := DecodeBytes("c.yaml", []byte(head+tc.yaml))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("%s%s: error %v, want %q", head, tc.yaml, err, tc.want)
			}
		}
		cfg, _, err := DecodeBytes("c.yaml", []byte(head+"enableSystemLogQuery: true\nfeatureGates:\n  NodeLogQuery: true\n"))
		if err != nil {
			t.Fatalf("%s the query with its gate: %v", head, err)
		}
		if !cfg.EnableSystemLogQuery || !cfg.EnableSystemLogHandler || !cfg.FeatureEnabled(FeatureNodeLogQuery) {
			t.Errorf("%s the query with its gate: %+v", head, cfg)
		}
		// The gate alone is accepted (and serves nothing more, as in kubelet).
		if _, _, err := DecodeBytes("c.yaml", []byte(head+"featureGates:\n  NodeLogQuery: true\n")); err != nil {
			t.Errorf("%s NodeLogQuery: true alone: %v", head, err)
		}
	}

	b, err := KubeletConfigz(Default())
	if err != nil {
		t.Fatal(err)
	}
	var z struct {
		KC map[string]any `json:"kubeletconfig"`
	}
	if err := json.Unmarshal(b, &z); err != nil {
		t.Fatal(err)
	}
	for k, want := range map[string]any{"enableDebuggingHandlers": true, "enableProfilingHandler": true, "enableDebugFlagsHandler": true,
		"enableSystemLogHandler": true, "enableContentionProfiling": false, "enableSystemLogQuery": false} {
		if z.KC[k] != want {
			t.Errorf("/configz %s = %v, want %v", k, z.KC[k], want)
		}
	}
}
