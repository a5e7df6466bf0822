package csi

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/nodeagent/nodeagent/internal/testing/testlog"
)

const testNode = "node-a"

// shortDir is a temporary directory with a short path (unix socket paths
// are limited to 107 bytes).
func shortDir(t *testing.T) string {
	t.Helper()
	d, err := os.MkdirTemp("", "csi")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	return d
}

type registryRig struct {
	reg    *Registry
	client *fake.Clientset
	clock  *clocktesting.FakeClock
	dir    string // driver endpoints
	regDir string // plugins_registry
}

func newRegistryRig(t *testing.T, node *v1.Node) *registryRig {
	t.Helper()
	if node == nil {
		node = &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: testNode, UID: "node-uid"}}
	}
	client := fake.NewClientset(node)
	dir := shortDir(t)
	regDir := filepath.Join(dir, "plugins_registry")
	if err := os.MkdirAll(regDir, 0o750); err != nil {
		t.Fatal(err)
	}
	clk := clocktesting.NewFakeClock(time.Unix(1000, 0))
	info := &NodeInfo{NodeName: testNode, Nodes: client.CoreV1().Nodes(), CSINodes: client.StorageV1().CSINodes()}
	return &registryRig{reg: NewRegistry(regDir, info, clk, testlog.New(t)), client: client, clock: clk, dir: dir, regDir: regDir}
}

