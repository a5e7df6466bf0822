package nodestatus

import (
	"os"
	"regexp"
	"testing"

	"k8s.io/apimachinery/pkg/util/version"
)

func TestKubeletVersionIsTheImplementedKubernetesVersion(t *testing.T) {
	for _, tc := range []struct{ agent, want string }{
		{"", "v1.34.4"},
		{"1.2.0", "v1.34.4+nodeagent.1.2.0"},
		{"v1.2.0+3.gabc1234.dirty", "v1.34.4+nodeagent.1.2.0.3.gabc1234.dirty"},
		{"0.0.0+unknown", "v1.34.4+nodeagent.0.0.0.unknown"},
		{"dev build/x", "v1.34.4+nodeagent.dev-build-x"},
	} {
		got := KubeletVersion(tc.agent)
		if got != tc.want {
			t.Errorf("KubeletVersion(%q) = %q, want %q", tc.agent, got, tc.want)
		}
		// What the e2e framework's MinimumKubeletVersion check and
		// controllers' skew checks parse.
		v, err := version.ParseSemantic(got)
		if err != nil {
			t.Errorf("KubeletVersion(%q) = %q is not a semantic version: %v", tc.agent, got, err)
			continue
		}
		if !v.AtLeast(version.MustParseSemantic("v1.34.4")) || v.AtLeast(version.MustParseSemantic("v1.34.5")) {
			t.Errorf("%q does not compare as v1.34.4", got)
		}
	}
}

// The reported version is the one the upstream specs are pinned to.
func TestKubernetesVersionMatchesTheConformancePin(t *testing.T) {
	b, err := os.ReadFile("../hack/controlplane/go.mod")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^\s*(?:require\s+)?k8s\.io/kubernetes\s+(v\S+)`).FindSubmatch(b)
	if m == nil {
		t.Fatal("no k8s.io/kubernetes requirement in hack/controlplane/go.mod")
	}
	if string(m[1]) != KubernetesVersion {
		t.Errorf("KubernetesVersion = %s, but the conformance specs are pinned to %s", KubernetesVersion, m[1])
	}
}
