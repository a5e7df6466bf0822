package source

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	utilptr "k8s.io/utils/ptr"
)

func TestDefaultPullPolicy(t *testing.T) {
	tests := []struct {
		image string
		want  v1.PullPolicy
	}{
		{"busybox", v1.PullAlways},
		{"busybox:latest", v1.PullAlways},
		{"docker.io/library/busybox:1.36", v1.PullIfNotPresent},
		{"registry:5000/busybox", v1.PullAlways},
		{"registry:5000/busybox:1.36", v1.PullIfNotPresent},
		{"registry:5000/team/busybox:latest", v1.PullAlways},
		{"busybox@sha256:abcd", v1.PullIfNotPresent},
		{"busybox:1.36@sha256:abcd", v1.PullIfNotPresent},
		{"busybox:latest@sha256:abcd", v1.PullAlways},
		{"localhost:5000/busybox@sha256:abcd", v1.PullIfNotPresent},
	}
	for _, tt := range tests {
		t.Run(tt.image, func(t *testing.T) {
			if got := defaultPullPolicy(tt.image); got != tt.want {
				t.Errorf("defaultPullPolicy(%q) = %s, want %s", tt.image, got, tt.want)
			}
		})
	}
}

func TestDefaultsEmptyPod(t *testing.T) {
	pod := &v1.Pod{Spec: v1.PodSpec{
		InitContainers: []v1.Container{{Name: "i", Image: "busybox:1"}},
		Containers: []v1.Container{{
			Name:  "c",
			Image: "busybox",
			Ports: []v1.ContainerPort{{ContainerPort: 80}},
			Env:   []v1.EnvVar{{Name: "N", ValueFrom: &v1.EnvVarSource{FieldRef: &v1.ObjectFieldSelector{FieldPath: "metadata.name"}}}},
		}},
		Volumes: []v1.Volume{
			{Name: "none"},
			{Name: "hp", VolumeSource: v1.VolumeSource{HostPath: &v1.HostPathVolumeSource{Path: "/x"}}},
			{Name: "ed", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}},
		},
	}}
	SetDefaults(pod)
	want := v1.PodSpec{
		InitContainers: []v1.Container{{
			Name: "i", Image: "busybox:1", ImagePullPolicy: v1.PullIfNotPresent,
			TerminationMessagePath: "/dev/termination-log", TerminationMessagePolicy: v1.TerminationMessageReadFile,
		}},
		Containers: []v1.Container{{
			Name: "c", Image: "busybox", ImagePullPolicy: v1.PullAlways,
			TerminationMessagePath: "/dev/termination-log", TerminationMessagePolicy: v1.TerminationMessageReadFile,
			Ports: []v1.ContainerPort{{ContainerPort: 80, Protocol: v1.ProtocolTCP}},
			Env:   []v1.EnvVar{{Name: "N", ValueFrom: &v1.EnvVarSource{FieldRef: &v1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.name"}}}},
		}},
		Volumes: []v1.Volume{
			{Name: "none", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}},
			{Name: "hp", VolumeSource: v1.VolumeSource{HostPath: &v1.HostPathVolumeSource{Path: "/x", Type: utilptr.To(v1.HostPathUnset)}}},
			{Name: "ed", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}},
		},
		RestartPolicy:                 v1.RestartPolicyAlways,
		TerminationGracePeriodSeconds: utilptr.To[int64](30),
		DNSPolicy:                     v1.DNSClusterFirst,
		SchedulerName:                 "default-scheduler",
		SecurityContext:               &v1.PodSecurityContext{},
		EnableServiceLinks:            utilptr.To(true),
	}
	if d := cmp.Diff(want, pod.Spec); d != "" {
		t.Errorf("defaulted spec (-want +got):\n%s", d)
	}
	if pod.Spec.Priority != nil {
		t.Errorf("priority set to %d; the API server derives it from the priority class", *pod.Spec.Priority)
	}
}

