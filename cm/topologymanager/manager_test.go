package topologymanager

import (
	"errors"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	v1 "k8s.io/api/core/v1"
)

func TestCheck(t *testing.T) {
	cannot := Hints{"cpu": {}}
	node0 := Hints{"cpu": NodeHint(), "example.com/dev": nil}
	anyNode := Hints{"cpu": {{Preferred: true}}}
	notPreferred := Hints{"cpu": {{NUMANodes: []int{0}}}}
	for _, tc := range []struct {
		policy string
		hints  Hints
		reject bool
	}{
		{PolicyNone, cannot, false},
		{PolicyBestEffort, cannot, false},
		{PolicyRestricted, cannot, true},
		{PolicySingleNumaNode, cannot, true},
		{PolicyRestricted, node0, false},
		{PolicySingleNumaNode, node0, false},
		{PolicySingleNumaNode, nil, false},
		{PolicySingleNumaNode, anyNode, false},
		{PolicyRestricted, notPreferred, true},
		{PolicySingleNumaNode, Hints{"cpu": NodeHint(), "example.com/dev": {}}, true},
	} {
		m, err := New(tc.policy, ScopeContainer, 1, nil)
		if err != nil {
			t.Fatal(err)
		}
		err = m.Check(tc.hints)
		if (err != nil) != tc.reject {
			t.Errorf("%s %v: %v, want rejection %v", tc.policy, tc.hints, err, tc.reject)
		}
		if err != nil && (!IsAffinityError(err) || err.Error() != "Resources cannot be allocated with Topology locality" || err.(TopologyAffinityError).Type() != "TopologyAffinityError") {
			t.Errorf("%s: error %v, want kubelet's TopologyAffinityError", tc.policy, err)
		}
	}
}

func TestNewRefusesMoreThanOneNUMANode(t *testing.T) {
	for _, p := range []string{PolicyBestEffort, PolicyRestricted, PolicySingleNumaNode} {
		if _, err := New(p, ScopeContainer, 2, nil); err == nil || !strings.Contains(err.Error(), "one NUMA node only, this one has 2") {
			t.Errorf("%s on 2 NUMA nodes: %v", p, err)
		}
	}
	if _, err := New(PolicyNone, ScopeContainer, 4, nil); err != nil {
		t.Errorf("none on 4 NUMA nodes: %v", err)
	}
	if _, err := New("bogus", ScopeContainer, 1, nil); err == nil || err.Error() != `unknown policy: "bogus"` {
		t.Errorf("unknown policy: %v", err)
	}
}

func TestAdmitMetrics(t *testing.T) {
	pod := &v1.Pod{Spec: v1.PodSpec{InitContainers: []v1.Container{{Name: "i"}}, Containers: []v1.Container{{Name: "c"}}}}
	for _, tc := range []struct {
		policy                    string
		errs, aligned, alignedErr float64
	}{
		// kubelet's none scope counts requests, not errors.
		{policy: PolicyNone},
		{policy: PolicyRestricted, errs: 2},
		{policy: PolicySingleNumaNode, errs: 2, aligned: 2, alignedErr: 1},
	} {
		reg := prometheus.NewRegistry()
		m, err := New(tc.policy, ScopeContainer, 1, reg)
		if err != nil {
			t.Fatal(err)
		}
		boom := errors.New("not enough cpus available to satisfy request: requested=1, available=0")
		if err := m.Admit(pod, nil, func() error { return nil }); err != nil {
			t.Fatal(err)
		}
		if err := m.Admit(pod, nil, func() error { return m.Check(Hints{"cpu": {}}) }); (err != nil) != (tc.policy != PolicyNone) {
			t.Errorf("%s: hint rejection %v", tc.policy, err)
		}
		if err := m.Admit(pod, nil, func() error { return boom }); err != boom {
			t.Errorf("%s: allocation error %v, want %v", tc.policy, err, boom)
		}
		if got := testutil.ToFloat64(m.met.requests); got != 3 {
			t.Errorf("%s: requests %v, want 3", tc.policy, got)
		}
		if got := testutil.ToFloat64(m.met.errors); got != tc.errs {
			t.Errorf("%s: errors %v, want %v", tc.policy, got, tc.errs)
		}
		n, err := testutil.GatherAndCount(reg, "kubelet_topology_manager_admission_duration_ms")
		if err != nil || n != 1 {
			t.Errorf("%s: duration histogram %d %v", tc.policy, n, err)
		}
		if tc.policy == PolicyNone {
			if n, _ := testutil.GatherAndCount(reg, "kubelet_container_aligned_compute_resources_count"); n != 0 {
				t.Errorf("none: aligned counts exported (%d series)", n)
			}
			continue
		}
		if got := testutil.ToFloat64(m.met.aligned.WithLabelValues("container", "numa_node")); got != tc.aligned {
			t.Errorf("%s: aligned %v, want %v", tc.policy, got, tc.aligned)
		}
		if got := testutil.ToFloat64(m.met.alignedFailure.WithLabelValues("container", "numa_node")); got != tc.alignedErr {
			t.Errorf("%s: aligned failures %v, want %v", tc.policy, got, tc.alignedErr)
		}
	}
}

