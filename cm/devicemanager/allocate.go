package devicemanager

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"slices"
	"sort"

	"google.golang.org/protobuf/proto"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	resourcehelper "k8s.io/component-helpers/resource"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"

	"github.com/nodeagent/nodeagent/cm/devicemanager/checkpoint"
	"github.com/nodeagent/nodeagent/cm/topologymanager"
	"github.com/nodeagent/nodeagent/kubetypes"
	"github.com/nodeagent/nodeagent/runtime"
)

// allocation is one container's devices of one resource and the plugin's
// answer for them.
type allocation struct {
	ids  checkpoint.DevicesPerNUMA
	resp *pluginapi.ContainerAllocateResponse
}

func (a *allocation) set() sets.Set[string] {
	s := sets.New[string]()
	for _, ids := range a.ids {
		s.Insert(ids...)
	}
	return s
}

// podDevices: pod UID → container name → resource → allocation.
type podDevices map[types.UID]map[string]map[string]*allocation

func (p podDevices) get(uid types.UID, container, res string) *allocation {
	return p[uid][container][res]
}

func (p podDevices) put(uid types.UID, container, res string, a *allocation) {
	if p[uid] == nil {
		p[uid] = map[string]map[string]*allocation{}
	}
	if p[uid][container] == nil {
		p[uid][container] = map[string]*allocation{}
	}
	p[uid][container][res] = a
}

func (p podDevices) hasResource(res string) bool {
	for _, cs := range p {
		for _, rs := range cs {
			if _, ok := rs[res]; ok {
				return true
			}
		}
	}
	return false
}

// devices are the allocated devices by resource.
func (p podDevices) devices() map[string]sets.Set[string] {
	out := map[string]sets.Set[string]{}
	for _, cs := range p {
		for _, rs := range cs {
			for res, a := range rs {
				if out[res] == nil {
					out[res] = sets.New[string]()
				}
				out[res] = out[res].Union(a.set())
			}
		}
	}
	return out
}

func (p podDevices) entries() []checkpoint.PodDevicesEntry {
	var out []checkpoint.PodDevicesEntry
	for _, uid := range slices.Sorted(maps.Keys(p)) {
		for _, c := range slices.Sorted(maps.Keys(p[uid])) {
			for _, res := range slices.Sorted(maps.Keys(p[uid][c])) {
				a := p[uid][c][res]
				b, _ := proto.Marshal(a.resp) // a message we unmarshalled or got over gRPC
				out = append(out, checkpoint.PodDevicesEntry{PodUID: string(uid), ContainerName: c,
					ResourceName: res, DeviceIDs: a.ids, AllocResp: b})
			}
		}
	}
	return out
}

func (p podDevices) restore(entries []checkpoint.PodDevicesEntry, log *slog.Logger) {
	for _, e := range entries {
		resp := &pluginapi.ContainerAllocateResponse{}
		if err := proto.Unmarshal(e.AllocResp, resp); err != nil {
			log.Error("checkpointed allocation unreadable", "podUID", e.PodUID, "container", e.ContainerName, "resource", e.ResourceName, "err", err)
			continue
		}
		p.put(types.UID(e.PodUID), e.ContainerName, e.ResourceName, &allocation{ids: e.DeviceIDs, resp: resp})
	}
}

// Allocate is kubelet's resource allocator at admission: for each
// container of pod (init containers first) it allocates the devices the
// container's limits ask of registered plugins. Devices of pods neither
// pod nor in active are freed first. An error is the admission failure
// (UnexpectedAdmissionError).
func (m *Manager) Allocate(pod *v1.Pod, active []*v1.Pod) error {
	m.freeInactive(pod, active)
	reuse := map[string]sets.Set[string]{}
	for i := range pod.Spec.InitContainers {
		c := &pod.Spec.InitContainers[i]
		if err := m.allocateContainer(pod, c, reuse); err != nil {
			return err
		}
		m.mu.Lock()
		for res, a := range m.pods[pod.UID][c.Name] {
			if reuse[res] == nil {
				reuse[res] = sets.New[string]()
			}
			if kubetypes.IsSidecar(c) {
				// A sidecar keeps running: its devices are not reusable.
				reuse[res] = reuse[res].Difference(a.set())
			} else {
				reuse[res] = reuse[res].Union(a.set())
			}
		}
		m.mu.Unlock()
	}
	for i := range pod.Spec.Containers {
		c := &pod.Spec.Containers[i]
		if err := m.allocateContainer(pod, c, reuse); err != nil {
			return err
		}
		m.mu.Lock()
		for res, a := range m.pods[pod.UID][c.Name] {
			if reuse[res] != nil {
				reuse[res] = reuse[res].Difference(a.set())
			}
		}
		m.mu.Unlock()
	}
	return nil
}

