package config

import (
	"maps"
	"os"
	"path/filepath"
	"testing"
)

// mergeDefaultEvictionSettings as kubelet 1.34's loading of its file: with
// it, the default hard thresholds of the signals evictionHard does not
// name are added (the named ones win, {} means the defaults); without it,
// a set evictionHard is all there is. evictionSoft and
// evictionMinimumReclaim have no defaults and are never merged into.
func TestMergeDefaultEvictionSettings(t *testing.T) {
	defaults := map[string]string{"memory.available": "100Mi", "nodefs.available": "10%", "nodefs.inodesFree": "5%", "imagefs.available": "15%", "imagefs.inodesFree": "5%"}
	with := func(k, v string) map[string]string {
		m := maps.Clone(defaults)
		m[k] = v
		return m
	}
	for _, tc := range []struct {
		desc, content string
		hard          map[string]string
	}{
		{"kubelet, unset", kubeletHdr, defaults},
		{"kubelet, unset, merge", kubeletHdr + "mergeDefaultEvictionSettings: true\n", defaults},
		{"kubelet, one signal", kubeletHdr + "evictionHard:\n  memory.available: 200Mi\n", map[string]string{"memory.available": "200Mi"}},
		{"kubelet, one signal, merge false", kubeletHdr + "mergeDefaultEvictionSettings: false\nevictionHard:\n  memory.available: 200Mi\n", map[string]string{"memory.available": "200Mi"}},
		{"kubelet, one signal, merge", kubeletHdr + "mergeDefaultEvictionSettings: true\nevictionHard:\n  memory.available: 200Mi\n", with("memory.available", "200Mi")},
		{"kubelet, other signal, merge", kubeletHdr + "mergeDefaultEvictionSettings: true\nevictionHard:\n  pid.available: 10%\n", with("pid.available", "10%")},
		{"kubelet, empty", kubeletHdr + "evictionHard: {}\n", map[string]string{}},
		{"kubelet, empty, merge", kubeletHdr + "mergeDefaultEvictionSettings: true\nevictionHard: {}\n", defaults},
		{"nodeagent, one signal, merge", hdr + "mergeDefaultEvictionSettings: true\nevictionHard:\n  nodefs.available: 20%\n", with("nodefs.available", "20%")},
		{"nodeagent, one signal", hdr + "evictionHard:\n  nodefs.available: 20%\n", map[string]string{"nodefs.available": "20%"}},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			cfg, warnings, err := DecodeBytes("c.yaml", []byte(tc.content))
			if err != nil {
				t.Fatal(err)
			}
			if len(warnings) > 0 {
				t.Errorf("warnings: %q", warnings)
			}
			if !maps.Equal(cfg.EvictionHard, tc.hard) {
				t.Errorf("evictionHard %v, want %v", cfg.EvictionHard, tc.hard)
			}
		})
	}

	// Soft thresholds and minimum reclaims are not merged into.
	cfg, _, err := DecodeBytes("c.yaml", []byte(kubeletHdr+"mergeDefaultEvictionSettings: true\nevictionSoft:\n  memory.available: 300Mi\nevictionSoftGracePeriod:\n  memory.available: 1m\nevictionMinimumReclaim:\n  memory.available: 50Mi\n"))
	if err != nil {
		t.Fatal(err)
	}
	if !maps.Equal(cfg.EvictionSoft, map[string]string{"memory.available": "300Mi"}) || !maps.Equal(cfg.EvictionMinimumReclaim, map[string]string{"memory.available": "50Mi"}) ||
		!maps.Equal(cfg.EvictionSoftGracePeriod, map[string]string{"memory.available": "1m"}) || !maps.Equal(cfg.EvictionHard, defaults) {
		t.Errorf("soft %v, grace %v, reclaim %v, hard %v", cfg.EvictionSoft, cfg.EvictionSoftGracePeriod, cfg.EvictionMinimumReclaim, cfg.EvictionHard)
	}
}

// As kubelet, the main file's mergeDefaultEvictionSettings is applied to
// the main file's evictionHard before the drop-ins, whose evictionHard
// merges key by key; the setting in a drop-in merges nothing.
func TestMergeDefaultEvictionSettingsDropIns(t *testing.T) {
	defaults := map[string]string{"memory.available": "100Mi", "nodefs.available": "10%", "nodefs.inodesFree": "5%", "imagefs.available": "15%", "imagefs.inodesFree": "5%"}
	for _, tc := range []struct {
		desc, main, dropIn string
		hard               map[string]string
	}{
		{"merge in the main file", "mergeDefaultEvictionSettings: true\nevictionHard:\n  memory.available: 200Mi\n", "evictionHard:\n  pid.available: 10%\n",
			map[string]string{"memory.available": "200Mi", "nodefs.available": "10%", "nodefs.inodesFree": "5%", "imagefs.available": "15%", "imagefs.inodesFree": "5%", "pid.available": "10%"}},
		{"merge in a drop-in only", "evictionHard:\n  memory.available: 200Mi\n", "mergeDefaultEvictionSettings: true\n",
			map[string]string{"memory.available": "200Mi"}},
		{"no evictionHard in the main file", "", "evictionHard:\n  memory.available: 200Mi\n",
			map[string]string{"memory.available": "200Mi", "nodefs.available": "10%", "nodefs.inodesFree": "5%", "imagefs.available": "15%", "imagefs.inodesFree": "5%"}},
		{"nothing", "", "", defaults},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			dir := t.TempDir()
			main := filepath.Join(dir, "kubelet.yaml")
			dropIns := filepath.Join(dir, "kubelet.conf.d")
			if err := os.Mkdir(dropIns, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(main, []byte(kubeletHdr+tc.main), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dropIns, "10-eviction.conf"), []byte(kubeletHdr+tc.dropIn), 0o644); err != nil {
				t.Fatal(err)
			}
			cfg, _, err := Load(LoadOptions{Path: main, DropInDir: dropIns})
			if err != nil {
				t.Fatal(err)
			}
			if !maps.Equal(cfg.EvictionHard, tc.hard) {
				t.Errorf("evictionHard %v, want %v", cfg.EvictionHard, tc.hard)
			}
		})
	}
}
