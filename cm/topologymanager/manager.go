// Package topologymanager is kubelet's topology manager on a machine with
// one NUMA node.
//
// kubelet asks each hint provider (the CPU manager, the device manager,
// the memory manager) for the NUMA affinities each resource of a
// container could be allocated with, merges them under the policy and,
// with restricted or single-numa-node, rejects the pod with
// TopologyAffinityError ("Resources cannot be allocated with Topology
// locality") when the merged hint is not preferred. On one NUMA node a
// provider's hints for a resource are nil (no preference), empty (it
// cannot allocate the resource at all) or node 0, always preferred (the
// narrowest mask that could hold the request is node 0 itself). The
// merge then is not preferred exactly when some resource has an empty
// list, for restricted and single-numa-node alike, and it decomposes per
// provider: Check applies it to one provider's hints for one container,
// before that provider allocates the container. best-effort and none
// never reject on hints; the providers' own allocation errors then reject
// the pod (UnexpectedAdmissionError).
//
// With the pod scope, the providers' hints for the whole pod
// (PodTopologyHints: the CPUs and devices the pod holds at most at once)
// are checked before any allocation, and the containers are then
// allocated without further checks, as in kubelet.
//
// Differences from kubelet: the providers run one after the other over
// all the pod's containers (devices, then CPUs) where kubelet runs all
// providers per container, which changes only which of two failures is
// reported for a pod that fails both; there is no memory manager (memory has no hints, as
// with kubelet's None policy); container_aligned_compute_resources_count
// counts the containers of an admitted pod only.
package topologymanager

import (
	"errors"
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/prometheus/client_golang/prometheus"
)

// Kubelet's policy names (topologyManagerPolicy).
const (
	PolicyNone           = "none"
	PolicyBestEffort     = "best-effort"
	PolicyRestricted     = "restricted"
	PolicySingleNumaNode = "single-numa-node"
)

// ErrorTopologyAffinity is the reason of a pod rejected for its hints.
const ErrorTopologyAffinity = "TopologyAffinityError"

// TopologyAffinityError is kubelet's rejection for resources the policy
// cannot align.
type TopologyAffinityError struct{}

func (TopologyAffinityError) Error() string {
	return "Resources cannot be allocated with Topology locality"
}

// Type is the pod's status reason.
func (TopologyAffinityError) Type() string { return ErrorTopologyAffinity }

// IsAffinityError: err is (or wraps) a TopologyAffinityError.
func IsAffinityError(err error) bool {
	var e TopologyAffinityError
	return errors.As(err, &e)
}

// Hint is a NUMA affinity a resource could be allocated with; NUMANodes
// nil is any node.
type Hint struct {
	NUMANodes []int
	Preferred bool
}

// Hints are a provider's hints for a container by resource name: a nil
// list is no preference, an empty one no possible affinity.
type Hints map[string][]Hint

// NodeHint is the hint for the single NUMA node 0, always preferred there.
func NodeHint() []Hint { return []Hint{{NUMANodes: []int{0}, Preferred: true}} }

// Checker is what a hint provider asks before allocating a container.
type Checker interface {
	// Check returns TopologyAffinityError when the policy rejects
	// a container with these hints (never with the pod scope, checked
	// at Admit).
	Check(h Hints) error
	// Affinity are the NUMA nodes an admitted container's resources
	// should come from first (nil: any): kubelet's stored best hint,
	// which on one NUMA node is node 0 with best-effort and restricted,
	// and nil with none and single-numa-node (whose policy drops a hint
	// covering every node).
	Affinity() []int
}

// PodHintProvider gives a pod's hints for the pod scope; active are the
// pods whose resources stay allocated (the others' are released first, as
// kubelet's providers do before giving hints).
type PodHintProvider interface {
	PodTopologyHints(pod *v1.Pod, active []*v1.Pod) Hints
}

// Kubelet's scopes (topologyManagerScope).
const (
	ScopeContainer = "container"
	ScopePod       = "pod"
)

// Manager is the topology manager: its policy over the hint providers and
// kubelet's kubelet_topology_manager_admission_* metrics.
type Manager struct {
	policy, scope string
	providers     []PodHintProvider
	met           *metrics
}

// New is the manager for policy and scope on a machine with numaNodes
// NUMA nodes; a policy other than none needs exactly one.
func New(policy, scope string, numaNodes int, reg prometheus.Registerer) (*Manager, error) {
	switch scope {
	case ScopeContainer, ScopePod:
	default:
		return nil, fmt.Errorf("unknown scope: %q", scope)
	}
	switch policy {
	case PolicyNone:
	case PolicyBestEffort, PolicyRestricted, PolicySingleNumaNode:
		if numaNodes != 1 {
			return nil, fmt.Errorf("topology manager policy %s is implemented on machines with one NUMA node only, this one has %d", policy, numaNodes)
		}
	default:
		return nil, fmt.Errorf("unknown policy: %q", policy)
	}
	m := &Manager{policy: policy, scope: scope, met: newMetrics(reg)}
	if policy != PolicyNone {
		// As kubelet, the aligned counts exist from the start.
		for _, scope := range []string{"container", "pod"} {
			m.met.aligned.WithLabelValues(scope, "numa_node").Add(0)
			m.met.alignedFailure.WithLabelValues(scope, "numa_node").Add(0)
		}
	}
	return m, nil
}