// freeInactive is kubelet's UpdateAllocatedDevices.
func (m *Manager) freeInactive(pod *v1.Pod, active []*v1.Pod) {
	keep := sets.New(pod.UID)
	for _, p := range active {
		keep.Insert(p.UID)
	}
	m.mu.Lock()
	freed := false
	for uid := range m.pods {
		if !keep.Has(uid) {
			delete(m.pods, uid)
			freed = true
		}
	}
	if freed {
		m.allocated = m.pods.devices()
	}
	m.mu.Unlock()
	if freed {
		m.checkpoint()
	}
}

func (m *Manager) isPluginResource(res string) bool {
	if _, ok := m.healthy[res]; ok {
		return true
	}
	return m.pods.hasResource(res)
}

// allocateContainer is kubelet's allocateContainerResources, after the
// topology manager accepted the container's hints.
func (m *Manager) allocateContainer(pod *v1.Pod, c *v1.Container, reuse map[string]sets.Set[string]) error {
	if m.opts.Align != nil {
		m.mu.Lock()
		h := m.hintsLocked(pod, c, reuse)
		m.mu.Unlock()
		if err := m.opts.Align.Check(h); err != nil {
			return err
		}
	}
	names := slices.Sorted(maps.Keys(c.Resources.Limits))
	changed := false
	defer func() {
		if changed {
			m.checkpoint()
		}
	}()
	for _, name := range names {
		res := string(name)
		q := c.Resources.Limits[name]
		m.mu.Lock()
		plugin := m.isPluginResource(res)
		m.mu.Unlock()
		if !plugin {
			continue
		}
		// kubelet's isContainerAlreadyRunning, asked outside the lock and
		// only for a container that has devices already.
		m.mu.Lock()
		had := m.pods.get(pod.UID, c.Name, res) != nil
		m.mu.Unlock()
		running := had && m.opts.ContainerRunning != nil && m.opts.ContainerRunning(pod.UID, c.Name)
		ids, err := m.devicesToAllocate(pod.UID, c.Name, res, int(q.Value()), reuse[res], running)
		if err != nil {
			return err
		}
		if ids.Len() == 0 {
			continue
		}
		m.mu.Lock()
		e := m.endpoints[res]
		m.mu.Unlock()
		if e == nil || e.client == nil {
			m.recomputeAllocated()
			return fmt.Errorf("unknown Device Plugin %s", res)
		}
		list := sets.List(ids)
		ctx, cancel := context.WithTimeout(context.Background(), DialTimeout)
		start := m.clock.Now()
		resp, err := e.client.Allocate(ctx, &pluginapi.AllocateRequest{
			ContainerRequests: []*pluginapi.ContainerAllocateRequest{{DevicesIds: list}}})
		m.met.allocDuration.WithLabelValues(res).Observe(m.clock.Since(start).Seconds())
		cancel()
		if err != nil {
			m.recomputeAllocated()
			return err
		}
		if len(resp.ContainerResponses) == 0 {
			m.recomputeAllocated()
			return fmt.Errorf("no containers return in allocation response %v", resp)
		}
		m.mu.Lock()
		m.pods.put(pod.UID, c.Name, res, &allocation{ids: m.byNUMA(res, list), resp: resp.ContainerResponses[0]})
		m.allocated = m.pods.devices()
		m.mu.Unlock()
		changed = true
	}
	return nil
}

func (m *Manager) recomputeAllocated() {
	m.mu.Lock()
	m.allocated = m.pods.devices()
	m.mu.Unlock()
}

