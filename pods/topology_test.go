package pods

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/nodeagent/nodeagent/cm/topologymanager"
)

// Devices and CPUs are allocated through the topology manager: a
// provider's TopologyAffinityError rejects the pod with kubelet's reason
// and message (not UnexpectedAdmissionError), and every admission is
// counted in kubelet_topology_manager_admission_*.
func TestAdmissionThroughTopologyManager(t *testing.T) {
	node := &v1.Node{}
	node.Status.Allocatable = v1.ResourceList{v1.ResourceCPU: resource.MustParse("4"), v1.ResourceMemory: resource.MustParse("4Gi"),
		v1.ResourcePods: resource.MustParse("110"), "example.com/dev": resource.MustParse("1")}
	pod := testPod("gpu", v1.RestartPolicyAlways, ctr("c"))
	pod.Spec.Containers[0].Resources.Limits = v1.ResourceList{"example.com/dev": resource.MustParse("1")}
	pod.Spec.Containers[0].Resources.Requests = v1.ResourceList{"example.com/dev": resource.MustParse("1")}

	reg := prometheus.NewRegistry()
	tm, err := topologymanager.New(topologymanager.PolicySingleNumaNode, topologymanager.ScopeContainer, 1, reg)
	if err != nil {
		t.Fatal(err)
	}
	d := &fakeDevices{err: topologymanager.TopologyAffinityError{}}
	m := newWorkerEnv(t).manager(Options{Devices: d, Topology: tm})
	got := m.admitLocked(pod, node, nil)
	if got == nil || got.Reason != "TopologyAffinityError" || got.Message != "Resources cannot be allocated with Topology locality" {
		t.Errorf("admitLocked = %+v, want TopologyAffinityError", got)
	}
	d.err = nil
	if got := m.admitLocked(pod, node, nil); got != nil {
		t.Errorf("admitLocked = %+v, want admitted", got)
	}
	const want = `
# HELP kubelet_topology_manager_admission_errors_total The number of admission request failures where resources could not be aligned.
# TYPE kubelet_topology_manager_admission_errors_total counter
kubelet_topology_manager_admission_errors_total 1
# HELP kubelet_topology_manager_admission_requests_total The number of admission requests where resources have to be aligned.
# TYPE kubelet_topology_manager_admission_requests_total counter
kubelet_topology_manager_admission_requests_total 2
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "kubelet_topology_manager_admission_requests_total", "kubelet_topology_manager_admission_errors_total"); err != nil {
		t.Error(err)
	}
}
