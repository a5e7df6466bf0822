package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/nodeagent/nodeagent/internal/testing/testimage"
)

// kubelet's localStorageEviction, without any node pressure: a pod
// writing 20 MiB into an emptyDir with sizeLimit 10Mi; a pod whose only
// container (ephemeral-storage limit 10Mi) writes 20 MiB into its
// writable layer (the pod's total is checked before the container, so
// kubelet names the pod's limit); a pod with a second, idle container
// (limit 100Mi) whose first container writes 15 MiB over its 10Mi (the
// pod's total is within 110Mi, the container is not): each is evicted
// with kubelet's message, reason Evicted and no DisruptionTarget
// condition; a pod within its sizeLimit keeps running.
func TestLocalStorageLimitsEvict(t *testing.T) {
	a, _ := readyPodAgent(t, "evictionHard:\n  memory.available: 100Mi\n")
	ctx := context.Background()
	emptyDir, layer, ctrLayer, quiet := a.node+"-emptydir", a.node+"-layer", a.node+"-container", a.node+"-within"
	spec := func(cmd, extra string) string {
		return fmt.Sprintf(`  terminationGracePeriodSeconds: 30
  containers:
  - name: fill
    image: %s
    command: ["sh", "-c", %q]
%s`, testimage.Ref, cmd, extra)
	}
	withVolume := `    volumeMounts: [{name: data, mountPath: /data}]
  volumes:
  - name: data
    emptyDir: {sizeLimit: 10Mi}
`
	kubectl(t, a.env, podYAML(quiet, a.node, spec("dd if=/dev/zero of=/data/f bs=1M count=1; sleep 3600", withVolume)), "apply", "-f", "-")
	a.waitPod(ctx, quiet, 60*time.Second, "running", running)
	start := time.Now()
	kubectl(t, a.env, podYAML(emptyDir, a.node, spec("dd if=/dev/zero of=/data/f bs=1M count=20; sleep 3600", withVolume)), "apply", "-f", "-")
	kubectl(t, a.env, podYAML(layer, a.node, spec("dd if=/dev/zero of=/fill bs=1M count=20; sleep 3600",
		"    resources: {limits: {ephemeral-storage: 10Mi}}\n")), "apply", "-f", "-")
	cases := []struct{ name, msg string }{
		{emptyDir, `Usage of EmptyDir volume "data" exceeds the limit "10Mi". `},
		{layer, "Pod ephemeral local storage usage exceeds the total limit of containers 10Mi. "},
	}
	// A container's own usage counts its writable layer only when that
	// is on rootDir's filesystem, as kubelet without a dedicated imagefs.
	var st1, st2 syscall.Stat_t
	if syscall.Stat(a.rootDir(), &st1) == nil && syscall.Stat(filepath.Dir(a.env.ContainerdAddress), &st2) == nil && st1.Dev == st2.Dev {
		kubectl(t, a.env, podYAML(ctrLayer, a.node, spec("dd if=/dev/zero of=/fill bs=1M count=15; sleep 3600",
			fmt.Sprintf("    resources: {limits: {ephemeral-storage: 10Mi}}\n  - name: idle\n    image: %s\n    command: [sleep, \"3600\"]\n    resources: {limits: {ephemeral-storage: 100Mi}}\n", testimage.Ref))),
			"apply", "-f", "-")
		cases = append(cases, struct{ name, msg string }{ctrLayer, `Container fill exceeded its local ephemeral storage limit "10Mi". `})
	} else {
		t.Logf("containerd's filesystem is not rootDir's: the container-limit case is skipped")
	}
	for _, c := range cases {
		var p *corev1.Pod
		err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 90*time.Second, true, func(ctx context.Context) (bool, error) {
			got, err := a.env.Admin.CoreV1().Pods("default").Get(ctx, c.name, metav1.GetOptions{})
			if err != nil {
				return false, nil
			}
			p = got
			return evicted(p), nil
		})
		if err != nil {
			t.Fatalf("pod %s not evicted within 90s: %s", c.name, podStatusOf(p))
		}
		t.Logf("pod %s Evicted %v after its creation: %q", c.name, time.Since(start).Round(100*time.Millisecond), p.Status.Message)
		if p.Status.Message != c.msg {
			t.Errorf("pod %s: message %q, want kubelet's %q", c.name, p.Status.Message, c.msg)
		}
		for _, cond := range p.Status.Conditions {
			if cond.Type == corev1.DisruptionTarget {
				t.Errorf("pod %s: DisruptionTarget %+v; kubelet sets none for local storage evictions", c.name, cond)
			}
		}
		a.waitEvent(ctx, "default", "involvedObject.name="+c.name, "Evicted (Warning) with the pod's message", func(e corev1.Event) bool {
			return e.Reason == "Evicted" && e.Type == corev1.EventTypeWarning && e.Message == c.msg
		})
	}
	q, err := a.env.Admin.CoreV1().Pods("default").Get(ctx, quiet, metav1.GetOptions{})
	if err != nil || q.Status.Phase != corev1.PodRunning {
		t.Errorf("pod within its sizeLimit: %v %s", err, podStatusOf(q))
	}
}