func TestDefaultsKeepSetFields(t *testing.T) {
	spec := v1.PodSpec{
		RestartPolicy:                 v1.RestartPolicyNever,
		TerminationGracePeriodSeconds: utilptr.To[int64](0),
		DNSPolicy:                     v1.DNSDefault,
		SchedulerName:                 "mine",
		SecurityContext:               &v1.PodSecurityContext{RunAsUser: utilptr.To[int64](1)},
		EnableServiceLinks:            utilptr.To(false),
		HostNetwork:                   true,
		Containers: []v1.Container{{
			Name: "c", Image: "busybox", ImagePullPolicy: v1.PullNever,
			TerminationMessagePath: "/tm", TerminationMessagePolicy: v1.TerminationMessageFallbackToLogsOnError,
			Ports: []v1.ContainerPort{{ContainerPort: 80, HostPort: 80, Protocol: v1.ProtocolUDP}},
			Env:   []v1.EnvVar{{Name: "N", ValueFrom: &v1.EnvVarSource{FieldRef: &v1.ObjectFieldSelector{APIVersion: "v2", FieldPath: "x"}}}},
		}},
		Volumes: []v1.Volume{
			{Name: "hp", VolumeSource: v1.VolumeSource{HostPath: &v1.HostPathVolumeSource{Path: "/x", Type: utilptr.To(v1.HostPathFile)}}},
			{Name: "ed", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{Medium: v1.StorageMediumMemory}}},
		},
	}
	pod := &v1.Pod{Spec: *spec.DeepCopy()}
	SetDefaults(pod)
	if d := cmp.Diff(spec, pod.Spec); d != "" {
		t.Errorf("SetDefaults changed set fields (-want +got):\n%s", d)
	}
}

func TestDefaultsHostNetworkPorts(t *testing.T) {
	pod := &v1.Pod{Spec: v1.PodSpec{HostNetwork: true, Containers: []v1.Container{{
		Name: "c", Image: "i:1", Ports: []v1.ContainerPort{{ContainerPort: 8080}},
	}}}}
	SetDefaults(pod)
	if got := pod.Spec.Containers[0].Ports[0].HostPort; got != 8080 {
		t.Errorf("hostPort = %d, want containerPort 8080 on a hostNetwork pod", got)
	}
	pod.Spec.HostNetwork = false
	pod.Spec.Containers[0].Ports[0].HostPort = 0
	SetDefaults(pod)
	if got := pod.Spec.Containers[0].Ports[0].HostPort; got != 0 {
		t.Errorf("hostPort = %d, want 0 without hostNetwork", got)
	}
}

func TestDefaultsRequestsFromLimits(t *testing.T) {
	q := resource.MustParse
	tests := []struct {
		desc         string
		in           v1.ResourceRequirements
		wantRequests v1.ResourceList
	}{
		{"nothing", v1.ResourceRequirements{}, nil},
		{"limits only", v1.ResourceRequirements{Limits: v1.ResourceList{"cpu": q("1"), "memory": q("1Gi")}},
			v1.ResourceList{"cpu": q("1"), "memory": q("1Gi")}},
		{"request kept, missing one copied",
			v1.ResourceRequirements{Limits: v1.ResourceList{"cpu": q("1"), "memory": q("1Gi")}, Requests: v1.ResourceList{"cpu": q("100m")}},
			v1.ResourceList{"cpu": q("100m"), "memory": q("1Gi")}},
		{"requests only", v1.ResourceRequirements{Requests: v1.ResourceList{"cpu": q("100m")}},
			v1.ResourceList{"cpu": q("100m")}},
		{"rounded up to milli", v1.ResourceRequirements{Limits: v1.ResourceList{"cpu": q("1500u")}},
			v1.ResourceList{"cpu": q("2m")}},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			pod := &v1.Pod{Spec: v1.PodSpec{
				InitContainers: []v1.Container{{Name: "i", Image: "i:1", Resources: *tt.in.DeepCopy()}},
				Containers:     []v1.Container{{Name: "c", Image: "i:1", Resources: *tt.in.DeepCopy()}},
			}}
			SetDefaults(pod)
			for _, c := range []v1.Container{pod.Spec.InitContainers[0], pod.Spec.Containers[0]} {
				if d := cmp.Diff(tt.wantRequests, c.Resources.Requests, cmp.Comparer(func(a, b resource.Quantity) bool { return a.Cmp(b) == 0 })); d != "" {
					t.Errorf("%s requests (-want +got):\n%s", c.Name, d)
				}
			}
		})
	}
}

// A static pod's pod-level requests are defaulted as the API server
// defaults them: from the containers' requests, else the pod-level limits.
func TestDefaultsPodLevelRequests(t *testing.T) {
	q := resource.MustParse
	pod := &v1.Pod{Spec: v1.PodSpec{
		Resources: &v1.ResourceRequirements{Limits: v1.ResourceList{"cpu": q("2"), "memory": q("1Gi")}},
		Containers: []v1.Container{
			{Name: "a", Image: "i:1", Resources: v1.ResourceRequirements{Requests: v1.ResourceList{"cpu": q("300m")}}},
			{Name: "b", Image: "i:1"},
		},
	}}
	SetDefaults(pod)
	want := v1.ResourceList{"cpu": q("300m"), "memory": q("1Gi")}
	if d := cmp.Diff(want, pod.Spec.Resources.Requests, cmp.Comparer(func(a, b resource.Quantity) bool { return a.Cmp(b) == 0 })); d != "" {
		t.Errorf("pod-level requests (-want +got):\n%s", d)
	}
}