// Policy is the policy's name.
func (m *Manager) Policy() string { return m.policy }

// AddHintProvider adds a provider of pod hints (the pod scope's).
func (m *Manager) AddHintProvider(p PodHintProvider) { m.providers = append(m.providers, p) }

// Check is the policy's merge of one provider's hints for one container
// on one NUMA node (container scope).
func (m *Manager) Check(h Hints) error {
	if m == nil || m.scope != ScopeContainer {
		return nil
	}
	return m.merge(h)
}

// Affinity: see Checker.
func (m *Manager) Affinity() []int {
	if m == nil || (m.policy != PolicyBestEffort && m.policy != PolicyRestricted) {
		return nil
	}
	return []int{0}
}

// merge: restricted and single-numa-node reject a resource without any
// preferred hint.
func (m *Manager) merge(h Hints) error {
	if m.policy != PolicyRestricted && m.policy != PolicySingleNumaNode {
		return nil
	}
	for _, hints := range h {
		if hints == nil {
			continue // no preference
		}
		ok := false
		for _, x := range hints {
			if x.Preferred && len(x.NUMANodes) <= 1 {
				ok = true
			}
		}
		if !ok {
			return TopologyAffinityError{}
		}
	}
	return nil
}

// Admit is kubelet's topology manager admit handler around the
// providers' allocation of pod (allocate, whose providers Check each
// container with the container scope; with the pod scope the providers'
// pod hints are checked first, and allocate does not run when the policy
// rejects them): it counts the request, its duration, and its failure.
// active are the pods whose resources stay allocated, pod included.
func (m *Manager) Admit(pod *v1.Pod, active []*v1.Pod, allocate func() error) error {
	m.met.requests.Inc()
	start := time.Now()
	var err error
	if m.scope == ScopePod && m.policy != PolicyNone {
		for _, p := range m.providers {
			if err = m.merge(p.PodTopologyHints(pod, active)); err != nil {
				break
			}
		}
	}
	if err == nil {
		err = allocate()
	}
	m.met.duration.Observe(float64(time.Since(start).Milliseconds()))
	if m.policy == PolicyNone {
		return err // kubelet's none scope counts no errors
	}
	if err != nil {
		m.met.errors.Inc()
		if m.policy == PolicySingleNumaNode && IsAffinityError(err) {
			m.met.alignedFailure.WithLabelValues(m.scope, "numa_node").Inc()
		}
		return err
	}
	if m.policy == PolicySingleNumaNode {
		n := 1 // the pod scope counts the pod
		if m.scope == ScopeContainer {
			n = len(pod.Spec.InitContainers) + len(pod.Spec.Containers)
		}
		m.met.aligned.WithLabelValues(m.scope, "numa_node").Add(float64(n))
	}
	return nil
}

// metrics are kubelet's, under its names.
type metrics struct {
	requests, errors        prometheus.Counter
	duration                prometheus.Histogram
	aligned, alignedFailure *prometheus.CounterVec // by scope, boundary
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		requests: prometheus.NewCounter(prometheus.CounterOpts{Subsystem: "kubelet", Name: "topology_manager_admission_requests_total",
			Help: "The number of admission requests where resources have to be aligned."}),
		errors: prometheus.NewCounter(prometheus.CounterOpts{Subsystem: "kubelet", Name: "topology_manager_admission_errors_total",
			Help: "The number of admission request failures where resources could not be aligned."}),
		duration: prometheus.NewHistogram(prometheus.HistogramOpts{Subsystem: "kubelet", Name: "topology_manager_admission_duration_ms",
			Help: "Duration in milliseconds to serve a pod admission request.", Buckets: prometheus.ExponentialBuckets(.05, 2, 15)}),
		aligned: prometheus.NewCounterVec(prometheus.CounterOpts{Subsystem: "kubelet", Name: "container_aligned_compute_resources_count",
			Help: "Cumulative number of aligned compute resources allocated to containers by alignment type."}, []string{"scope", "boundary"}),
		alignedFailure: prometheus.NewCounterVec(prometheus.CounterOpts{Subsystem: "kubelet", Name: "container_aligned_compute_resources_failure_count",
			Help: "Cumulative number of failures to allocate aligned compute resources to containers by alignment type."}, []string{"scope", "boundary"}),
	}
	if reg != nil {
		reg.MustRegister(m.requests, m.errors, m.duration, m.aligned, m.alignedFailure)
	}
	return m
}
