package admission

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	utilptr "k8s.io/utils/ptr"
)

func TestSidecarAccepted(t *testing.T) {
	pod := supportedPod()
	pod.Spec.InitContainers[0].RestartPolicy = utilptr.To(v1.ContainerRestartPolicyAlways)
	if got := Unsupported(pod); got != nil {
		t.Errorf("Unsupported = %q, want nil for a sidecar", got)
	}
}

// A sidecar's requests add to the regular containers' (it runs next to
// them) and to those of the init containers declared after it.
func TestFitsNodeSidecar(t *testing.T) {
	cpu := func(q string) v1.ResourceList { return v1.ResourceList{v1.ResourceCPU: resource.MustParse(q)} }
	alloc := v1.ResourceList{v1.ResourceCPU: resource.MustParse("2"), v1.ResourcePods: resource.MustParse("110")}
	tests := []struct {
		desc    string
		sidecar bool
		init    []v1.ResourceList
		app     v1.ResourceList
		ok      bool
		message string
	}{
		// As a regular init container, 1.5 cpu (the max) fits 2 cpus.
		{desc: "regular init: max", init: []v1.ResourceList{cpu("1500m"), cpu("100m")}, app: cpu("1"), ok: true},
		// As a sidecar, 1.5 + 1 = 2.5 cpu does not.
		{desc: "sidecar adds to the app containers", sidecar: true, init: []v1.ResourceList{cpu("1500m"), cpu("100m")}, app: cpu("1"),
			message: "Pod was rejected: Node didn't have enough resource: cpu, requested: 2500, used: 0, capacity: 2000"},
		// The init container after the sidecar runs next to it: 1 + 1.2.
		{desc: "sidecar adds to later init containers", sidecar: true, init: []v1.ResourceList{cpu("1"), cpu("1200m")}, app: cpu("100m"),
			message: "Pod was rejected: Node didn't have enough resource: cpu, requested: 2200, used: 0, capacity: 2000"},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			pod := podWith("p", tt.init, tt.app)
			if tt.sidecar {
				pod.Spec.InitContainers[0].RestartPolicy = utilptr.To(v1.ContainerRestartPolicyAlways)
			}
			ok, _, msg := FitsNode(pod, nil, alloc, 110)
			if ok != tt.ok || msg != tt.message {
				t.Errorf("FitsNode = %v, %q; want %v, %q", ok, msg, tt.ok, tt.message)
			}
		})
	}
}
