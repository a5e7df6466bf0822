package containerspec

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/nodeagent/nodeagent/runtime"
)

// A container without limits of its own is bounded by the pod-level
// limits in its cgroup (kubelet's getCPULimit/getMemoryLimit); its cpu
// shares stay its own request's.
func TestPodResources(t *testing.T) {
	q := resource.MustParse
	pod := &v1.Pod{Spec: v1.PodSpec{
		Resources: &v1.ResourceRequirements{Limits: v1.ResourceList{"cpu": q("500m"), "memory": q("128Mi")}},
		Containers: []v1.Container{
			{Name: "bare"},
			{Name: "own", Resources: v1.ResourceRequirements{
				Requests: v1.ResourceList{"cpu": q("100m")},
				Limits:   v1.ResourceList{"cpu": q("200m"), "memory": q("64Mi")}}},
		},
	}}
	for _, tc := range []struct {
		c    *v1.Container
		want runtime.Resources
	}{
		{&pod.Spec.Containers[0], runtime.Resources{CPUShares: 2, CPUQuota: 50000, CPUPeriod: 100000, MemoryLimitBytes: 128 << 20}},
		{&pod.Spec.Containers[1], runtime.Resources{CPUShares: 102, CPUQuota: 20000, CPUPeriod: 100000, MemoryLimitBytes: 64 << 20}},
	} {
		if got := PodResources(pod, tc.c); got != tc.want {
			t.Errorf("%s: PodResources = %+v, want %+v", tc.c.Name, got, tc.want)
		}
	}
	noPodLevel := &v1.Pod{Spec: v1.PodSpec{Containers: []v1.Container{{Name: "bare"}}}}
	if got, want := PodResources(noPodLevel, &noPodLevel.Spec.Containers[0]), (runtime.Resources{CPUShares: 2}); got != want {
		t.Errorf("without pod-level resources: %+v, want %+v", got, want)
	}
}
