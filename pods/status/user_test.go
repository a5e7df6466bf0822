package status

import (
	"reflect"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/nodeagent/nodeagent/runtime"
)

func TestComputeContainerUser(t *testing.T) {
	pod := statusPod(v1.RestartPolicyAlways, nil, []string{"app", "other"})
	c := running("app", 0, at(1))
	c.User = &runtime.ProcessUser{UID: 1000, GID: 1000, SupplementalGroups: []int64{1000, 60000}}
	got := Compute(pod, rs(c, running("other", 0, at(1))), Input{SandboxReady: true}, at(5))
	want := &v1.ContainerUser{Linux: &v1.LinuxContainerUser{UID: 1000, GID: 1000, SupplementalGroups: []int64{1000, 60000}}}
	if u := got.ContainerStatuses[0].User; !reflect.DeepEqual(u, want) {
		t.Errorf("user %+v, want %+v", u, want)
	}
	if u := got.ContainerStatuses[1].User; u != nil {
		t.Errorf("user of a container whose runtime did not say: %+v, want nil", u)
	}
}

// volumeMounts from the spec for every container; resources and
// allocatedResources for the ones the runtime has.
func TestComputeVolumeMountsAndResources(t *testing.T) {
	pod := statusPod(v1.RestartPolicyAlways, nil, []string{"app", "later"})
	req := v1.ResourceList{v1.ResourceCPU: resource.MustParse("100m"), v1.ResourceMemory: resource.MustParse("64Mi")}
	lim := v1.ResourceList{v1.ResourceMemory: resource.MustParse("128Mi")}
	for i := range pod.Spec.Containers {
		c := &pod.Spec.Containers[i]
		c.Resources = v1.ResourceRequirements{Requests: req, Limits: lim}
		c.VolumeMounts = []v1.VolumeMount{{Name: "data", MountPath: "/data"}, {Name: "cfg", MountPath: "/cfg", ReadOnly: true}}
	}
	got := Compute(pod, rs(running("app", 0, at(1))), Input{SandboxReady: true}, at(5))
	disabled := v1.RecursiveReadOnlyDisabled
	wantMounts := []v1.VolumeMountStatus{{Name: "data", MountPath: "/data"}, {Name: "cfg", MountPath: "/cfg", ReadOnly: true, RecursiveReadOnly: &disabled}}
	for _, cs := range got.ContainerStatuses {
		if !reflect.DeepEqual(cs.VolumeMounts, wantMounts) {
			t.Errorf("%s volumeMounts %+v, want %+v", cs.Name, cs.VolumeMounts, wantMounts)
		}
	}
	app, later := got.ContainerStatuses[0], got.ContainerStatuses[1]
	if want := (&v1.ResourceRequirements{Requests: req, Limits: lim}); !reflect.DeepEqual(app.Resources, want) || !reflect.DeepEqual(app.AllocatedResources, req) {
		t.Errorf("app resources %+v allocated %+v, want %+v and the requests", app.Resources, app.AllocatedResources, want)
	}
	if later.Resources != nil || later.AllocatedResources != nil {
		t.Errorf("a container not created yet reports resources %+v / %+v", later.Resources, later.AllocatedResources)
	}
}

// A running container reports what its cgroup has (Input.Resources), not
// its allocation; the resize conditions are the input's, with their times,
// and they are gone from a terminal pod.
func TestComputeAppliedResourcesAndResizeConditions(t *testing.T) {
	pod := statusPod(v1.RestartPolicyAlways, nil, []string{"app"})
	big := v1.ResourceList{v1.ResourceCPU: resource.MustParse("1"), v1.ResourceMemory: resource.MustParse("256Mi")}
	small := v1.ResourceList{v1.ResourceCPU: resource.MustParse("500m"), v1.ResourceMemory: resource.MustParse("128Mi")}
	pod.Spec.Containers[0].Resources = v1.ResourceRequirements{Requests: big, Limits: big}
	c := running("app", 0, at(1))
	pending := v1.PodCondition{Type: v1.PodResizeInProgress, Status: v1.ConditionTrue, LastTransitionTime: apiTime(at(2))}
	in := Input{
		SandboxReady:     true,
		Resources:        map[string]v1.ResourceRequirements{c.ID: {Requests: small, Limits: small}},
		ResizeConditions: []v1.PodCondition{pending},
	}
	got := Compute(pod, rs(c), in, at(5))
	app := got.ContainerStatuses[0]
	if !reflect.DeepEqual(app.Resources, &v1.ResourceRequirements{Requests: small, Limits: small}) || !reflect.DeepEqual(app.AllocatedResources, big) {
		t.Errorf("resources %+v allocated %+v, want the cgroup's and the allocation's requests", app.Resources, app.AllocatedResources)
	}
	cond := findCondition(got.Conditions, v1.PodResizeInProgress)
	if cond == nil || !cond.LastTransitionTime.Time.Equal(apiTime(at(2)).Time) {
		t.Errorf("PodResizeInProgress = %+v, want the input's", cond)
	}
	// The next status without the condition drops the old one.
	pod.Status = got
	in.ResizeConditions = nil
	if c := findCondition(Compute(pod, rs(c), in, at(6)).Conditions, v1.PodResizeInProgress); c != nil {
		t.Errorf("a cleared resize condition stayed: %+v", c)
	}
}
