package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/opencontainers/cgroups"
	corev1 "k8s.io/api/core/v1"

	"github.com/nodeagent/nodeagent/internal/testing/testimage"
)

// cpuCFSQuota: false, as kubelet: a Guaranteed pod with a cpu limit runs
// with no CFS quota on its container's cgroup or its pod's (cfs_quota_us
// -1 on cgroup v1, cpu.max "max" on v2) while its memory limit is set; the
// limit stays in the spec and in containerStatuses[].resources; an
// in-place resize of the cpu limit is reported applied and still gives no
// quota, with the same container.
func TestCPUCFSQuotaDisabled(t *testing.T) {
	t.Parallel()
	a, _ := readyPodAgent(t, "cpuCFSQuota: false\n")
	ctx := context.Background()
	name := a.node + "-noquota"
	kubectl(t, a.env, podYAML(name, a.node, fmt.Sprintf(`  terminationGracePeriodSeconds: 1
  containers:
  - name: a
    image: %s
    command: ["sleep", "3600"]
    resources: {limits: {cpu: 500m, memory: 64Mi}}
`, testimage.Ref)), "apply", "-f", "-")
	limitIs := func(cpu string) func(*corev1.Pod) bool {
		return func(p *corev1.Pod) bool {
			if !running(p) || len(p.Status.ContainerStatuses) != 1 || podCondition(p, corev1.PodResizeInProgress) != "" || podCondition(p, corev1.PodResizePending) != "" {
				return false
			}
			r := p.Status.ContainerStatuses[0].Resources
			return r != nil && r.Limits.Cpu().String() == cpu && p.Spec.Containers[0].Resources.Limits.Cpu().String() == cpu
		}
	}
	noQuota := map[bool]string{false: "-1", true: "max"}[cgroups.IsCgroup2UnifiedMode()]
	check := func(p *corev1.Pod) {
		t.Helper()
		id := strings.TrimPrefix(p.Status.ContainerStatuses[0].ContainerID, "containerd://")
		mem, quota := cgroupLimits(t, string(p.UID), id)
		if mem != 64<<20 || !strings.HasPrefix(quota, noQuota+" ") {
			t.Errorf("container cgroup: memory %d, cpu quota %q; want 64Mi and %s (no quota)", mem, quota, noQuota)
		}
		podDir := "/nodeagent-e2e-" + a.node + "/kubepods/pod" + string(p.UID)
		if q := podCgroupFile(t, podDir, "cpu.max"); q != "-1" && !strings.HasPrefix(q, "max") {
			t.Errorf("pod cgroup cpu quota %q, want none", q)
		}
		if m := podCgroupFile(t, podDir, "memory.max"); m != "67108864" {
			t.Errorf("pod cgroup memory %s, want 64Mi", m)
		}
	}
	before := a.waitPod(ctx, name, 60*time.Second, "running with its 500m cpu limit in the status", limitIs("500m"))
	check(before)

	kubectl(t, a.env, "", "patch", "pod", name, "--subresource", "resize", "-p",
		`{"spec":{"containers":[{"name":"a","resources":{"requests":{"cpu":"700m","memory":"64Mi"},"limits":{"cpu":"700m","memory":"64Mi"}}}]}}`)
	after := a.waitPod(ctx, name, 60*time.Second, "resized to a 700m cpu limit", limitIs("700m"))
	if after.Status.ContainerStatuses[0].ContainerID != before.Status.ContainerStatuses[0].ContainerID {
		t.Errorf("the resize replaced the container: %s, was %s", after.Status.ContainerStatuses[0].ContainerID, before.Status.ContainerStatuses[0].ContainerID)
	}
	check(after)
}
