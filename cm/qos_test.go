package cm

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func res(kv ...string) v1.ResourceList {
	l := v1.ResourceList{}
	for i := 0; i+1 < len(kv); i += 2 {
		l[v1.ResourceName(kv[i])] = resource.MustParse(kv[i+1])
	}
	return l
}

func ctr(name string, req, lim v1.ResourceList) v1.Container {
	return v1.Container{Name: name, Resources: v1.ResourceRequirements{Requests: req, Limits: lim}}
}

func podOf(cs ...v1.Container) *v1.Pod {
	return &v1.Pod{ObjectMeta: metav1.ObjectMeta{UID: "u1"}, Spec: v1.PodSpec{Containers: cs}}
}

func TestQOSClass(t *testing.T) {
	always := v1.ContainerRestartPolicyAlways
	_ = always
	for _, tc := range []struct {
		desc string
		pod  *v1.Pod
		want v1.PodQOSClass
	}{
		{"nothing set", podOf(ctr("a", nil, nil)), v1.PodQOSBestEffort},
		{"limits equal requests", podOf(ctr("a", res("cpu", "1", "memory", "1Gi"), res("cpu", "1", "memory", "1Gi"))), v1.PodQOSGuaranteed},
		{"limits only (requests default to them)", podOf(ctr("a", nil, res("cpu", "500m", "memory", "64Mi"))), v1.PodQOSGuaranteed},
		{"request below limit", podOf(ctr("a", res("cpu", "100m"), res("cpu", "1", "memory", "1Gi"))), v1.PodQOSBurstable},
		{"one container without limits", podOf(ctr("a", nil, res("cpu", "1", "memory", "1Gi")), ctr("b", nil, nil)), v1.PodQOSBurstable},
		{"memory only", podOf(ctr("a", res("memory", "1Gi"), res("memory", "1Gi"))), v1.PodQOSBurstable},
		{"status wins", func() *v1.Pod { p := podOf(ctr("a", nil, nil)); p.Status.QOSClass = v1.PodQOSBurstable; return p }(), v1.PodQOSBurstable},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			if got := QOSClass(tc.pod); got != tc.want {
				t.Errorf("QOSClass = %s, want %s", got, tc.want)
			}
		})
	}
}

func TestOOMScoreAdj(t *testing.T) {
	const capacity = 4 << 30 // 4Gi
	prio := int32(2000001000)
	always := v1.ContainerRestartPolicyAlways
	burst := podOf(ctr("a", res("memory", "1Gi"), nil))
	sidecarPod := podOf(ctr("main", res("memory", "2Gi"), nil))
	sidecar := ctr("side", res("memory", "100Mi"), nil)
	sidecar.RestartPolicy = &always
	sidecarPod.Spec.InitContainers = []v1.Container{sidecar}
	critical := podOf(ctr("a", nil, nil))
	critical.Spec.Priority, critical.Spec.PriorityClassName = &prio, SystemNodeCritical
	static := podOf(ctr("a", nil, nil))
	static.Annotations = map[string]string{"kubernetes.io/config.source": "file"}
	static.Spec.PriorityClassName = SystemNodeCritical
	for _, tc := range []struct {
		desc string
		pod  *v1.Pod
		c    *v1.Container
		want int
	}{
		{"guaranteed", podOf(ctr("a", nil, res("cpu", "1", "memory", "1Gi"))), nil, -997},
		{"besteffort", podOf(ctr("a", nil, nil)), nil, 1000},
		{"burstable: 1000 - 1000*1Gi/4Gi", burst, &burst.Spec.Containers[0], 750},
		{"burstable without memory request", podOf(ctr("a", res("cpu", "1"), nil)), nil, 999},
		{"burstable requesting all memory", podOf(ctr("a", res("memory", "4Gi"), nil)), nil, 3},
		{"burstable requesting more than the node", podOf(ctr("a", res("memory", "8Gi"), nil)), nil, 3},
		{"sidecar scores no higher than the smallest regular container", sidecarPod, &sidecarPod.Spec.InitContainers[0], 500},
		{"system-node-critical by priority", critical, nil, -997},
		{"system-node-critical static pod", static, nil, -997},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			c := tc.c
			if c == nil {
				c = &tc.pod.Spec.Containers[0]
			}
			if got := OOMScoreAdj(tc.pod, c, capacity); got != tc.want {
				t.Errorf("OOMScoreAdj = %d, want %d", got, tc.want)
			}
		})
	}
}
