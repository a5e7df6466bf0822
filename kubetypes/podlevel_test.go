package kubetypes

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

func rl(kv ...string) v1.ResourceList {
	l := v1.ResourceList{}
	for i := 0; i+1 < len(kv); i += 2 {
		l[v1.ResourceName(kv[i])] = resource.MustParse(kv[i+1])
	}
	return l
}

func podLevel(podReq, podLim v1.ResourceList, cs ...v1.ResourceRequirements) *v1.Pod {
	p := &v1.Pod{}
	if podReq != nil || podLim != nil {
		p.Spec.Resources = &v1.ResourceRequirements{Requests: podReq, Limits: podLim}
	}
	for i, r := range cs {
		p.Spec.Containers = append(p.Spec.Containers, v1.Container{Name: string(rune('a' + i)), Resources: r})
	}
	return p
}

// The QoS class of a pod with pod-level resources comes from them alone,
// as the API's ComputePodQOS with PodLevelResources.
func TestPodQOSClassPodLevel(t *testing.T) {
	full := rl("cpu", "1", "memory", "1Gi")
	for _, tc := range []struct {
		desc string
		pod  *v1.Pod
		want v1.PodQOSClass
	}{
		{"pod-level limits = requests: guaranteed though containers set nothing",
			podLevel(full, full, v1.ResourceRequirements{}), v1.PodQOSGuaranteed},
		{"pod-level limits only, requests defaulted from them: guaranteed",
			podLevel(nil, full, v1.ResourceRequirements{}), v1.PodQOSGuaranteed},
		{"pod-level limits, a container requests less cpu: burstable (defaulted from the container)",
			podLevel(nil, full, v1.ResourceRequirements{Requests: rl("cpu", "500m")}), v1.PodQOSBurstable},
		{"pod-level cpu only: burstable",
			podLevel(rl("cpu", "1"), rl("cpu", "1"), v1.ResourceRequirements{}), v1.PodQOSBurstable},
		{"pod-level requests below limits: burstable",
			podLevel(rl("cpu", "500m", "memory", "1Gi"), full), v1.PodQOSBurstable},
		{"pod-level requests only: burstable",
			podLevel(rl("memory", "10Mi"), nil), v1.PodQOSBurstable},
		{"guaranteed containers do not make a burstable pod level guaranteed",
			podLevel(rl("cpu", "1"), nil, v1.ResourceRequirements{Requests: full, Limits: full}), v1.PodQOSBurstable},
		{"no pod-level resources: the containers decide",
			podLevel(nil, nil, v1.ResourceRequirements{Requests: full, Limits: full}), v1.PodQOSGuaranteed},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			if got := PodQOSClass(tc.pod); got != tc.want {
				t.Errorf("PodQOSClass = %s, want %s", got, tc.want)
			}
		})
	}
}

// PodLevelRequests defaults as the API server does (defaultPodRequests).
func TestPodLevelRequests(t *testing.T) {
	for _, tc := range []struct {
		desc string
		pod  *v1.Pod
		want v1.ResourceList
	}{
		{"none", podLevel(nil, nil, v1.ResourceRequirements{Requests: rl("cpu", "1")}), nil},
		{"requests only: as set", podLevel(rl("cpu", "1"), nil), rl("cpu", "1")},
		{"limits only: the limits", podLevel(nil, rl("cpu", "2", "memory", "1Gi")), rl("cpu", "2", "memory", "1Gi")},
		{"limits, containers request cpu: their sum for cpu, the limit for memory",
			podLevel(nil, rl("cpu", "2", "memory", "1Gi"), v1.ResourceRequirements{Requests: rl("cpu", "300m")}, v1.ResourceRequirements{Requests: rl("cpu", "200m")}),
			rl("cpu", "500m", "memory", "1Gi")},
		{"a set request is kept", podLevel(rl("cpu", "100m"), rl("cpu", "2")), rl("cpu", "100m")},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, PodLevelRequests(tc.pod)); diff != "" {
				t.Errorf("(-want +got)\n%s", diff)
			}
		})
	}
}

// A container without its own limit gets the pod's in its cgroup, as
// kubelet's getCPULimit/getMemoryLimit.
func TestContainerLimitsWithPodLevel(t *testing.T) {
	for _, tc := range []struct {
		desc        string
		pod         *v1.Pod
		cpu, memory int64
	}{
		{"no pod level: the container's", podLevel(nil, nil, v1.ResourceRequirements{Limits: rl("cpu", "1")}), 1000, 0},
		{"pod level fills what the container lacks", podLevel(nil, rl("cpu", "2", "memory", "1Gi"), v1.ResourceRequirements{Limits: rl("cpu", "1")}), 1000, 1 << 30},
		{"pod-level requests only: nothing to fill", podLevel(rl("cpu", "2"), nil, v1.ResourceRequirements{}), 0, 0},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			cpu, mem := ContainerLimitsWithPodLevel(tc.pod, &tc.pod.Spec.Containers[0])
			if cpu != tc.cpu || mem != tc.memory {
				t.Errorf("got cpu %d memory %d, want %d %d", cpu, mem, tc.cpu, tc.memory)
			}
		})
	}
}

func TestDownwardAPIAllocatable(t *testing.T) {
	alloc := rl("cpu", "4", "memory", "8Gi", "ephemeral-storage", "100Gi")
	got := DownwardAPIAllocatable(podLevel(nil, rl("cpu", "1"), v1.ResourceRequirements{}), alloc)
	if diff := cmp.Diff(rl("cpu", "1", "memory", "8Gi", "ephemeral-storage", "100Gi"), got); diff != "" {
		t.Errorf("(-want +got)\n%s", diff)
	}
	if alloc.Cpu().String() != "4" {
		t.Errorf("the node's allocatable was changed: %v", alloc)
	}
	if diff := cmp.Diff(alloc, DownwardAPIAllocatable(podLevel(rl("cpu", "1"), nil), alloc)); diff != "" {
		t.Errorf("pod-level requests changed the default: (-want +got)\n%s", diff)
	}
}

func TestRemainingPodMemoryRequestPerContainer(t *testing.T) {
	p := podLevel(rl("memory", "1Gi"), nil, v1.ResourceRequirements{Requests: rl("memory", "256Mi")}, v1.ResourceRequirements{})
	if got, want := RemainingPodMemoryRequestPerContainer(p), int64(384<<20); got != want {
		t.Errorf("got %d, want %d", got, want)
	}
	if got := RemainingPodMemoryRequestPerContainer(podLevel(nil, nil, v1.ResourceRequirements{})); got != 0 {
		t.Errorf("without pod-level resources: got %d, want 0", got)
	}
}
