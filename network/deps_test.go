package network

import (
	"os/exec"
	"strings"
	"testing"
)

// TestDependencies keeps the package's contract: it is the only package of
// the module that imports the CNI library, and it depends on no other
// nodeagent package (but internal/netns and internal/dirwatch), on
// containerd or on k8s.io/kubernetes.
func TestDependencies(t *testing.T) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("go tool not found")
	}
	out, err := exec.Command(goBin, "list", "-deps", "-f", "{{.ImportPath}}", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	for _, dep := range strings.Fields(string(out)) {
		switch {
		case strings.HasPrefix(dep, "github.com/containerd/"),
			strings.HasPrefix(dep, "k8s.io/kubernetes/"),
			strings.HasPrefix(dep, "github.com/nodeagent/nodeagent/") && dep != "github.com/nodeagent/nodeagent/network" && dep != "github.com/nodeagent/nodeagent/internal/netns" && dep != "github.com/nodeagent/nodeagent/internal/dirwatch":
			t.Errorf("forbidden dependency %s", dep)
		}
	}
	out, err = exec.Command(goBin, "list", "-f", `{{.ImportPath}}{{range .Imports}} {{.}}{{end}}`, "github.com/nodeagent/nodeagent/...").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		fields := strings.Fields(line)
		if len(fields) == 0 || fields[0] == "github.com/nodeagent/nodeagent/network" {
			continue
		}
		for _, imp := range fields[1:] {
			if strings.HasPrefix(imp, "github.com/containernetworking/") {
				t.Errorf("%s imports %s: only package network may use the CNI library", fields[0], imp)
			}
		}
	}
}
