package pods

import (
	"context"
	"errors"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/nodeagent/nodeagent/pods/containerspec"
)

type fakeDevices struct {
	err       error
	allocated int64 // what SanitizeAllocatable raises example.com/dev to
	calls     int
}

func (f *fakeDevices) Allocate(*v1.Pod, []*v1.Pod) error { f.calls++; return f.err }

func (f *fakeDevices) SanitizeAllocatable(l v1.ResourceList) v1.ResourceList {
	out := l.DeepCopy()
	if q := out["example.com/dev"]; q.Value() < f.allocated {
		out["example.com/dev"] = *resource.NewQuantity(f.allocated, resource.DecimalSI)
	}
	return out
}

func (f *fakeDevices) RunOptions(context.Context, *v1.Pod, *v1.Container) (containerspec.Devices, error) {
	return containerspec.Devices{}, nil
}

// Admission allocates devices first (kubelet's resource allocator admit
// handler) and refuses with kubelet's reason and message when it fails;
// the fit sees allocatable raised to what is allocated.
func TestAdmissionAllocatesDevices(t *testing.T) {
	node := &v1.Node{}
	node.Status.Allocatable = v1.ResourceList{v1.ResourceCPU: resource.MustParse("4"), v1.ResourceMemory: resource.MustParse("4Gi"),
		v1.ResourcePods: resource.MustParse("110"), "example.com/dev": resource.MustParse("0")}
	pod := testPod("gpu", v1.RestartPolicyAlways, ctr("c"))
	pod.Spec.Containers[0].Resources.Limits = v1.ResourceList{"example.com/dev": resource.MustParse("1")}
	pod.Spec.Containers[0].Resources.Requests = v1.ResourceList{"example.com/dev": resource.MustParse("1")}

	d := &fakeDevices{err: errors.New("requested number of devices unavailable for example.com/dev. Requested: 1, Available: 0")}
	m := newWorkerEnv(t).manager(Options{Devices: d})
	got := m.admitLocked(pod, node, nil)
	const msg = "Allocate failed due to requested number of devices unavailable for example.com/dev. Requested: 1, Available: 0, which is unexpected"
	if got == nil || got.Reason != "UnexpectedAdmissionError" || got.Message != msg {
		t.Errorf("admitLocked = %+v, want UnexpectedAdmissionError %q", got, msg)
	}

	// Allocated (say, after an agent restart while the plugin is away):
	// the fit passes though the node's allocatable is 0.
	d.err, d.allocated = nil, 1
	if got := m.admitLocked(pod, node, nil); got != nil {
		t.Errorf("admitLocked of an allocated pod = %+v, want admitted", got)
	}
	// Without devices allocated the fit refuses as kubelet's predicate.
	d.allocated = 0
	got = m.admitLocked(pod, node, nil)
	if got == nil || got.Reason != "OutOfexample.com/dev" {
		t.Errorf("admitLocked = %+v, want OutOfexample.com/dev", got)
	}
}
