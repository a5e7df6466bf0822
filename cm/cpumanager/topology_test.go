package cpumanager

import (
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/cpuset"

	"github.com/nodeagent/nodeagent/cm/cpumanager/state"
	"github.com/nodeagent/nodeagent/cm/topologymanager"
)

// singleNUMA: one socket, one NUMA node, 4 cores without SMT.
var singleNUMA = Topology{0: {0, 0, 0}, 1: {0, 1, 0}, 2: {0, 2, 0}, 3: {0, 3, 0}}

func newAligned(t *testing.T, policy string, dir string) *Manager {
	t.Helper()
	tm, err := topologymanager.New(policy, topologymanager.ScopeContainer, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	m, err := New(Options{Policy: PolicyStatic, ReconcilePeriod: 10 * time.Second, Topology: singleNUMA,
		ReservedCPUs: cpuset.New(0), Reserved: *resource.NewQuantity(1, resource.DecimalSI), StateDir: dir, Align: tm})
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Restore(); err != nil {
		t.Fatal(err)
	}
	return m
}

// On one NUMA node the CPU manager's hints are node 0 while the free CPUs
// hold the request and none when they do not: restricted and
// single-numa-node then reject with TopologyAffinityError before any CPU
// is taken, where best-effort leaves the pod to the CPU manager's error.
func TestTopologyHintsOneNUMANode(t *testing.T) {
	for _, tc := range []struct {
		policy, err string
	}{
		{topologymanager.PolicyBestEffort, "not enough cpus available to satisfy request: requested=2, available=1"},
		{topologymanager.PolicyRestricted, "Resources cannot be allocated with Topology locality"},
		{topologymanager.PolicySingleNumaNode, "Resources cannot be allocated with Topology locality"},
	} {
		t.Run(tc.policy, func(t *testing.T) {
			m := newAligned(t, tc.policy, t.TempDir())
			a := pod("a", nil, v1.Container{Name: "c", Resources: cpuReq("2", "1Gi")})
			if h := m.TopologyHints(a, &a.Spec.Containers[0]); len(h["cpu"]) != 1 || !h["cpu"][0].Preferred {
				t.Errorf("hints %v, want node 0 preferred", h)
			}
			if err := m.Allocate(a, []*v1.Pod{a}); err != nil {
				t.Fatal(err)
			}
			// Shared containers have no preference.
			shared := pod("s", nil, v1.Container{Name: "c", Resources: cpuReq("500m", "1Gi")})
			if h := m.TopologyHints(shared, &shared.Spec.Containers[0]); h != nil {
				t.Errorf("shared container hints %v, want none", h)
			}
			// One CPU is left outside the reserved one: a 1-CPU init
			// container fits, its 2-CPU app container does not.
			b := pod("b", []v1.Container{{Name: "init", Resources: cpuReq("1", "1Gi")}}, v1.Container{Name: "c", Resources: cpuReq("2", "1Gi")})
			if h := m.TopologyHints(b, &b.Spec.Containers[0]); h["cpu"] == nil || len(h["cpu"]) != 0 {
				t.Errorf("hints %v, want an empty list (no possible affinity)", h)
			}
			err := m.Allocate(b, []*v1.Pod{a, b})
			if err == nil || err.Error() != tc.err {
				t.Fatalf("Allocate: %v, want %s", err, tc.err)
			}
			if topologymanager.IsAffinityError(err) != (tc.policy != topologymanager.PolicyBestEffort) {
				t.Errorf("affinity error %v for %s", topologymanager.IsAffinityError(err), tc.policy)
			}
		})
	}
}

// A container whose checkpointed CPUs are not its request (its pod
// changed across a restart) is rejected by restricted, as kubelet's
// hints are then empty; best-effort keeps the CPUs it has.
func TestTopologyHintsChangedRequest(t *testing.T) {
	for _, tc := range []struct {
		policy string
		reject bool
	}{{topologymanager.PolicyBestEffort, false}, {topologymanager.PolicyRestricted, true}} {
		dir := t.TempDir()
		if err := state.Write(dir, state.State{Policy: PolicyStatic, Default: cpuset.New(0, 3),
			Assign: state.Assignments{"a": {"c": cpuset.New(1, 2)}}}); err != nil {
			t.Fatal(err)
		}
		m := newAligned(t, tc.policy, dir)
		a := pod("a", nil, v1.Container{Name: "c", Resources: cpuReq("1", "1Gi")})
		err := m.Allocate(a, []*v1.Pod{a})
		if topologymanager.IsAffinityError(err) != tc.reject || (!tc.reject && err != nil) {
			t.Errorf("%s: Allocate = %v, want rejection %v", tc.policy, err, tc.reject)
		}
	}
}

// The pod scope's hints are for the CPUs the pod holds at most at once:
// init containers run one at a time, so a pod whose 2-CPU init container
// precedes 1-CPU app containers needs 2, with a sidecar's CPU added to
// both.
func TestPodTopologyHints(t *testing.T) {
	m := newAligned(t, topologymanager.PolicyRestricted, t.TempDir())
	c := func(name, cpu string) v1.Container { return v1.Container{Name: name, Resources: cpuReq(cpu, "1Gi")} }
	always := v1.ContainerRestartPolicyAlways
	sidecar := c("side", "1")
	sidecar.RestartPolicy = &always
	for _, tc := range []struct {
		desc string
		p    *v1.Pod
		n    int
		fits bool
	}{
		{"init larger than the apps", pod("a", []v1.Container{c("i", "3")}, c("x", "1"), c("y", "1")), 3, true},
		{"apps larger than the init", pod("b", []v1.Container{c("i", "1")}, c("x", "2"), c("y", "2")), 4, false},
		{"a sidecar adds to both", pod("c", []v1.Container{sidecar, c("i", "2")}, c("x", "1")), 3, true},
	} {
		if got := podGuaranteedCPUs(tc.p); got != tc.n {
			t.Errorf("%s: podGuaranteedCPUs %d, want %d", tc.desc, got, tc.n)
		}
		h := m.PodTopologyHints(tc.p, nil)
		if fits := len(h["cpu"]) == 1; fits != tc.fits {
			t.Errorf("%s: hints %v, want fits %v (3 CPUs outside the reserved one)", tc.desc, h, tc.fits)
		}
	}
}
