package pods

import (
	"context"
	"errors"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodeagent/nodeagent/kubetypes"
	"github.com/nodeagent/nodeagent/pods/containerspec"
)

type fakeDevices struct {
	err       error
	allocated int64 // what SanitizeAllocatable raises example.com/dev to
	active    []*v1.Pod
}

func (f *fakeDevices) Allocate(_ *v1.Pod, active []*v1.Pod) error { f.active = active; return f.err }

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

// A pod being deleted keeps its devices until its containers stopped
// (kubelet's active pods): it is among the pods Allocate keeps, though
// the resource fit no longer counts it.
func TestAdmissionKeepsDevicesOfTerminatingPods(t *testing.T) {
	e := newWorkerEnv(t)
	old := testPod("old", v1.RestartPolicyAlways, ctr("c"))
	w := e.worker(old, kubetypes.SourceAPI)
	e.settle(w)
	d := &fakeDevices{}
	m := e.manager(Options{Devices: d})
	adopt(m, w)
	del := old.DeepCopy()
	del.DeletionTimestamp = &metav1.Time{Time: e.clk.Now()}
	w.update(del)
	node := &v1.Node{}
	node.Status.Allocatable = v1.ResourceList{v1.ResourceCPU: resource.MustParse("4"), v1.ResourceMemory: resource.MustParse("4Gi"),
		v1.ResourcePods: resource.MustParse("110")}
	m.mu.Lock()
	got := m.admitLocked(testPod("new", v1.RestartPolicyAlways, ctr("c")), node, nil)
	m.mu.Unlock()
	if got != nil {
		t.Fatalf("admitLocked = %+v", got)
	}
	if len(d.active) != 1 || d.active[0].UID != old.UID {
		t.Errorf("Allocate was given %d active pods, want the terminating pod %s", len(d.active), old.UID)
	}
}
