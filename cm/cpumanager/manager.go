package cpumanager

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"math"
	"path/filepath"
	"slices"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/clock"
	"k8s.io/utils/cpuset"

	"github.com/nodeagent/nodeagent/cm/cpumanager/state"
	"github.com/nodeagent/nodeagent/cm/topologymanager"
	"github.com/nodeagent/nodeagent/kubetypes"
)

// Kubelet's policy names.
const (
	PolicyNone   = "none"
	PolicyStatic = "static"
)

// Container is a running container as the reconcile loop sees it.
type Container struct {
	PodUID, Name, ID string
}

// Runtime is what the reconcile loop needs of the container runtime.
type Runtime interface {
	// RunningContainers are the node's running containers.
	RunningContainers(ctx context.Context) ([]Container, error)
	// UpdateContainerCPUSet sets a running container's cpuset
	// (cpuset.cpus) and nothing else.
	UpdateContainerCPUSet(ctx context.Context, id, cpus string) error
}

// Options configure a Manager.
type Options struct {
	// Policy is kubelet's cpuManagerPolicy: none or static.
	Policy string
	// ReconcilePeriod is how often the static policy's cpusets are
	// pushed to running containers (cpuManagerReconcilePeriod).
	ReconcilePeriod time.Duration
	// Topology is the node's CPUs (Discover).
	Topology Topology
	// ReservedCPUs are reservedSystemCPUs; empty: Reserved CPUs (the sum
	// of kubeReserved and systemReserved cpu, rounded up) are taken by
	// topology, lowest cores first.
	ReservedCPUs cpuset.CPUSet
	Reserved     resource.Quantity
	// StateDir holds the checkpoint (kubelet: its root directory).
	StateDir string
	// Align is the topology manager, asked with each container's hints
	// before its CPUs are allocated (nil: none).
	Align  topologymanager.Checker
	Logger *slog.Logger
	Clock  clock.Clock
}

// Pods are the node's pods as the manager needs them.
type Pods struct {
	// Active are the pods whose containers may run (kubelet's active
	// pods): assignments of other pods are released, once Ready says
	// every pod source delivered its pods.
	Active func() []*v1.Pod
	Ready  func() bool
}

// Manager is kubelet's CPU manager. With the none policy it only keeps
// the checkpoint (so that a node switched between policies is refused as
// kubelet refuses it); with the static policy it assigns exclusive CPUs
// at admission, gives each container its cpuset at creation and pushes
// changes of the shared pool to running containers every ReconcilePeriod.
type Manager struct {
	o Options

	mu     sync.Mutex
	st     state.State
	policy *static // nil: none
	// rt and pods are set by Run; until then nothing is released.
	rt   Runtime
	pods Pods
	// applied is the cpuset last pushed to a container by ID.
	applied map[string]string
}

// New checks the options as kubelet's NewManager does; nothing is read
// or written before Start.
func New(o Options) (*Manager, error) {
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	m := &Manager{o: o, applied: map[string]string{}, st: state.State{Policy: o.Policy, Assign: state.Assignments{}}}
	switch o.Policy {
	case PolicyNone:
		return m, nil
	case PolicyStatic:
	default:
		return nil, fmt.Errorf("unknown policy: %q", o.Policy)
	}
	if o.Reserved.IsZero() {
		return nil, fmt.Errorf("[cpumanager] the static policy requires systemreserved.cpu + kubereserved.cpu to be greater than zero")
	}
	n := int(math.Ceil(float64(o.Reserved.MilliValue()) / 1000))
	all := o.Topology.CPUs()
	reserved := o.ReservedCPUs
	if reserved.IsEmpty() {
		reserved, _ = takeByTopology(o.Topology, all, n)
	}
	if !reserved.IsSubsetOf(all) {
		return nil, fmt.Errorf("[cpumanager] reserved cpus %q are not all among the node's cpus %q", reserved.String(), all.String())
	}
	if reserved.Size() != n {
		return nil, fmt.Errorf("[cpumanager] unable to reserve the required amount of CPUs (size of %s did not equal %d)", reserved, n)
	}
	m.policy = &static{topo: o.Topology, reserved: reserved, st: &m.st, reuse: map[string]cpuset.CPUSet{}}
	return m, nil
}

// Static: the policy is static.
func (m *Manager) Static() bool { return m.policy != nil }

// Reserved are the CPUs never given exclusively (static policy).
func (m *Manager) Reserved() cpuset.CPUSet {
	if m.policy == nil {
		return cpuset.New()
	}
	return m.policy.reserved
}