// byNUMA groups ids by their devices' NUMA nodes (-1 without topology), as
// kubelet records them; m.mu is held.
func (m *Manager) byNUMA(res string, ids []string) checkpoint.DevicesPerNUMA {
	out := checkpoint.DevicesPerNUMA{}
	for _, id := range ids {
		d := m.devices[res][id]
		if d == nil || d.Topology == nil || len(d.Topology.Nodes) == 0 {
			out[-1] = append(out[-1], id)
			continue
		}
		for _, n := range d.Topology.Nodes {
			out[n.ID] = append(out[n.ID], id)
		}
	}
	return out
}

// devicesToAllocate is kubelet's devicesToAllocate without topology
// alignment: the devices to allocate now (none when the container has
// them already), marked allocated.
func (m *Manager) devicesToAllocate(uid types.UID, container, res string, required int, reusable sets.Set[string], running bool) (sets.Set[string], error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	needed := required
	var have sets.Set[string]
	if a := m.pods.get(uid, container, res); a != nil {
		have = a.set()
		needed -= have.Len()
		if needed != 0 {
			return nil, fmt.Errorf("pod %q container %q changed request for resource %q from %d to %d", uid, container, res, have.Len(), required)
		}
	}
	if have != nil && running {
		return nil, nil
	}
	healthy, registered := m.healthy[res]
	if !registered {
		return nil, fmt.Errorf("cannot allocate unregistered device %s", res)
	}
	if healthy.Len() == 0 {
		return nil, fmt.Errorf("no healthy devices present; cannot allocate unhealthy devices %s", res)
	}
	if !healthy.IsSuperset(have) {
		return nil, fmt.Errorf("previously allocated devices are no longer healthy; cannot allocate unhealthy devices %s", res)
	}
	if needed == 0 {
		return nil, nil
	}
	picked := sets.New[string]()
	take := func(from sets.Set[string]) bool {
		if m.allocated[res] == nil {
			m.allocated[res] = sets.New[string]()
		}
		for _, id := range sets.List(from.Difference(picked)) {
			m.allocated[res].Insert(id)
			picked.Insert(id)
			needed--
			if needed == 0 {
				return true
			}
		}
		return false
	}
	if reusable != nil && take(reusable) {
		return picked, nil
	}
	available := healthy.Difference(m.allocated[res])
	if available.Len() < needed {
		return nil, fmt.Errorf("requested number of devices unavailable for %s. Requested: %d, Available: %d", res, needed, available.Len())
	}
	// With an affinity (the topology manager's best-effort and
	// restricted on one NUMA node: node 0), kubelet's filterByAffinity:
	// the devices on it first, the plugin's preference among them when
	// they are more than needed, then the others on a NUMA node, then
	// those without one.
	aligned, unaligned, noAffinity := m.filterByAffinityLocked(res, available)
	if aligned.Len() > 0 && needed < aligned.Len() {
		preferred, err := m.preferredLocked(res, aligned.Union(picked), picked, required)
		if err != nil {
			return nil, err
		}
		if take(preferred.Intersection(aligned)) || take(aligned) {
			return picked, nil
		}
		return nil, fmt.Errorf("unexpectedly allocated less resources than required. Requested: %d, Got: %d", required, required-needed)
	}
	if take(aligned) {
		return picked, nil
	}
	preferred, err := m.preferredLocked(res, available.Union(picked), picked, required)
	if err != nil {
		return nil, err
	}
	if take(preferred.Intersection(available)) || take(unaligned) || take(noAffinity) {
		return picked, nil
	}
	return nil, fmt.Errorf("unexpectedly allocated less resources than required. Requested: %d, Got: %d", required, required-needed)
}

