package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/nodeagent/nodeagent/internal/testing/testimage"
)

// The topology manager's single-numa-node policy with the static CPU
// manager on this host's one NUMA node, CPU 0 reserved, in both scopes (an
// agent each, in parallel): a Guaranteed cpu: 1 pod runs on CPU 1 alone; a
// second finds no CPU, so the CPU manager's hints are empty and the pod
// is rejected as kubelet rejects it there, with TopologyAffinityError
// (not the CPU manager's UnexpectedAdmissionError, as without the
// topology manager); /metrics counts both admissions and the error under
// kubelet's names.
func TestTopologyManagerSingleNUMANode(t *testing.T) {
	t.Parallel()
	for _, scope := range []string{"container", "pod"} {
		t.Run(scope, func(t *testing.T) {
			t.Parallel()
			testTopologyManager(t, scope)
		})
	}
}

func testTopologyManager(t *testing.T, scope string) {
	start := time.Now()
	a, _ := readyPodAgent(t, "cpuManagerPolicy: static\nreservedSystemCPUs: \"0\"\ntopologyManagerPolicy: single-numa-node\ntopologyManagerScope: "+scope+"\n")
	ctx := context.Background()
	guaranteed := func(name string) string {
		return podYAML(name, a.node, fmt.Sprintf(`  terminationGracePeriodSeconds: 0
  containers:
  - name: c
    image: %s
    command: ["sleep", "3600"]
    resources: {limits: {cpu: "1", memory: 64Mi}}
`, testimage.Ref))
	}
	g, g2 := a.node+"-g", a.node+"-g2"
	kubectl(t, a.env, guaranteed(g), "apply", "-f", "-")
	a.waitPod(ctx, g, 60*time.Second, "running", running)
	out, err := kubectlOut(t, a.env, "exec", g, "--", "sh", "-c",
		`while read -r k v; do [ "$k" = Cpus_allowed_list: ] && echo "$v"; done < /proc/self/status; true`)
	if got := strings.TrimSpace(out); err != nil || got != "1" {
		t.Errorf("guaranteed pod runs on %q (%v), want its exclusive CPU 1", got, err)
	}

	kubectl(t, a.env, guaranteed(g2), "apply", "-f", "-")
	rp := a.waitPod(ctx, g2, 30*time.Second, "rejected", phaseIs(corev1.PodFailed))
	const msg = "Pod was rejected: Resources cannot be allocated with Topology locality"
	if rp.Status.Reason != "TopologyAffinityError" || rp.Status.Message != msg {
		t.Errorf("second guaranteed pod: reason %q message %q, want TopologyAffinityError %q", rp.Status.Reason, rp.Status.Message, msg)
	}

	_, metrics := a.get("/metrics")
	for _, m := range []string{
		"kubelet_topology_manager_admission_requests_total 2",
		"kubelet_topology_manager_admission_errors_total 1",
		"kubelet_topology_manager_admission_duration_ms_count 2",
		`kubelet_container_aligned_compute_resources_count{boundary="numa_node",scope="` + scope + `"} 1`,
		`kubelet_container_aligned_compute_resources_failure_count{boundary="numa_node",scope="` + scope + `"} 1`,
	} {
		if !strings.Contains(metrics, m+"\n") {
			t.Errorf("/metrics lacks %q", m)
		}
	}
	t.Logf("took %s", time.Since(start).Round(100*time.Millisecond))
}
