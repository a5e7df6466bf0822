package main

import (
	"os/exec"
	"strings"
	"testing"
)

// The agent's binary must not link test-only code (the test registry and
// image of internal/testimage) or k8s.io/kubernetes, and only the runtime
// package may import containerd.
func TestDependencies(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("no go command")
	}
	out, err := exec.Command("go", "list", "-deps", "-f", `{{.ImportPath}} {{join .Imports " "}}`, ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	const mod = "github.com/nodeagent/nodeagent/"
	if !strings.Contains(string(out), "\n"+mod+"runtime ") || !strings.Contains(string(out), "\n"+mod+"imagegc ") {
		t.Fatalf("go list did not list the agent's packages:\n%s", out)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		pkg, imports, _ := strings.Cut(line, " ")
		switch {
		case strings.HasPrefix(pkg, "k8s.io/kubernetes"):
			t.Errorf("the binary links %s", pkg)
		case pkg == mod+"internal/testimage", pkg == mod+"internal/testenv", strings.HasPrefix(pkg, "github.com/google/go-containerregistry"):
			t.Errorf("the binary links test-only %s", pkg)
		}
		if !strings.HasPrefix(pkg, mod) || pkg == mod+"runtime" {
			continue
		}
		for _, imp := range strings.Fields(imports) {
			if strings.HasPrefix(imp, "github.com/containerd/containerd") {
				t.Errorf("%s imports %s; only runtime may", pkg, imp)
			}
		}
	}
}