// preferredLocked asks the plugin's GetPreferredAllocation when it offers
// it; m.mu is held and released around the RPC, as kubelet does.
func (m *Manager) preferredLocked(res string, available, mustInclude sets.Set[string], size int) (sets.Set[string], error) {
	e, ok := m.endpoints[res]
	if !ok {
		return nil, fmt.Errorf("endpoint not found in cache for a registered resource: %s", res)
	}
	if e.client == nil || e.opts == nil || !e.opts.GetPreferredAllocationAvailable {
		return sets.New[string](), nil
	}
	m.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), DialTimeout)
	resp, err := e.client.GetPreferredAllocation(ctx, &pluginapi.PreferredAllocationRequest{
		ContainerRequests: []*pluginapi.ContainerPreferredAllocationRequest{{
			AvailableDeviceIDs:   sets.List(available),
			MustIncludeDeviceIDs: sets.List(mustInclude),
			AllocationSize:       int32(size),
		}}})
	cancel()
	m.mu.Lock()
	if err != nil {
		return nil, fmt.Errorf("device plugin GetPreferredAllocation rpc failed with err: %v", err)
	}
	if len(resp.ContainerResponses) > 0 {
		return sets.New(resp.ContainerResponses[0].DeviceIDs...), nil
	}
	return sets.New[string](), nil
}

// SanitizeAllocatable is kubelet's UpdatePluginResources: each device
// resource's allocatable is raised to what is allocated, so that pods
// admitted before (or before an agent restart) still fit.
func (m *Manager) SanitizeAllocatable(alloc v1.ResourceList) v1.ResourceList {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := alloc
	cloned := false
	for res, ids := range m.allocated {
		name := v1.ResourceName(res)
		if q, ok := alloc[name]; ok && q.Value() >= int64(ids.Len()) {
			continue
		}
		if !cloned {
			out, cloned = v1.ResourceList{}, true
			maps.Copy(out, alloc)
		}
		out[name] = *resource.NewQuantity(int64(ids.Len()), resource.DecimalSI)
	}
	return out
}

// ContainerDevices are one resource's devices of a container, with their
// NUMA nodes (-1: none), for the pod-resources API.
type ContainerDevices struct {
	Resource string
	ByNUMA   map[int64][]string
}

// ContainerDevicesOf are the devices allocated to container name of pod
// uid, by resource name.
func (m *Manager) ContainerDevicesOf(uid types.UID, name string) []ContainerDevices {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []ContainerDevices
	byRes := m.pods[uid][name]
	for _, res := range slices.Sorted(maps.Keys(byRes)) {
		out = append(out, ContainerDevices{Resource: res, ByNUMA: maps.Clone(byRes[res].ids)})
	}
	return out
}

