package main

import (
	"strings"
	"testing"
)

// cutImports are packages the agent's own code must not import: they were
// cut from the binary to keep it small (issue 16, docs/benchmarks.md
// "Binary size"). Some are still imported by libraries, so the linker-level
// guard is hack/dcecheck (make lint), which fails when any of their code
// is kept; this test names the agent's package that would bring one back.
var cutImports = map[string]string{
	"go.yaml.in/yaml/v3": "config finds line numbers with its own block reader (config/yamlblocks.go)",
	"gopkg.in/yaml.v3":   "config finds line numbers with its own block reader (config/yamlblocks.go)",
	"k8s.io/apimachinery/pkg/runtime/serializer/cbor": "the API client speaks JSON and protobuf (internal/kubeclient)",
}

func TestAgentDoesNotImportCutPackages(t *testing.T) {
	const mod = "github.com/nodeagent/nodeagent/"
	pkgs, imports := binaryDeps(t, mod+"config", mod+"internal/kubeclient")
	for _, pkg := range pkgs {
		if !strings.HasPrefix(pkg, mod) {
			continue
		}
		for _, imp := range imports[pkg] {
			if why, cut := cutImports[imp]; cut {
				t.Errorf("%s imports %s, cut from the binary: %s", pkg, imp, why)
			}
		}
	}
}