// Restore reads the checkpoint, refusing one written for another policy
// or inconsistent with the node's CPUs with kubelet's message, and writes
// it back (a new one when there was none).
func (m *Manager) Restore() error {
	path := filepath.Join(m.o.StateDir, state.FileName)
	refuse := func(err error) error {
		return fmt.Errorf("could not restore state from checkpoint: %v, please drain this node and delete the CPU manager checkpoint file %q before restarting Kubelet", err, path)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	st, err := state.Read(m.o.StateDir)
	switch {
	case err == nil:
		if st.Policy != m.o.Policy {
			return refuse(fmt.Errorf("configured policy %q differs from state checkpoint policy %q", m.o.Policy, st.Policy))
		}
		m.st.Default, m.st.Assign = st.Default, st.Assign
	case !errors.Is(err, fs.ErrNotExist):
		return refuse(err)
	}
	if m.policy != nil {
		if err := m.policy.validate(); err != nil {
			return fmt.Errorf("static policy: %w (please drain node and remove policy state file %q)", err, path)
		}
	}
	if err := m.storeLocked(); err != nil {
		return err
	}
	m.o.Logger.Info("CPU manager state restored", "policy", m.o.Policy, "defaultCpuSet", m.st.Default.String(), "reserved", m.Reserved().String())
	return nil
}

func (m *Manager) storeLocked() error {
	if err := state.Write(m.o.StateDir, m.st); err != nil {
		return fmt.Errorf("cpu manager: write checkpoint: %w", err)
	}
	return nil
}

// Allocate assigns the exclusive CPUs of pod's containers, init
// containers first, at admission; active are the pods whose containers
// may run (assignments of others are released first). The error is the
// policy's ("not enough cpus available to satisfy request: ...").
// Containers allocated before a failure keep their CPUs until the pod is
// no longer active, as in kubelet.
func (m *Manager) Allocate(pod *v1.Pod, active []*v1.Pod) error {
	if m.policy == nil {
		return nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.removeStaleLocked(active)
	defer func() {
		if err := m.storeLocked(); err != nil {
			m.o.Logger.Error("cannot store the CPU assignments", "err", err)
		}
	}()
	for i := range pod.Spec.InitContainers {
		c := &pod.Spec.InitContainers[i]
		if err := m.allocateLocked(pod, c, !kubetypes.IsSidecar(c)); err != nil {
			return err
		}
	}
	for i := range pod.Spec.Containers {
		if err := m.allocateLocked(pod, &pod.Spec.Containers[i], false); err != nil {
			return err
		}
	}
	return nil
}

// allocateLocked asks the topology manager with c's hints, as kubelet's
// topology manager does before the CPU manager allocates c, then
// allocates; m.mu is held.
func (m *Manager) allocateLocked(pod *v1.Pod, c *v1.Container, init bool) error {
	if m.o.Align != nil {
		if err := m.o.Align.Check(m.policy.hints(pod, c)); err != nil {
			return err
		}
	}
	return m.policy.allocate(pod, c, init)
}

// PodTopologyHints are pod's CPU hints for the topology manager's pod
// scope, after the assignments of pods not in active are released (as
// kubelet's CPU manager before giving hints).
func (m *Manager) PodTopologyHints(pod *v1.Pod, active []*v1.Pod) topologymanager.Hints {
	if m.policy == nil {
		return nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.removeStaleLocked(active)
	return m.policy.podHints(pod)
}

// TopologyHints are container c's CPU hints as the static policy gives
// them now on a machine with one NUMA node (nil with none).
func (m *Manager) TopologyHints(pod *v1.Pod, c *v1.Container) topologymanager.Hints {
	if m.policy == nil {
		return nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.policy.hints(pod, c)
}

// CPUSet is the cpuset container c is created with: its exclusive CPUs,
// else the shared pool; "" with the none policy (the runtime's default).
func (m *Manager) CPUSet(pod *v1.Pod, c *v1.Container) string {
	if m.policy == nil {
		return ""
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.cpusetLocked(string(pod.UID), c.Name).String()
}

func (m *Manager) cpusetLocked(uid, name string) cpuset.CPUSet {
	if set, ok := m.st.Assign[uid][name]; ok {
		return set
	}
	return m.st.Default
}

// Allocatable are the CPUs that may be given exclusively: all but the
// reserved ones with the static policy, none with none (kubelet's
// GetAllocatableCPUs).
func (m *Manager) Allocatable() cpuset.CPUSet {
	if m.policy == nil {
		return cpuset.New()
	}
	return m.o.Topology.CPUs().Difference(m.policy.reserved)
}

// ContainerExclusive: c has exclusive CPUs (kubelet's
// ContainerHasExclusiveCPUs; its CFS quota is then disabled).
func (m *Manager) ContainerExclusive(pod *v1.Pod, c *v1.Container) bool {
	return !m.Exclusive(string(pod.UID), c.Name).IsEmpty()
}

// PodExclusive: a container of pod has exclusive CPUs (kubelet's
// PodHasExclusiveCPUs; the pod cgroup's CFS quota is then disabled).
func (m *Manager) PodExclusive(pod *v1.Pod) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, set := range m.st.Assign[string(pod.UID)] {
		if !set.IsEmpty() {
			return true
		}
	}
	return false
}

// Exclusive are container c's exclusive CPUs (empty: it runs on the
// shared pool).
func (m *Manager) Exclusive(uid, name string) cpuset.CPUSet {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.st.Assign[uid][name]
}

// removeStaleLocked releases the CPUs of containers that are no longer
// in an active pod's spec (kubelet's removeStaleState). Until every pod
// source delivered its pods (after a restart) nothing is released.
func (m *Manager) removeStaleLocked(active []*v1.Pod) {
	if m.pods.Ready == nil || !m.pods.Ready() {
		return
	}
	keep := map[string][]string{}
	for _, p := range active {
		var names []string
		for _, c := range p.Spec.InitContainers {
			names = append(names, c.Name)
		}
		for _, c := range p.Spec.Containers {
			names = append(names, c.Name)
		}
		keep[string(p.UID)] = names
	}
	for uid, cs := range m.st.Assign {
		for name := range cs {
			if !slices.Contains(keep[uid], name) {
				m.o.Logger.Info("releasing exclusive CPUs", "podUID", uid, "containerName", name, "cpuset", cs[name].String())
				m.policy.release(uid, name)
			}
		}
	}
}

// Run reconciles every ReconcilePeriod (the static policy's loop; it
// returns at once with the none policy) until ctx ends.
func (m *Manager) Run(ctx context.Context, rt Runtime, pods Pods) {
	m.mu.Lock()
	m.rt, m.pods = rt, pods
	m.mu.Unlock()
	if m.policy == nil {
		return
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-m.o.Clock.After(m.o.ReconcilePeriod):
		}
		m.Reconcile(ctx)
	}
}

// Reconcile releases the CPUs of pods no longer active and pushes each
// running container of an active pod its cpuset (exclusive or the shared
// pool) when it differs from what was last pushed (kubelet's
// reconcileState). A failed update is retried at the next period.
func (m *Manager) Reconcile(ctx context.Context) {
	m.mu.Lock()
	rt, pods := m.rt, m.pods
	m.mu.Unlock()
	if m.policy == nil || rt == nil {
		return
	}
	active := pods.Active()
	m.mu.Lock()
	before := m.st.Default
	m.removeStaleLocked(active)
	if !before.Equals(m.st.Default) {
		if err := m.storeLocked(); err != nil {
			m.o.Logger.Error("cannot store the CPU assignments", "err", err)
		}
	}
	m.mu.Unlock()

	running, err := rt.RunningContainers(ctx)
	if err != nil {
		m.o.Logger.Error("cpu manager reconcile: cannot list containers", "err", err)
		return
	}
	inSpec := map[string][]string{}
	for _, p := range active {
		for _, c := range p.Spec.InitContainers {
			inSpec[string(p.UID)] = append(inSpec[string(p.UID)], c.Name)
		}
		for _, c := range p.Spec.Containers {
			inSpec[string(p.UID)] = append(inSpec[string(p.UID)], c.Name)
		}
	}
	type push struct {
		c    Container
		cpus string
	}
	var todo []push
	seen := map[string]bool{}
	m.mu.Lock()
	for _, c := range running {
		if !slices.Contains(inSpec[c.PodUID], c.Name) {
			continue
		}
		seen[c.ID] = true
		want := m.cpusetLocked(c.PodUID, c.Name)
		if want.IsEmpty() {
			continue
		}
		if s := want.String(); m.applied[c.ID] != s {
			todo = append(todo, push{c, s})
		}
	}
	for id := range m.applied {
		if !seen[id] {
			delete(m.applied, id)
		}
	}
	m.mu.Unlock()

	for _, p := range todo {
		if err := rt.UpdateContainerCPUSet(ctx, p.c.ID, p.cpus); err != nil {
			m.o.Logger.Error("cpu manager reconcile: cannot update the container's cpuset", "podUID", p.c.PodUID, "containerName", p.c.Name, "containerID", p.c.ID, "cpuset", p.cpus, "err", err)
			continue
		}
		m.mu.Lock()
		m.applied[p.c.ID] = p.cpus
		m.mu.Unlock()
	}
}