// RunOptions is kubelet's GetDeviceRunContainerOptions: container c's
// devices, mounts, envs, annotations and CDI devices from its plugins'
// Allocate responses, after PreStartContainer for plugins that ask for
// it. A container whose devices are not allocated (a pod admitted while
// its plugin was away) is allocated now.
func (m *Manager) RunOptions(ctx context.Context, pod *v1.Pod, c *v1.Container) (RunContainerOptions, error) {
	realloc := false
	for _, name := range slices.Sorted(maps.Keys(c.Resources.Limits)) {
		res := string(name)
		q := c.Resources.Limits[name]
		m.mu.Lock()
		plugin := m.isPluginResource(res)
		m.mu.Unlock()
		if !plugin || q.Value() == 0 {
			continue
		}
		if err := m.preStart(ctx, pod.UID, c.Name, res); err != nil {
			return RunContainerOptions{}, err
		}
		m.mu.Lock()
		missing := m.pods.get(pod.UID, c.Name, res) == nil
		m.mu.Unlock()
		realloc = realloc || missing
	}
	if realloc {
		if err := m.allocateContainer(pod, c, nil); err != nil {
			return RunContainerOptions{}, err
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return runOptions(m.pods[pod.UID][c.Name]), nil
}

func (m *Manager) preStart(ctx context.Context, uid types.UID, container, res string) error {
	m.mu.Lock()
	e, ok := m.endpoints[res]
	if !ok {
		m.mu.Unlock()
		return fmt.Errorf("endpoint not found in cache for a registered resource: %s", res)
	}
	if e.client == nil || e.opts == nil || !e.opts.PreStartRequired {
		m.mu.Unlock()
		return nil
	}
	a := m.pods.get(uid, container, res)
	if a == nil {
		m.mu.Unlock()
		return fmt.Errorf("no devices found allocated in local cache for pod %s, container %s, resource %s", uid, container, res)
	}
	ids := sets.List(a.set())
	m.mu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, DialTimeout)
	defer cancel()
	if _, err := e.client.PreStartContainer(ctx, &pluginapi.PreStartContainerRequest{DevicesIds: ids}); err != nil {
		return fmt.Errorf("device plugin PreStartContainer rpc failed with err: %v", err)
	}
	return nil
}

// RunContainerOptions are a container's device-plugin allocations merged
// (kubelet's DeviceRunContainerOptions). Its fields match
// containerspec.Devices so that one converts to the other.
type RunContainerOptions struct {
	Devices     []runtime.Device
	Mounts      []runtime.Mount
	Env         []string
	Annotations map[string]string
	CDIDevices  []string
}

// runOptions merges a container's responses as kubelet's
// deviceRunContainerOptions does: envs, mounts (by container path),
// devices (by container path), annotations and CDI devices, the first
// one for a key winning; resources in name order.
func runOptions(byRes map[string]*allocation) RunContainerOptions {
	var o RunContainerOptions
	envs := map[string]string{}
	mounts, devs, cdi := sets.New[string](), sets.New[string](), sets.New[string]()
	for _, res := range slices.Sorted(maps.Keys(byRes)) {
		r := byRes[res].resp
		if r == nil {
			continue
		}
		for _, k := range slices.Sorted(maps.Keys(r.Envs)) {
			if _, ok := envs[k]; !ok {
				envs[k] = r.Envs[k]
			}
		}
		for _, mt := range r.Mounts {
			if mounts.Has(mt.ContainerPath) {
				continue
			}
			mounts.Insert(mt.ContainerPath)
			ensureHostPath(mt.HostPath)
			o.Mounts = append(o.Mounts, runtime.Mount{HostPath: mt.HostPath, ContainerPath: mt.ContainerPath, ReadOnly: mt.ReadOnly})
		}
		for _, d := range r.Devices {
			if devs.Has(d.ContainerPath) {
				continue
			}
			devs.Insert(d.ContainerPath)
			o.Devices = append(o.Devices, runtime.Device{HostPath: d.HostPath, ContainerPath: d.ContainerPath, Permissions: d.Permissions})
		}
		for k, v := range r.Annotations {
			if o.Annotations == nil {
				o.Annotations = map[string]string{}
			}
			if _, ok := o.Annotations[k]; !ok {
				o.Annotations[k] = v
			}
		}
		for _, c := range r.CdiDevices {
			if !cdi.Has(c.Name) {
				cdi.Insert(c.Name)
				o.CDIDevices = append(o.CDIDevices, c.Name)
			}
		}
	}
	keys := make([]string, 0, len(envs))
	for k := range envs {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		o.Env = append(o.Env, k+"="+envs[k])
	}
	return o
}

// ensureHostPath creates a missing mount source as a directory, as
// containerd's CRI plugin does for kubelet's mounts (plugins such as the
// sample device plugin return host paths they created in their own
// container).
func ensureHostPath(p string) {
	if _, err := os.Stat(p); os.IsNotExist(err) {
		_ = os.MkdirAll(p, 0o755)
	}
}

// PodTopologyHints are pod's device hints for the topology manager's pod
// scope, after the devices of pods neither pod nor in active are freed:
// kubelet's, by plugin resource of the pod's limits (the most its
// containers hold at once), counting the devices the pod holds already
// (an empty list when they are not its request) and no reusable ones.
func (m *Manager) PodTopologyHints(pod *v1.Pod, active []*v1.Pod) topologymanager.Hints {
	m.freeInactive(pod, active)
	m.mu.Lock()
	defer m.mu.Unlock()
	h := topologymanager.Hints{}
	for name, q := range resourcehelper.PodLimits(pod, resourcehelper.PodResourcesOptions{ExcludeOverhead: true}) {
		res := string(name)
		if !m.isPluginResource(res) {
			continue
		}
		have := sets.New[string]()
		for _, byRes := range m.pods[pod.UID] {
			if a := byRes[res]; a != nil {
				have = have.Union(a.set())
			}
		}
		h[res] = m.resourceHintLocked(res, int(q.Value()), have, m.healthy[res].Difference(m.allocated[res]), nil)
	}
	return h
}

// TopologyHints are container c's device hints now, as kubelet's device
// manager gives them on a machine with one NUMA node (hintsLocked).
func (m *Manager) TopologyHints(pod *v1.Pod, c *v1.Container) topologymanager.Hints {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.hintsLocked(pod, c, nil)
}

// hintsLocked are kubelet's device hints for c on a machine with one NUMA
// node, by plugin resource c's limits ask for: nil (no preference) when
// none of the resource's devices reports a NUMA node; node 0 when c has
// its devices already and as many as it asks (an empty list when not), or
// when enough of the free devices, with those reusable from the pod's init
// containers, report node 0; an empty list otherwise. A device reporting
// another node (one this machine lacks) does not count, as in kubelet,
// where it counts only for a mask holding that node. m.mu is held.
func (m *Manager) hintsLocked(pod *v1.Pod, c *v1.Container, reuse map[string]sets.Set[string]) topologymanager.Hints {
	h := topologymanager.Hints{}
	for name, q := range c.Resources.Limits {
		res := string(name)
		if !m.isPluginResource(res) {
			continue
		}
		var have sets.Set[string]
		if a := m.pods.get(pod.UID, c.Name, res); a != nil {
			have = a.set()
		}
		h[res] = m.resourceHintLocked(res, int(q.Value()), have, m.healthy[res].Difference(m.allocated[res]), reuse[res])
	}
	return h
}

// resourceHintLocked is kubelet's hint list for requested devices of res
// on one NUMA node, given those held already, the available and the
// reusable ones (hintsLocked); m.mu is held.
func (m *Manager) resourceHintLocked(res string, requested int, have, available, reusable sets.Set[string]) []topologymanager.Hint {
	onNode0 := func(id string) (bool, bool) { // on node 0, has topology
		d := m.devices[res][id]
		if d == nil || d.Topology == nil || len(d.Topology.Nodes) == 0 {
			return false, false
		}
		for _, n := range d.Topology.Nodes {
			if n != nil && n.ID == 0 {
				return true, true
			}
		}
		return false, true
	}
	aligned := false
	for _, d := range m.devices[res] {
		if d.Topology != nil && len(d.Topology.Nodes) > 0 {
			aligned = true
			break
		}
	}
	if !aligned {
		return nil
	}
	count := func(ids sets.Set[string]) int {
		n := 0
		for id := range ids {
			if ok, _ := onNode0(id); ok {
				n++
			}
		}
		return n
	}
	if have.Len() > 0 {
		if have.Len() != requested || count(have) < requested {
			return []topologymanager.Hint{}
		}
		return topologymanager.NodeHint()
	}
	if available.Union(reusable).Len() < requested {
		return []topologymanager.Hint{}
	}
	matching := 0
	for id := range reusable {
		on, topo := onNode0(id)
		if !topo {
			continue
		}
		if !on {
			return []topologymanager.Hint{}
		}
		matching++
	}
	if matching+count(available) < requested {
		return []topologymanager.Hint{}
	}
	return topologymanager.NodeHint()
}

// filterByAffinityLocked splits available devices of res as kubelet's
// filterByAffinity: those on a NUMA node of the topology manager's
// affinity, those on other nodes, those without a node. Without an
// affinity, or when no device of res reports a node, all are in the last
// set. m.mu is held.
func (m *Manager) filterByAffinityLocked(res string, available sets.Set[string]) (aligned, unaligned, noAffinity sets.Set[string]) {
	aligned, unaligned, noAffinity = sets.New[string](), sets.New[string](), sets.New[string]()
	var affinity []int
	if m.opts.Align != nil {
		affinity = m.opts.Align.Affinity()
	}
	hasTopology := false
	for _, d := range m.devices[res] {
		if d.Topology != nil && len(d.Topology.Nodes) > 0 {
			hasTopology = true
			break
		}
	}
	if affinity == nil || !hasTopology {
		return aligned, unaligned, available.Clone()
	}
	for id := range available {
		d := m.devices[res][id]
		if d == nil || d.Topology == nil || len(d.Topology.Nodes) == 0 {
			noAffinity.Insert(id)
			continue
		}
		in := false
		for _, n := range d.Topology.Nodes {
			if n != nil && slices.Contains(affinity, int(n.ID)) {
				in = true
			}
		}
		if in {
			aligned.Insert(id)
		} else {
			unaligned.Insert(id)
		}
	}
	return aligned, unaligned, noAffinity
}