type fakeProvider struct {
	hints  Hints
	active []*v1.Pod
}

func (f *fakeProvider) PodTopologyHints(_ *v1.Pod, active []*v1.Pod) Hints {
	f.active = active
	return f.hints
}

// With the pod scope the providers' pod hints are checked before any
// allocation (allocate does not run when the policy rejects them), the
// containers' own checks pass, and an admitted pod counts once.
func TestPodScope(t *testing.T) {
	pod := &v1.Pod{Spec: v1.PodSpec{Containers: []v1.Container{{Name: "a"}, {Name: "b"}}}}
	for _, tc := range []struct {
		policy string
		reject bool
	}{{PolicyBestEffort, false}, {PolicyRestricted, true}, {PolicySingleNumaNode, true}} {
		reg := prometheus.NewRegistry()
		m, err := New(tc.policy, ScopePod, 1, reg)
		if err != nil {
			t.Fatal(err)
		}
		cpus, devs := &fakeProvider{hints: Hints{"cpu": NodeHint()}}, &fakeProvider{hints: Hints{"example.com/dev": {}}}
		m.AddHintProvider(cpus)
		m.AddHintProvider(devs)
		if err := m.Check(Hints{"cpu": {}}); err != nil {
			t.Errorf("%s: a container's check with the pod scope = %v, want nil", tc.policy, err)
		}
		ran := false
		active := []*v1.Pod{pod}
		err = m.Admit(pod, active, func() error { ran = true; return nil })
		if IsAffinityError(err) != tc.reject || ran == tc.reject {
			t.Errorf("%s: Admit = %v (allocation ran %v), want rejection %v", tc.policy, err, ran, tc.reject)
		}
		if len(devs.active) != 1 {
			t.Errorf("%s: provider given active %v", tc.policy, devs.active)
		}
		devs.hints = Hints{"example.com/dev": NodeHint()}
		if err := m.Admit(pod, active, func() error { return nil }); err != nil {
			t.Errorf("%s: Admit = %v", tc.policy, err)
		}
		if tc.policy == PolicySingleNumaNode {
			if got := testutil.ToFloat64(m.met.aligned.WithLabelValues("pod", "numa_node")); got != 1 {
				t.Errorf("pod-scope aligned count %v, want 1", got)
			}
			if got := testutil.ToFloat64(m.met.alignedFailure.WithLabelValues("pod", "numa_node")); got != 1 {
				t.Errorf("pod-scope aligned failures %v, want 1", got)
			}
		}
	}
	if _, err := New(PolicyRestricted, "node", 1, nil); err == nil || err.Error() != `unknown scope: "node"` {
		t.Errorf("unknown scope: %v", err)
	}
}