func (r *registryRig) csiNode(t *testing.T) *storagev1.CSINode {
	t.Helper()
	c, err := r.client.StorageV1().CSINodes().Get(context.Background(), testNode, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func (r *registryRig) node(t *testing.T) *v1.Node {
	t.Helper()
	n, err := r.client.CoreV1().Nodes().Get(context.Background(), testNode, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func TestRegistryRegistersAndDeregisters(t *testing.T) {
	ctx := context.Background()
	rig := newRegistryRig(t, nil)
	f := newFakeDriver("fake.csi")
	sock := f.serve(t, rig.dir, rig.regDir)
	// A hidden file and a regular file are not registration sockets.
	os.WriteFile(filepath.Join(rig.regDir, "notes"), nil, 0o600)

	rig.reg.Sync(ctx)

	if got, want := f.Calls(), []string{"GetInfo", "NodeGetInfo", "NotifyRegistrationStatus"}; !slices.Equal(got, want) {
		t.Fatalf("calls %v, want %v", got, want)
	}
	if s := f.statuses[0]; !s.PluginRegistered || s.Error != "" {
		t.Errorf("status %+v, want registered", s)
	}
	if d, ok := rig.reg.Driver("fake.csi"); !ok || d.Endpoint != f.endpoint {
		t.Fatalf("driver %+v %v, want registered at %s", d, ok, f.endpoint)
	}
	c := rig.csiNode(t)
	if len(c.OwnerReferences) != 1 || c.OwnerReferences[0].Kind != "Node" || c.OwnerReferences[0].UID != "node-uid" {
		t.Errorf("CSINode owner %+v, want the Node", c.OwnerReferences)
	}
	if len(c.Spec.Drivers) != 1 {
		t.Fatalf("CSINode drivers %+v, want one", c.Spec.Drivers)
	}
	d := c.Spec.Drivers[0]
	if d.Name != "fake.csi" || d.NodeID != "node-id-1" || !slices.Equal(d.TopologyKeys, []string{"topology.fake.csi/node"}) ||
		d.Allocatable == nil || *d.Allocatable.Count != 7 {
		t.Errorf("CSINode driver %+v", d)
	}
	n := rig.node(t)
	if n.Labels["topology.fake.csi/node"] != "n1" {
		t.Errorf("node labels %v, want the topology label", n.Labels)
	}
	if a := n.Annotations[annotationNodeID]; a != `{"fake.csi":"node-id-1"}` {
		t.Errorf("node ID annotation %q", a)
	}

	// Nothing changes: nothing is called again.
	rig.reg.Sync(ctx)
	if got := len(f.Calls()); got != 3 {
		t.Errorf("a second sync called the plugin: %v", f.Calls())
	}

	// The registrar goes away: the driver is deregistered, its CSINode
	// entry and node ID go, the topology label stays (as under kubelet).
	if err := os.Remove(sock); err != nil {
		t.Fatal(err)
	}
	rig.reg.Sync(ctx)
	if _, ok := rig.reg.Driver("fake.csi"); ok {
		t.Error("driver still registered after its socket went away")
	}
	if c := rig.csiNode(t); len(c.Spec.Drivers) != 0 {
		t.Errorf("CSINode drivers %+v after deregistration, want none", c.Spec.Drivers)
	}
	n = rig.node(t)
	if _, ok := n.Annotations[annotationNodeID]; ok {
		t.Errorf("node ID annotation %v after deregistration", n.Annotations)
	}
	if n.Labels["topology.fake.csi/node"] != "n1" {
		t.Errorf("topology label removed: %v", n.Labels)
	}
}

func TestRegistryRefuses(t *testing.T) {
	for _, tc := range []struct {
		desc   string
		mutate func(*fakeDriver)
		node   *v1.Node
		want   string // the status error sent to the registrar
	}{{
		desc:   "not a CSI plugin",
		mutate: func(f *fakeDriver) { f.typ = registerapi.DevicePlugin },
		want:   "RegisterPlugin error -- no handler registered for plugin type: DevicePlugin at socket ",
	}, {
		desc:   "only CSI 2.x",
		mutate: func(f *fakeDriver) { f.versions = []string{"2.0.0"} },
		want:   `RegisterPlugin error -- plugin validation failed with err: validation failed for CSI Driver fake.csi at endpoint `,
	}, {
		desc:   "no versions",
		mutate: func(f *fakeDriver) { f.versions = nil },
		want:   `Plugin returned an empty list for supported versions`,
	}, {
		desc:   "empty node ID",
		mutate: func(f *fakeDriver) { f.nodeID = "" },
		want:   "RegisterPlugin error -- plugin registration failed with err: error adding CSI driver node info: driverNodeID must not be empty",
	}, {
		desc: "topology label collision",
		node: &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: testNode, Labels: map[string]string{"topology.fake.csi/node": "other"}}},
		want: `detected topology value collision: driver reported "topology.fake.csi/node":"n1" but existing label is "topology.fake.csi/node":"other"`,
	}} {
		t.Run(tc.desc, func(t *testing.T) {
			ctx := context.Background()
			rig := newRegistryRig(t, tc.node)
			f := newFakeDriver("fake.csi")
			if tc.mutate != nil {
				tc.mutate(f)
			}
			f.serve(t, rig.dir, rig.regDir)
			rig.reg.Sync(ctx)
			if _, ok := rig.reg.Driver("fake.csi"); ok {
				t.Fatal("driver registered")
			}
			if len(f.statuses) != 1 || f.statuses[0].PluginRegistered || !strings.Contains(f.statuses[0].Error, tc.want) {
				t.Fatalf("statuses %+v, want one not registered with %q", f.statuses, tc.want)
			}
			// Retried after kubelet's back-off (500 ms), not before.
			rig.reg.Sync(ctx)
			if f.infos != 1 {
				t.Errorf("GetInfo called %d times within the back-off", f.infos)
			}
			rig.clock.Step(600 * time.Millisecond)
			rig.reg.Sync(ctx)
			if f.infos != 2 {
				t.Errorf("GetInfo called %d times after the back-off, want 2", f.infos)
			}
		})
	}
}

// A registrar that restarts (a new socket at the same path) registers
// again; a second driver keeps its own CSINode entry.
func TestRegistryReRegistersAndKeepsOtherDrivers(t *testing.T) {
	ctx := context.Background()
	rig := newRegistryRig(t, nil)
	a := newFakeDriver("a.csi")
	b := newFakeDriver("b.csi")
	b.topology, b.maxVolumes, b.nodeID = nil, 0, "b-id"
	a.serve(t, rig.dir, rig.regDir)
	b.serve(t, rig.dir, rig.regDir)
	rig.reg.Sync(ctx)
	if got := rig.reg.Drivers(); !slices.Equal(got, []string{"a.csi", "b.csi"}) {
		t.Fatalf("drivers %v", got)
	}
	c := rig.csiNode(t)
	if len(c.Spec.Drivers) != 2 {
		t.Fatalf("CSINode drivers %+v", c.Spec.Drivers)
	}
	for _, d := range c.Spec.Drivers {
		if d.Name == "b.csi" && (d.Allocatable != nil || len(d.TopologyKeys) != 0 || d.NodeID != "b-id") {
			t.Errorf("b's entry %+v: no topology, no allocatable count", d)
		}
	}
	// a's registrar restarts: the old socket file is replaced.
	a2 := newFakeDriver("a.csi")
	a2.nodeID = "node-id-2"
	sock := filepath.Join(rig.regDir, "a.csi-reg.sock")
	os.Remove(sock)
	time.Sleep(10 * time.Millisecond) // a new mtime even where inodes are reused
	os.MkdirAll(rig.dir+"/x", 0o750)
	a2.serve(t, rig.dir+"/x", rig.regDir)
	rig.reg.Sync(ctx)
	if a2.infos != 1 {
		t.Fatalf("the new registrar was asked %d times", a2.infos)
	}
	for _, d := range rig.csiNode(t).Spec.Drivers {
		if d.Name == "a.csi" && d.NodeID != "node-id-2" {
			t.Errorf("a's entry %+v, want the new node ID", d)
		}
	}
	if got := rig.reg.Drivers(); !slices.Equal(got, []string{"a.csi", "b.csi"}) {
		t.Fatalf("drivers %v", got)
	}
}
