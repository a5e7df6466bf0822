package cm

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
)

// withPodLevel gives pod spec.resources, as the API server defaults them
// (requests set where the test names them).
func withPodLevel(pod *v1.Pod, req, lim v1.ResourceList) *v1.Pod {
	pod.Spec.Resources = &v1.ResourceRequirements{Requests: req, Limits: lim}
	return pod
}

// Pod-level resources (spec.resources): the pod cgroup follows them, as
// kubelet's ResourceConfigForPod with PodLevelResources on.
func TestPodResourceConfigPodLevel(t *testing.T) {
	for _, tc := range []struct {
		desc string
		pod  *v1.Pod
		want ResourceConfig
	}{
		{
			desc: "guaranteed at pod level, containers without resources",
			pod:  withPodLevel(podOf(ctr("a", nil, nil), ctr("b", nil, nil)), res("cpu", "500m", "memory", "128Mi"), res("cpu", "500m", "memory", "128Mi")),
			want: ResourceConfig{CPUShares: u64(512), CPUQuota: i64(50000), CPUPeriod: u64(100000), Memory: i64(128 << 20), HugePageLimit: map[int64]int64{}},
		},
		{
			desc: "pod-level limits bound the pod though a container has none",
			pod:  withPodLevel(podOf(ctr("a", res("cpu", "100m"), nil), ctr("b", nil, nil)), res("cpu", "200m", "memory", "64Mi"), res("cpu", "1", "memory", "256Mi")),
			want: ResourceConfig{CPUShares: u64(204), CPUQuota: i64(100000), CPUPeriod: u64(100000), Memory: i64(256 << 20), HugePageLimit: map[int64]int64{}},
		},
		{
			desc: "pod-level cpu limit only: no memory limit on the pod",
			pod:  withPodLevel(podOf(ctr("a", nil, nil)), res("cpu", "2"), res("cpu", "2")),
			want: ResourceConfig{CPUShares: u64(2048), CPUQuota: i64(200000), CPUPeriod: u64(100000), HugePageLimit: map[int64]int64{}},
		},
		{
			desc: "pod-level requests only: shares from them, no limits",
			pod:  withPodLevel(podOf(ctr("a", res("cpu", "100m"), nil)), res("cpu", "300m", "memory", "10Mi"), nil),
			want: ResourceConfig{CPUShares: u64(307), HugePageLimit: map[int64]int64{}},
		},
		{
			desc: "pod-level memory limit, the container's cpu limit: both applied",
			pod:  withPodLevel(podOf(ctr("a", res("cpu", "1"), res("cpu", "1"))), res("memory", "1Gi"), res("memory", "1Gi")),
			want: ResourceConfig{CPUShares: u64(1024), CPUQuota: i64(100000), CPUPeriod: u64(100000), Memory: i64(1 << 30), HugePageLimit: map[int64]int64{}},
		},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, PodResourceConfig(tc.pod, 0)); diff != "" {
				t.Errorf("(-want +got)\n%s", diff)
			}
		})
	}
}

// The pod-level memory request the containers do not claim is shared
// among them for their oom_score_adj (kubelet's policy).
func TestOOMScoreAdjPodLevel(t *testing.T) {
	const capacity = 4 << 30
	two := withPodLevel(podOf(ctr("a", res("memory", "1Gi"), nil), ctr("b", nil, nil)), res("memory", "3Gi"), nil)
	always := v1.ContainerRestartPolicyAlways
	side := ctr("side", nil, nil)
	side.RestartPolicy = &always
	withSidecar := withPodLevel(podOf(ctr("main", res("memory", "2Gi"), nil)), res("memory", "2Gi"), nil)
	withSidecar.Spec.InitContainers = []v1.Container{side}
	guaranteed := withPodLevel(podOf(ctr("a", nil, nil)), res("cpu", "1", "memory", "1Gi"), res("cpu", "1", "memory", "1Gi"))
	for _, tc := range []struct {
		desc string
		pod  *v1.Pod
		c    *v1.Container
		want int
	}{
		// (3Gi - 1Gi) / 2 = 1Gi more each: a 2Gi, b 1Gi.
		{"container with a request: 1000 - 1000*2Gi/4Gi", two, &two.Spec.Containers[0], 500},
		{"container without a request: 1000 - 1000*1Gi/4Gi", two, &two.Spec.Containers[1], 750},
		// Nothing left over: the sidecar is capped by main's 2Gi.
		{"sidecar no higher than the regular container", withSidecar, &withSidecar.Spec.InitContainers[0], 500},
		{"guaranteed at pod level", guaranteed, &guaranteed.Spec.Containers[0], -997},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			if got := OOMScoreAdj(tc.pod, tc.c, capacity); got != tc.want {
				t.Errorf("OOMScoreAdj = %d, want %d", got, tc.want)
			}
		})
	}
}
