package nodestatus

import (
	"os/exec"
	"strings"
	"testing"
)

// TestDependencies keeps the package's contract: it reaches the runtime and
// the PLEG only through function values, so it imports neither containerd nor
// any other nodeagent package (but internal/evictionapi, kubelet's eviction
// vocabulary shared with config, and internal/informer, which import
// nothing of ours), nor k8s.io/kubernetes.
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
			strings.HasPrefix(dep, "github.com/nodeagent/nodeagent/") &&
				dep != "github.com/nodeagent/nodeagent/nodestatus" && dep != "github.com/nodeagent/nodeagent/internal/evictionapi" &&
				dep != "github.com/nodeagent/nodeagent/internal/informer":
			t.Errorf("forbidden dependency %s", dep)
		}
	}
}
