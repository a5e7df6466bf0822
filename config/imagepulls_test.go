package config

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// imagePullFields are the image pull fields of c, for comparisons
// (maxParallelImagePulls -1: unset).
type imagePullFields struct {
	Serialize                  bool
	MaxParallel                int32
	RegistryQPS, RegistryBurst int32
}

func imagePullsOf(c *NodeAgentConfiguration) imagePullFields {
	f := imagePullFields{Serialize: c.ImagePullsSerialized(), MaxParallel: -1, RegistryQPS: c.RegistryPullQPS, RegistryBurst: c.RegistryBurst}
	if c.MaxParallelImagePulls != nil {
		f.MaxParallel = *c.MaxParallelImagePulls
	}
	return f
}

// The image pull fields are read from both kinds of file with kubelet
// v1beta1's defaults (serialized pulls; 5 pulls a second, burst 10) and
// zero values, and used without a warning. serializeImagePulls unset
// follows maxParallelImagePulls as in kubelet's defaulting.
func TestImagePullFields(t *testing.T) {
	kubeletDefaults := imagePullFields{true, -1, 5, 10}
	for _, tc := range []struct {
		desc, content string
		want          imagePullFields
	}{
		{"nodeagent defaults", hdr, kubeletDefaults},
		{"kubelet defaults", kubeletHdr, kubeletDefaults},
		{"parallel, no limit", kubeletHdr + "serializeImagePulls: false\n", imagePullFields{false, -1, 5, 10}},
		{"maxParallelImagePulls 2 alone turns serialization off", kubeletHdr + "maxParallelImagePulls: 2\n", imagePullFields{false, 2, 5, 10}},
		{"maxParallelImagePulls 1 alone keeps it", hdr + "maxParallelImagePulls: 1\n", imagePullFields{true, 1, 5, 10}},
		{"serialized with 1", kubeletHdr + "serializeImagePulls: true\nmaxParallelImagePulls: 1\n", imagePullFields{true, 1, 5, 10}},
		{"nodeagent values", hdr + "serializeImagePulls: false\nmaxParallelImagePulls: 3\nregistryPullQPS: 1\nregistryBurst: 2\n", imagePullFields{false, 3, 1, 2}},
		// kubelet's registryPullQPS is a pointer: 0 (no limit) is kept;
		// its registryBurst is not: 0 is the default.
		{"kubelet zero values", kubeletHdr + "registryPullQPS: 0\nregistryBurst: 0\n", imagePullFields{true, -1, 0, 10}},
		{"nodeagent zero values are used as written", hdr + "registryPullQPS: 0\nregistryBurst: 0\n", imagePullFields{true, -1, 0, 0}},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			cfg, warnings, err := DecodeBytes("c.yaml", []byte(tc.content))
			if err != nil || len(warnings) != 0 {
				t.Fatalf("DecodeBytes: %v, warnings %q", err, warnings)
			}
			if got := imagePullsOf(cfg); got != tc.want {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

// A drop-in's maxParallelImagePulls turns serialization off when neither
// file set serializeImagePulls, as the merged kubelet file would.
func TestImagePullFieldsDropIn(t *testing.T) {
	dir := t.TempDir()
	main := filepath.Join(dir, "kubelet.yaml")
	dropIns := filepath.Join(dir, "kubelet.conf.d")
	if err := os.WriteFile(main, []byte(kubeletHdr+"registryPullQPS: 2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(dropIns, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dropIns, "10-pulls.conf"), []byte(kubeletHdr+"maxParallelImagePulls: 4\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, warnings, err := Load(LoadOptions{Path: main, DropInDir: dropIns})
	if err != nil || len(warnings) != 0 {
		t.Fatalf("Load: %v, warnings %q", err, warnings)
	}
	if got, want := imagePullsOf(cfg), (imagePullFields{false, 4, 2, 10}); got != want {
		t.Errorf("got %+v, want %+v", got, want)
	}
}

// Values kubelet refuses are refused naming the field with kubelet's
// wording (pkg/kubelet/apis/config/validation), from either kind of
// file; so is a QPS with a burst of 0, which would let no pull through.
func TestImagePullFieldsRefused(t *testing.T) {
	for _, tc := range []struct {
		desc, content string
		want          []string // the problems' lines, in order
	}{
		{
			"negative, kubelet", kubeletHdr + "registryPullQPS: -1\nregistryBurst: -2\n",
			[]string{
				"c.yaml:4: registryBurst: Invalid value: -2: must not be a negative number",
				"c.yaml:3: registryPullQPS: Invalid value: -1: must not be a negative number",
			},
		},
		{
			"maxParallelImagePulls 0", kubeletHdr + "serializeImagePulls: false\nmaxParallelImagePulls: 0\n",
			[]string{"c.yaml:4: maxParallelImagePulls: Invalid value: 0: must be a positive number"},
		},
		{
			"maxParallelImagePulls negative", hdr + "maxParallelImagePulls: -3\n",
			[]string{"c.yaml:3: maxParallelImagePulls: Invalid value: -3: must be a positive number"},
		},
		{
			"parallel limit while serialized", kubeletHdr + "serializeImagePulls: true\nmaxParallelImagePulls: 2\n",
			[]string{"c.yaml:4: maxParallelImagePulls: Invalid value: 2: cannot be larger than 1 unless serializeImagePulls is set to false"},
		},
		{
			"a QPS needs a burst", hdr + "registryBurst: 0\n",
			[]string{"c.yaml:3: registryBurst: Invalid value: 0: must be greater than 0 when registryPullQPS is greater than 0"},
		},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			_, _, err := DecodeBytes("c.yaml", []byte(tc.content))
			var cerr *Error
			if !errors.As(err, &cerr) {
				t.Fatalf("DecodeBytes: %v, want a configuration error", err)
			}
			if got := cerr.Lines(); strings.Join(got, "\n") != strings.Join(tc.want, "\n") {
				t.Errorf("problems:\n  %s\nwant:\n  %s", strings.Join(got, "\n  "), strings.Join(tc.want, "\n  "))
			}
		})
	}
}
