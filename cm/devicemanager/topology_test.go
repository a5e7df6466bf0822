package devicemanager

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"

	"github.com/nodeagent/nodeagent/cm/topologymanager"
)

func onNUMA(d *pluginapi.Device, node int64) *pluginapi.Device {
	d.Topology = &pluginapi.TopologyInfo{Nodes: []*pluginapi.NUMANode{{ID: node}}}
	return d
}

func aligned(t *testing.T, e *env, policy string) {
	t.Helper()
	tm, err := topologymanager.New(policy, topologymanager.ScopeContainer, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	e.m.opts.Align = tm
}

// On one NUMA node, kubelet's device hints count only the free devices
// reporting node 0: a device reporting a node the machine lacks (or none,
// beside ones that report one) does not satisfy restricted or
// single-numa-node, which reject with TopologyAffinityError where
// best-effort allocates it.
func TestDeviceHintsOneNUMANode(t *testing.T) {
	for _, policy := range []string{topologymanager.PolicyBestEffort, topologymanager.PolicyRestricted, topologymanager.PolicySingleNumaNode} {
		t.Run(policy, func(t *testing.T) {
			e := newEnv(t, t.TempDir())
			aligned(t, e, policy)
			d := devs(pluginapi.Healthy, pluginapi.Healthy, pluginapi.Healthy)
			onNUMA(d[0], 0)
			onNUMA(d[1], 1)
			e.plugin("p.sock", &pluginapi.DevicePluginOptions{}, d)
			a := pod("a", nil, 1)
			if h := e.m.TopologyHints(a, &a.Spec.Containers[0]); len(h[res]) != 1 || !h[res][0].Preferred {
				t.Errorf("hints %v, want node 0 preferred", h)
			}
			if err := e.m.Allocate(a, nil); err != nil {
				t.Fatal(err)
			}
			b := pod("b", nil, 1)
			if h := e.m.TopologyHints(b, &b.Spec.Containers[0]); h[res] == nil || len(h[res]) != 0 {
				t.Errorf("hints %v, want an empty list: d1 is on node 1, d2 reports no node", h)
			}
			err := e.m.Allocate(b, []*v1.Pod{a})
			if policy == topologymanager.PolicyBestEffort {
				if err != nil {
					t.Errorf("best-effort: %v, want d1 or d2 allocated", err)
				}
				return
			}
			if !topologymanager.IsAffinityError(err) {
				t.Errorf("Allocate = %v, want TopologyAffinityError", err)
			}
		})
	}
}

// Devices without any topology give no preference: the device manager's
// own error rejects a request they cannot meet, as with kubelet.
func TestDeviceHintsWithoutTopology(t *testing.T) {
	e := newEnv(t, t.TempDir())
	aligned(t, e, topologymanager.PolicySingleNumaNode)
	e.plugin("p.sock", &pluginapi.DevicePluginOptions{}, devs(pluginapi.Healthy))
	a := pod("a", nil, 2)
	if h := e.m.TopologyHints(a, &a.Spec.Containers[0]); h[res] != nil {
		t.Errorf("hints %v, want no preference", h)
	}
	const msg = "requested number of devices unavailable for example.com/dev. Requested: 2, Available: 1"
	if err := e.m.Allocate(a, nil); err == nil || err.Error() != msg {
		t.Errorf("Allocate = %v, want %s", err, msg)
	}
}

// The pod scope's device hints are for the pod's limits (the most its
// containers hold at once), counting only the free devices on node 0.
func TestDevicePodTopologyHints(t *testing.T) {
	e := newEnv(t, t.TempDir())
	d := devs(pluginapi.Healthy, pluginapi.Healthy, pluginapi.Healthy)
	onNUMA(d[0], 0)
	onNUMA(d[1], 0)
	onNUMA(d[2], 1)
	e.plugin("p.sock", &pluginapi.DevicePluginOptions{}, d)
	// Init 2, apps 1+1: the pod needs 2, both free on node 0.
	if h := e.m.PodTopologyHints(pod("a", []int64{2}, 1, 1), nil); len(h[res]) != 1 {
		t.Errorf("hints %v, want node 0", h)
	}
	// Apps 2+1: 3, but d2 is on node 1.
	if h := e.m.PodTopologyHints(pod("b", []int64{1}, 2, 1), nil); h[res] == nil || len(h[res]) != 0 {
		t.Errorf("hints %v, want none possible", h)
	}
}

// With best-effort and restricted, kubelet's affinity on one NUMA node is
// node 0 and the devices reporting it are picked first; single-numa-node
// drops an affinity covering every node, so the devices are picked as
// without a topology manager (here the first by ID).
func TestDevicesPickedByAffinity(t *testing.T) {
	for _, tc := range []struct{ policy, want string }{
		{topologymanager.PolicyBestEffort, "d1"},
		{topologymanager.PolicyRestricted, "d1"},
		{topologymanager.PolicySingleNumaNode, "d0"},
	} {
		t.Run(tc.policy, func(t *testing.T) {
			e := newEnv(t, t.TempDir())
			aligned(t, e, tc.policy)
			d := devs(pluginapi.Healthy, pluginapi.Healthy)
			onNUMA(d[0], 1)
			onNUMA(d[1], 0)
			p := e.plugin("p.sock", &pluginapi.DevicePluginOptions{}, d)
			if err := e.m.Allocate(pod("a", nil, 1), nil); err != nil {
				t.Fatal(err)
			}
			if allocated, _ := p.calls(); len(allocated) != 1 || len(allocated[0]) != 1 || allocated[0][0] != tc.want {
				t.Errorf("Allocate calls = %v, want [[%s]]", allocated, tc.want)
			}
		})
	}
}
