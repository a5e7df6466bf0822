package pods

import (
	"sync"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodeagent/nodeagent/kubetypes"
)

type fakeCgroups struct {
	mu      sync.Mutex
	ensured []types.UID
	removed []types.UID
}

func (f *fakeCgroups) EnsurePod(pod *v1.Pod) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.ensured = append(f.ensured, pod.UID)
	return "/kubepods/burstable/pod" + string(pod.UID), nil
}

func (f *fakeCgroups) RemovePod(uid types.UID) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.removed = append(f.removed, uid)
	return nil
}

func (f *fakeCgroups) OOMScoreAdj(_ *v1.Pod, c *v1.Container) int { return len(c.Name) * 100 }
func (f *fakeCgroups) SwapMax(*v1.Pod, *v1.Container) *int64      { return nil }

// With a cgroup layout, containers go into their pod's cgroup with the OOM
// score it gives them, and the pod's cgroup goes through it at the end.
func TestWorkerPutsContainersInThePodCgroup(t *testing.T) {
	e := newWorkerEnv(t)
	cg := &fakeCgroups{}
	e.deps.cgroups = cg
	pod := testPod("cg", v1.RestartPolicyAlways, ctr("a"), ctr("bb"))
	w := e.worker(pod, kubetypes.SourceAPI)
	e.settle(w)
	if len(e.rt.specs) != 2 {
		t.Fatalf("%d containers created, want 2", len(e.rt.specs))
	}
	for _, s := range e.rt.specs {
		if s.CgroupParent != "/kubepods/burstable/poduid-cg" {
			t.Errorf("%s: cgroup parent %q", s.Name, s.CgroupParent)
		}
		if s.OOMScoreAdj == nil || *s.OOMScoreAdj != len(s.Name)*100 {
			t.Errorf("%s: oom score adj %v, want %d", s.Name, s.OOMScoreAdj, len(s.Name)*100)
		}
	}
	w.remove()
	if _, done := e.settle(w); !done {
		t.Fatal("the worker did not end")
	}
	if len(cg.removed) != 1 || cg.removed[0] != pod.UID || len(e.rt.cgroups) != 0 {
		t.Errorf("pod cgroup removed through the layout %v, through the runtime %v; want the layout once", cg.removed, e.rt.cgroups)
	}
}
