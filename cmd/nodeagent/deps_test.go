package main

import (
	"os/exec"
	"strings"
	"testing"
)

// The agent's binary must not link test-only code (the test registry and
// image of internal/testing/testimage) or k8s.io/kubernetes, and only the runtime
// package may import containerd.
func TestDependencies(t *testing.T) {
	const mod = "github.com/nodeagent/nodeagent/"
	pkgs, imports := binaryDeps(t, mod+"runtime", mod+"imagegc")
	for _, pkg := range pkgs {
		switch {
		case strings.HasPrefix(pkg, "k8s.io/kubernetes"):
			t.Errorf("the binary links %s", pkg)
		case strings.HasPrefix(pkg, mod+"internal/testing/"), strings.HasPrefix(pkg, "github.com/google/go-containerregistry"):
			t.Errorf("the binary links test-only %s", pkg)
		}
		if !strings.HasPrefix(pkg, mod) || pkg == mod+"runtime" {
			continue
		}
		for _, imp := range imports[pkg] {
			if strings.HasPrefix(imp, "github.com/containerd/containerd") {
				t.Errorf("%s imports %s; only runtime may", pkg, imp)
			}
		}
	}
}

// TestProductDoesNotImportTestHarness: the harness under internal/testing/
// may import the product (the fleet simulator runs the agent's heartbeat
// and node status), never the other way: no package outside the harness,
// hack/ and e2e/ imports it except from its tests.
func TestProductDoesNotImportTestHarness(t *testing.T) {
	const mod = "github.com/nodeagent/nodeagent/"
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("no go command")
	}
	out, err := exec.Command("go", "list", "-f", `{{.ImportPath}} {{join .Imports " "}}`, mod+"...").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	n := 0
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		pkg, imps, _ := strings.Cut(line, " ")
		rel := strings.TrimPrefix(pkg, mod)
		if strings.HasPrefix(rel, "internal/testing/") || strings.HasPrefix(rel, "hack/") || rel == "e2e" || strings.HasPrefix(rel, "e2e/") {
			continue
		}
		n++
		for _, imp := range strings.Fields(imps) {
			if strings.HasPrefix(imp, mod+"internal/testing/") {
				t.Errorf("%s imports the test harness %s", pkg, imp)
			}
		}
	}
	if n < 20 {
		t.Fatalf("go list listed only %d product packages:\n%s", n, out)
	}
}

// binaryDeps lists the packages the agent's binary links (go list -deps),
// in go list's order, and the imports of each; it fails the test unless
// every one of want is among them (a go list that listed nothing would
// make every check pass).
func binaryDeps(t *testing.T, want ...string) (pkgs []string, imports map[string][]string) {
	t.Helper()
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("no go command")
	}
	out, err := exec.Command("go", "list", "-deps", "-f", `{{.ImportPath}} {{join .Imports " "}}`, ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	imports = map[string][]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		pkg, imps, _ := strings.Cut(line, " ")
		pkgs = append(pkgs, pkg)
		imports[pkg] = strings.Fields(imps)
	}
	for _, w := range want {
		if _, ok := imports[w]; !ok {
			t.Fatalf("go list did not list %s:\n%s", w, out)
		}
	}
	return pkgs, imports
}
