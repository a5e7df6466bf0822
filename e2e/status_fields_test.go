package e2e

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/nodeagent/nodeagent/internal/testing/testimage"
)

// The status fields kubelet 1.34 reports by default: the node's
// status.features.supplementalGroupsPolicy, and per container the process's
// user (uid, gid, groups: Strict leaves the image's /etc/group out),
// volumeMounts, resources and allocatedResources.
func TestContainerUserAndStatusFields(t *testing.T) {
	t.Parallel()
	a, _ := readyPodAgent(t, "")
	ctx := context.Background()
	a.waitNode(ctx, 30*time.Second, "status.features", func(n *corev1.Node) bool {
		f := n.Status.Features
		return f != nil && f.SupplementalGroupsPolicy != nil && *f.SupplementalGroupsPolicy
	})
	name := a.node + "-user"
	kubectl(t, a.env, podYAML(name, a.node, fmt.Sprintf(`  volumes:
  - name: data
    emptyDir: {}
  securityContext:
    runAsUser: 1000
    runAsGroup: 3000
    supplementalGroups: [4000]
    supplementalGroupsPolicy: Strict
  containers:
  - name: c
    image: %s
    command: ["sh", "-c", "grep Groups /proc/self/status; exec sleep 3600"]
    resources:
      requests: {cpu: 50m, memory: 32Mi}
      limits: {memory: 64Mi}
    volumeMounts:
    - {name: data, mountPath: /data}
    - {name: data, mountPath: /ro, readOnly: true}
`, testimage.Ref)), "apply", "-f", "-")
	p := a.waitPod(ctx, name, 60*time.Second, "running with a user", func(p *corev1.Pod) bool {
		cs := containerStatus(p, "c")
		return running(p) && cs != nil && cs.User != nil
	})
	cs := containerStatus(p, "c")
	wantUser := &corev1.ContainerUser{Linux: &corev1.LinuxContainerUser{UID: 1000, GID: 3000, SupplementalGroups: []int64{3000, 4000}}}
	if !reflect.DeepEqual(cs.User, wantUser) {
		t.Errorf("user %+v, want %+v", cs.User.Linux, wantUser.Linux)
	}
	if got := a.waitLog(p, "c", 0, "Groups:"); !strings.Contains(got, "Groups:\t3000 4000") {
		t.Errorf("process groups %q, want 3000 4000", got)
	}
	disabled := corev1.RecursiveReadOnlyDisabled
	wantMounts := []corev1.VolumeMountStatus{{Name: "data", MountPath: "/data"}, {Name: "data", MountPath: "/ro", ReadOnly: true, RecursiveReadOnly: &disabled}}
	if !reflect.DeepEqual(cs.VolumeMounts, wantMounts) {
		t.Errorf("volumeMounts %+v, want %+v", cs.VolumeMounts, wantMounts)
	}
	r := cs.Resources
	if r == nil || r.Requests.Cpu().Cmp(resource.MustParse("50m")) != 0 || r.Limits.Memory().Cmp(resource.MustParse("64Mi")) != 0 ||
		cs.AllocatedResources.Memory().Cmp(resource.MustParse("32Mi")) != 0 {
		t.Errorf("resources %+v, allocatedResources %+v", r, cs.AllocatedResources)
	}
}
