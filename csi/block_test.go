package csi

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	csipb "github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"

	"github.com/nodeagent/nodeagent/internal/testing/testlog"
	"github.com/nodeagent/nodeagent/pods/volume"
)

// fakeDeviceContent marks a file as a device for fakeBlock (the fake
// driver's block publish targets hold it).
const fakeDeviceContent = "device"

// fakeBlock is the host side of block volumes without bind mounts or
// loop devices: a bind makes the file and counts it as a device, a loop
// device is a flag. Its calls go into the fake driver's call list, so a
// test sees driver and host steps in one order.
type fakeBlock struct {
	f       *fakeDriver
	root    string
	mu      sync.Mutex
	devices map[string]bool
	loops   map[string]bool
}

func newFakeBlock(f *fakeDriver, root string) *fakeBlock {
	return &fakeBlock{f: f, root: root, devices: map[string]bool{}, loops: map[string]bool{}}
}

func (b *fakeBlock) rel(p string) string { r, _ := filepath.Rel(b.root, p); return r }

func (b *fakeBlock) bindDevice(dev, file string) error {
	b.f.record("Bind " + b.rel(file))
	if !b.isDevice(dev) {
		return errors.New("not a device: " + dev)
	}
	if err := os.WriteFile(file, nil, 0o640); err != nil {
		return err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.devices[file] = true
	return nil
}

func (b *fakeBlock) unbindDevice(file string) error {
	b.f.record("Unbind " + b.rel(file))
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.loops[file] {
		return errors.New("busy: a loop device is over " + file)
	}
	delete(b.devices, file)
	if err := os.Remove(file); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}

func (b *fakeBlock) isDevice(p string) bool {
	b.mu.Lock()
	ok := b.devices[p]
	b.mu.Unlock()
	if ok {
		_, err := os.Lstat(p)
		return err == nil
	}
	c, err := os.ReadFile(p)
	return err == nil && string(c) == fakeDeviceContent
}

func (b *fakeBlock) attachLoop(p string) error {
	b.f.record("AttachLoop " + b.rel(p))
	b.mu.Lock()
	defer b.mu.Unlock()
	b.loops[p] = true
	return nil
}

func (b *fakeBlock) detachLoop(p string) error {
	b.f.record("DetachLoop " + b.rel(p))
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.loops, p)
	return nil
}

func (b *fakeBlock) loopAttached(p string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.loops[p]
}

func blockClaim(name, pvName string, uid types.UID) (*v1.PersistentVolumeClaim, *v1.PersistentVolume) {
	pvc, pv := boundClaim(name, pvName, uid)
	block := v1.PersistentVolumeBlock
	pv.Spec.VolumeMode, pvc.Spec.VolumeMode = &block, &block
	pv.Spec.MountOptions, pv.Spec.CSI.FSType = nil, ""
	return pvc, pv
}

func blockPod(uid types.UID, claim string, readOnly bool) *v1.Pod {
	pod := claimPod(uid, claim, readOnly)
	pod.Spec.Containers = []v1.Container{{Name: "c", VolumeDevices: []v1.VolumeDevice{{Name: "data", DevicePath: "/dev/xvda"}}}}
	return pod
}

func newBlockRig(t *testing.T, objs ...runtime.Object) (*mounterRig, *fakeBlock, *record.FakeRecorder) {
	t.Helper()
	rig := newMounterRig(t, objs...)
	fb := newFakeBlock(rig.f, rig.root)
	rec := record.NewFakeRecorder(50)
	rig.m.block, rig.m.Recorder = fb, rec
	return rig, fb, rec
}

func exists(p string) bool { _, err := os.Lstat(p); return err == nil }

// The paths and the order of kubelet's MapVolume and UnmapVolume /
// UnmapDevice for a CSI block volume: staged once, published per pod at
// kubelet's paths with a block capability, bound, linked and locked with
// a loop device; torn down in the reverse order, unstaged after the last
// pod, nothing left.
func TestMapBlockVolumeStagesOncePublishesAndUnmaps(t *testing.T) {
	ctx := context.Background()
	pvc, pv := blockClaim("claim", "pv-1", "pvc-uid")
	rig, fb, rec := newBlockRig(t, pvc, pv, csiDriverObj(false))
	base := filepath.Join(rig.root, "plugins/kubernetes.io/csi/volumeDevices")
	staging := filepath.Join(base, "staging/pv-1")
	publish1 := filepath.Join(base, "publish/pv-1/uid-1")

	pod1 := blockPod("uid-1", "claim", false)
	p1, err := rig.m.SetUp(ctx, pod1, rig.podDir("uid-1"), &pod1.Spec.Volumes[0])
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(rig.podDir("uid-1"), "volumeDevices/kubernetes.io~csi/pv-1"); p1 != want {
		t.Errorf("path %s, want kubelet's %s", p1, want)
	}
	want := []string{"NodeGetCapabilities", "NodeStageVolume", "NodePublishVolume",
		"Bind plugins/kubernetes.io/csi/volumeDevices/pv-1/dev/uid-1", "AttachLoop plugins/kubernetes.io/csi/volumeDevices/pv-1/dev/uid-1"}
	if got := rig.f.Calls(); !slices.Equal(got, want) {
		t.Fatalf("calls\n %v, want\n %v", got, want)
	}
	st := rig.f.stage[0]
	if st.VolumeId != "vol-1" || st.StagingTargetPath != staging || st.VolumeCapability.GetBlock() == nil ||
		st.VolumeCapability.GetAccessMode().GetMode() != csipb.VolumeCapability_AccessMode_SINGLE_NODE_WRITER {
		t.Errorf("stage request %+v", st)
	}
	pub := rig.f.publish[0]
	if pub.TargetPath != publish1 || pub.StagingTargetPath != staging || pub.Readonly || pub.VolumeCapability.GetBlock() == nil ||
		pub.VolumeContext[ctxPodUID] != "uid-1" || pub.VolumeContext["k"] != "v" {
		t.Errorf("publish request %+v", pub)
	}
	if target, err := os.Readlink(p1); err != nil || target != publish1 {
		t.Errorf("pod's symlink -> %q %v, want the publish path %s", target, err, publish1)
	}
	d, err := readVolData(filepath.Join(base, "pv-1/data"))
	if err != nil || d.SpecVolID != "pv-1" || d.VolumeHandle != "vol-1" || d.DriverName != "fake.csi" || d.NodeName != testNode {
		t.Errorf("vol_data.json %+v %v", d, err)
	}
	events := drain(rec)
	if len(events) != 2 || !strings.HasPrefix(events[0], `Normal SuccessfulMountVolume MapVolume.MapPodDevice succeeded for volume "pv-1" globalMapPath`) {
		t.Errorf("events %q", events)
	}

	// A resync: mapped already, nothing done.
	rig.f.calls = nil
	if _, err := rig.m.SetUp(ctx, pod1, rig.podDir("uid-1"), &pod1.Spec.Volumes[0]); err != nil {
		t.Fatal(err)
	}
	if got := rig.f.Calls(); len(got) != 0 {
		t.Errorf("a mapped volume was mapped again: %v", got)
	}

	// A second pod, read-only: published for it, not staged again.
	pod2 := blockPod("uid-2", "claim", true)
	if _, err := rig.m.SetUp(ctx, pod2, rig.podDir("uid-2"), &pod2.Spec.Volumes[0]); err != nil {
		t.Fatal(err)
	}
	want = []string{"NodeGetCapabilities", "NodePublishVolume",
		"Bind plugins/kubernetes.io/csi/volumeDevices/pv-1/dev/uid-2", "AttachLoop plugins/kubernetes.io/csi/volumeDevices/pv-1/dev/uid-2"}
	if got := rig.f.Calls(); !slices.Equal(got, want) {
		t.Fatalf("second pod's calls\n %v, want\n %v", got, want)
	}
	if !rig.f.publish[1].Readonly {
		t.Error("a read-only claim not published read-only")
	}

	// The first pod goes: the reverse order, not unstaged.
	rig.f.calls = nil
	if err := rig.m.TearDown(ctx, rig.podDir("uid-1")); err != nil {
		t.Fatal(err)
	}
	want = []string{"DetachLoop plugins/kubernetes.io/csi/volumeDevices/pv-1/dev/uid-1",
		"Unbind plugins/kubernetes.io/csi/volumeDevices/pv-1/dev/uid-1", "NodeUnpublishVolume"}
	if got := rig.f.Calls(); !slices.Equal(got, want) {
		t.Fatalf("first teardown\n %v, want\n %v", got, want)
	}
	if u := rig.f.unpub[0]; u.TargetPath != publish1 || u.VolumeId != "vol-1" {
		t.Errorf("unpublish %+v", u)
	}
	if exists(p1) || exists(filepath.Join(rig.podDir("uid-1"), "volumeDevices")) {
		t.Error("the first pod's volumeDevices stay")
	}

	// The last pod goes: unstaged, and nothing of the volume is left.
	rig.f.calls = nil
	if err := rig.m.TearDown(ctx, rig.podDir("uid-2")); err != nil {
		t.Fatal(err)
	}
	want = []string{"DetachLoop plugins/kubernetes.io/csi/volumeDevices/pv-1/dev/uid-2",
		"Unbind plugins/kubernetes.io/csi/volumeDevices/pv-1/dev/uid-2", "NodeUnpublishVolume", "NodeGetCapabilities", "NodeUnstageVolume"}
	if got := rig.f.Calls(); !slices.Equal(got, want) {
		t.Fatalf("last teardown\n %v, want\n %v", got, want)
	}
	if u := rig.f.unstage[0]; u.StagingTargetPath != staging || u.VolumeId != "vol-1" {
		t.Errorf("unstage %+v", u)
	}
	for _, p := range []string{staging, filepath.Join(base, "publish/pv-1"), filepath.Join(base, "pv-1")} {
		if exists(p) {
			t.Errorf("%s stays", p)
		}
	}
	if len(fb.loops) != 0 || len(fb.devices) != 0 {
		t.Errorf("loop devices %v, binds %v stay", fb.loops, fb.devices)
	}
	// Again: a no-op.
	rig.f.calls = nil
	if err := rig.m.TearDown(ctx, rig.podDir("uid-2")); err != nil || len(rig.f.Calls()) != 0 {
		t.Errorf("second teardown: %v %v", err, rig.f.Calls())
	}
}

func drain(rec *record.FakeRecorder) []string {
	var out []string
	for {
		select {
		case e := <-rec.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}

// A teardown cut short (the agent killed after the symlink went) and an
// agent restart (a new Mounter over the same rootDir): the next teardown
// finds the pod's bind and publish target and finishes, and the
// reconstruction lists an attachable volume in volumesInUse.
func TestUnmapBlockVolumeAfterRestart(t *testing.T) {
	ctx := context.Background()
	pvc, pv := blockClaim("claim", "pv-1", "pvc-uid")
	rig, fb, _ := newBlockRig(t, pvc, pv, csiDriverObj(true), attachedVA())
	pod := blockPod("uid-1", "claim", false)
	p, err := rig.m.SetUp(ctx, pod, rig.podDir("uid-1"), &pod.Spec.Volumes[0])
	if err != nil {
		t.Fatal(err)
	}

	// A restarted agent: reconstruction from the pod's symlink.
	m2 := statusAtOnce(&Mounter{RootDir: rig.root, NodeName: testNode, Drivers: rig.m.Drivers, API: rig.m.API, block: fb})
	rv := m2.Reconstruct(ctx, testlog.New(t))
	if len(rv) != 1 || rv[0].SpecName != "pv-1" || rv[0].Handle != "vol-1" || !rv[0].Mounted || !rv[0].Block {
		t.Errorf("reconstructed %+v", rv)
	}
	if got := m2.VolumesInUse(); !slices.Equal(got, []v1.UniqueVolumeName{"kubernetes.io/csi/fake.csi^vol-1"}) {
		t.Errorf("volumesInUse %v after the restart", got)
	}
	// The running pod's volume is not mapped again.
	rig.f.calls = nil
	if _, err := m2.SetUp(ctx, pod, rig.podDir("uid-1"), &pod.Spec.Volumes[0]); err != nil || len(rig.f.Calls()) != 0 {
		t.Errorf("SetUp after restart: %v, calls %v", err, rig.f.Calls())
	}

	// Cut short: the loop device detached and the symlink removed, then
	// the kill.
	bind := filepath.Join(rig.root, "plugins/kubernetes.io/csi/volumeDevices/pv-1/dev/uid-1")
	fb.detachLoop(bind)
	os.Remove(p)
	rig.f.calls = nil
	if err := m2.TearDown(ctx, rig.podDir("uid-1")); err != nil {
		t.Fatal(err)
	}
	want := []string{"DetachLoop plugins/kubernetes.io/csi/volumeDevices/pv-1/dev/uid-1",
		"Unbind plugins/kubernetes.io/csi/volumeDevices/pv-1/dev/uid-1", "NodeUnpublishVolume", "NodeGetCapabilities", "NodeUnstageVolume"}
	if got := rig.f.Calls(); !slices.Equal(got, want) {
		t.Fatalf("teardown after the cut\n %v, want\n %v", got, want)
	}
	if exists(filepath.Join(rig.root, "plugins/kubernetes.io/csi/volumeDevices/pv-1")) || len(m2.VolumesInUse()) != 0 {
		t.Errorf("the volume's directory or volumesInUse %v stays", m2.VolumesInUse())
	}
}

// kubelet's volume mode checks (desired state of world populator), and
// the map failures as FailedMapVolume.
func TestMapBlockVolumeRefusals(t *testing.T) {
	ctx := context.Background()
	pvc, pv := blockClaim("claim", "pv-1", "pvc-uid")
	fsPVC, fsPV := boundClaim("fs", "pv-fs", "fs-uid")
	rig, _, _ := newBlockRig(t, pvc, pv, fsPVC, fsPV, csiDriverObj(false))

	mounted := claimPod("uid-1", "claim", false)
	mounted.Spec.Containers = []v1.Container{{Name: "c", VolumeMounts: []v1.VolumeMount{{Name: "data", MountPath: "/d"}}}}
	_, err := rig.m.SetUp(ctx, mounted, rig.podDir("uid-1"), &mounted.Spec.Volumes[0])
	if want := "error processing PVC ns/claim: volume data has volumeMode Block, but is specified in volumeMounts"; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("a block claim in volumeMounts: %v, want %s", err, want)
	}
	dev := blockPod("uid-2", "fs", false)
	_, err = rig.m.SetUp(ctx, dev, rig.podDir("uid-2"), &dev.Spec.Volumes[0])
	if want := "error processing PVC ns/fs: volume data has volumeMode Filesystem, but is specified in volumeDevices"; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("a filesystem claim in volumeDevices: %v, want %s", err, want)
	}
	if len(rig.f.Calls()) != 0 {
		t.Errorf("the driver was called: %v", rig.f.Calls())
	}

	// The driver not registered: FailedMapVolume, kubelet's message.
	pv.Spec.CSI.Driver = "other.csi"
	if _, err := rig.client.CoreV1().PersistentVolumes().Update(ctx, pv, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	pod := blockPod("uid-3", "claim", false)
	_, err = rig.m.SetUp(ctx, pod, rig.podDir("uid-3"), &pod.Spec.Volumes[0])
	var me *volume.MountError
	if !errors.As(err, &me) || me.EventReason() != "FailedMapVolume" ||
		me.Error() != `MapVolume.SetUpDevice failed for volume "pv-1" : kubernetes.io/csi: blockMapper.SetUpDevice failed to get CSI client: driver name other.csi not found in the list of registered CSI drivers` {
		t.Errorf("unregistered driver: %v", err)
	}
}

// A local PV of volumeMode Block: its path is the device, bound and
// linked without a driver, unbound when the pod goes.
func TestMapLocalBlockVolume(t *testing.T) {
	ctx := context.Background()
	pvc, pv := blockClaim("claim", "pv-local", "pvc-uid")
	devFile := filepath.Join(t.TempDir(), "sdx")
	if err := os.WriteFile(devFile, []byte(fakeDeviceContent), 0o600); err != nil {
		t.Fatal(err)
	}
	pv.Spec.PersistentVolumeSource = v1.PersistentVolumeSource{Local: &v1.LocalVolumeSource{Path: devFile}}
	rig, fb, _ := newBlockRig(t, pvc, pv)
	pod := blockPod("uid-1", "claim", false)
	p, err := rig.m.SetUp(ctx, pod, rig.podDir("uid-1"), &pod.Spec.Volumes[0])
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(rig.podDir("uid-1"), "volumeDevices/kubernetes.io~local-volume/pv-local"); p != want {
		t.Errorf("path %s, want kubelet's %s", p, want)
	}
	if target, _ := os.Readlink(p); target != devFile {
		t.Errorf("symlink to %q, want the local path %s", target, devFile)
	}
	want := []string{"Bind plugins/kubernetes.io~local-volume/volumeDevices/pv-local/uid-1", "AttachLoop plugins/kubernetes.io~local-volume/volumeDevices/pv-local/uid-1"}
	if got := rig.f.Calls(); !slices.Equal(got, want) {
		t.Fatalf("calls %v, want %v", got, want)
	}
	rig.f.calls = nil
	if err := rig.m.TearDown(ctx, rig.podDir("uid-1")); err != nil {
		t.Fatal(err)
	}
	want = []string{"DetachLoop plugins/kubernetes.io~local-volume/volumeDevices/pv-local/uid-1", "Unbind plugins/kubernetes.io~local-volume/volumeDevices/pv-local/uid-1"}
	if got := rig.f.Calls(); !slices.Equal(got, want) {
		t.Fatalf("teardown calls %v, want %v", got, want)
	}
	if exists(p) || exists(filepath.Join(rig.root, "plugins/kubernetes.io~local-volume/volumeDevices/pv-local")) || len(fb.devices) != 0 {
		t.Error("the local volume's map stays")
	}
}

// Raw block volumes in /stats/summary and kubelet_volume_stats_*, as
// kubelet's volume stat calculator lists its block volumes: a CSI one's
// stats are the driver's NodeGetVolumeStats for the pod's bind of the
// device (<globalMapPath>/<pod UID>), with a unit the driver leaves out
// as zeros; a local one's are its device's size alone (kubelet's
// MetricsBlock); both named after the pod's volume with the claim as
// pvcRef, and gone with the pod.
func TestBlockVolumeStats(t *testing.T) {
	ctx := context.Background()
	pvc, pv := blockClaim("claim", "pv-1", "pvc-uid")
	lpvc, lpv := blockClaim("local", "pv-local", "local-uid")
	devFile := filepath.Join(t.TempDir(), "sdx")
	if err := os.WriteFile(devFile, []byte(fakeDeviceContent), 0o600); err != nil {
		t.Fatal(err)
	}
	lpv.Spec.PersistentVolumeSource = v1.PersistentVolumeSource{Local: &v1.LocalVolumeSource{Path: devFile}}
	rig, _, _ := newBlockRig(t, pvc, pv, lpvc, lpv, csiDriverObj(false))
	rig.f.caps = append(rig.f.caps, csipb.NodeServiceCapability_RPC_GET_VOLUME_STATS)
	rig.f.usage = []*csipb.VolumeUsage{{Unit: csipb.VolumeUsage_BYTES, Total: 5 << 20}}

	pod := blockPod("uid-1", "claim", false)
	pod.Spec.Volumes = append(pod.Spec.Volumes, v1.Volume{Name: "raw", VolumeSource: v1.VolumeSource{
		PersistentVolumeClaim: &v1.PersistentVolumeClaimVolumeSource{ClaimName: "local"}}})
	pod.Spec.Containers[0].VolumeDevices = append(pod.Spec.Containers[0].VolumeDevices, v1.VolumeDevice{Name: "raw", DevicePath: "/dev/xvdb"})
	for i := range pod.Spec.Volumes {
		if _, err := rig.m.SetUp(ctx, pod, rig.podDir("uid-1"), &pod.Spec.Volumes[i]); err != nil {
			t.Fatal(err)
		}
	}
	// The local device's bind, as the fake host makes it, holds 3000
	// bytes: its size.
	bind := filepath.Join(rig.root, "plugins/kubernetes.io~local-volume/volumeDevices/pv-local/uid-1")
	if err := os.WriteFile(bind, []byte(strings.Repeat("x", 3000)), 0o600); err != nil {
		t.Fatal(err)
	}

	got := rig.m.PodVolumeStats(ctx, "uid-1")
	if len(got) != 2 {
		t.Fatalf("stats %+v, want the two block volumes", got)
	}
	if r := rig.f.stats; len(r) != 1 || r[0].VolumeId != "vol-1" ||
		r[0].VolumePath != filepath.Join(rig.root, "plugins/kubernetes.io/csi/volumeDevices/pv-1/dev/uid-1") {
		t.Errorf("NodeGetVolumeStats requests %+v, want one for the pod's bind of the device", r)
	}
	want := map[string]struct {
		claim    string
		capacity uint64
	}{"data": {"claim", 5 << 20}, "raw": {"local", 3000}}
	for _, vs := range got {
		w, ok := want[vs.Name]
		if !ok || vs.PVCRef == nil || vs.PVCRef.Name != w.claim || vs.PVCRef.Namespace != "ns" {
			t.Errorf("volume %q pvcRef %+v", vs.Name, vs.PVCRef)
			continue
		}
		if vs.CapacityBytes == nil || *vs.CapacityBytes != w.capacity {
			t.Errorf("volume %q capacity %v, want %d", vs.Name, vs.CapacityBytes, w.capacity)
		}
		for n, v := range map[string]*uint64{"available": vs.AvailableBytes, "used": vs.UsedBytes, "inodes": vs.Inodes, "inodesFree": vs.InodesFree, "inodesUsed": vs.InodesUsed} {
			if v == nil || *v != 0 {
				t.Errorf("volume %q %s %v, want 0", vs.Name, n, v)
			}
		}
	}

	reg := prometheus.NewRegistry()
	reg.MustRegister(VolumeStatsCollector{M: rig.m})
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	capacity := map[string]float64{}
	series := 0
	for _, mf := range mfs {
		for _, mt := range mf.Metric {
			series++
			if mf.GetName() != "kubelet_volume_stats_capacity_bytes" {
				continue
			}
			for _, l := range mt.Label {
				if l.GetName() == "persistentvolumeclaim" {
					capacity[l.GetValue()] = mt.GetGauge().GetValue()
				}
			}
		}
	}
	if series != 12 || capacity["claim"] != 5<<20 || capacity["local"] != 3000 {
		t.Errorf("%d series, capacities %v: want kubelet's 6 gauges for each claim", series, capacity)
	}

	if err := rig.m.TearDown(ctx, rig.podDir("uid-1")); err != nil {
		t.Fatal(err)
	}
	if got := rig.m.PodVolumeStats(ctx, "uid-1"); len(got) != 0 {
		t.Errorf("stats %+v after the teardown", got)
	}
}

// Node expansion of a block volume, as kubelet's (operation generator
// MapVolume and its in-use expansion, csi NodeExpand with fsType
// "block"): offline, at the map, NodeExpandVolume gets the device's path
// (the publish target), the staging path and a block capability, and a
// final failure fails the map with kubelet's FailedMapVolume message;
// online, a mapped volume is grown at the pod's next sync and the claim
// gets its new capacity.
func TestExpandBlockVolume(t *testing.T) {
	ctx := context.Background()
	pvc, pv := blockClaim("claim", "pv-1", "pvc-uid")
	pvc.Status.Capacity = v1.ResourceList{v1.ResourceStorage: resource.MustParse("1Gi")}
	pv.Spec.Capacity = v1.ResourceList{v1.ResourceStorage: resource.MustParse("1Gi")}
	rig, _, rec := newBlockRig(t, pvc, pv, csiDriverObj(false))
	rig.f.caps = append(rig.f.caps, csipb.NodeServiceCapability_RPC_EXPAND_VOLUME)
	base := filepath.Join(rig.root, "plugins/kubernetes.io/csi/volumeDevices")

	// Offline: expanded while no pod had it; the driver refuses for good.
	resized(t, rig.client, "2Gi")
	rig.f.expandErr = status.Error(codes.InvalidArgument, "cannot grow")
	pod := blockPod("uid-1", "claim", false)
	_, err := rig.m.SetUp(ctx, pod, rig.podDir("uid-1"), &pod.Spec.Volumes[0])
	var me *volume.MountError
	if !errors.As(err, &me) || me.EventReason() != "FailedMapVolume" ||
		!strings.HasPrefix(err.Error(), `MapVolume.MarkVolumeAsMounted failed while expanding volume for volume "pv-1" : MountVolume.NodeExpandVolume failed for volume "pv-1" : rpc error:`) {
		t.Fatalf("SetUp: %v, want kubelet's FailedMapVolume for the expansion", err)
	}
	if len(rig.f.expand) != 1 {
		t.Fatalf("%d NodeExpandVolume calls", len(rig.f.expand))
	}
	e := rig.f.expand[0]
	if e.VolumeId != "vol-1" || e.VolumePath != filepath.Join(base, "publish/pv-1/uid-1") || e.StagingTargetPath != filepath.Join(base, "staging/pv-1") ||
		e.GetVolumeCapability().GetBlock() == nil || e.GetVolumeCapability().GetMount() != nil || e.CapacityRange.GetRequiredBytes() != 2<<30 ||
		e.GetVolumeCapability().GetAccessMode().GetMode() != csipb.VolumeCapability_AccessMode_SINGLE_NODE_WRITER {
		t.Errorf("NodeExpandVolume %+v", e)
	}
	got, err := rig.client.CoreV1().PersistentVolumeClaims("ns").Get(ctx, "claim", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got.Status.AllocatedResourceStatuses[v1.ResourceStorage] != v1.PersistentVolumeClaimNodeResizeInfeasible {
		t.Errorf("claim status %+v, want NodeResizeInfeasible", got.Status)
	}

	// Online: the resizer moves the claim on; the mapped volume is grown
	// at the next sync, once.
	rig.f.expandErr = nil
	resized(t, rig.client, "3Gi")
	drain(rec)
	rig.f.calls = nil
	if _, err := rig.m.SetUp(ctx, pod, rig.podDir("uid-1"), &pod.Spec.Volumes[0]); err != nil {
		t.Fatal(err)
	}
	if calls := rig.f.Calls(); !slices.Equal(calls, []string{"NodeGetCapabilities", "NodeExpandVolume"}) {
		t.Errorf("calls %v: want the online expansion alone", calls)
	}
	if e := rig.f.expand[len(rig.f.expand)-1]; e.VolumePath != filepath.Join(base, "publish/pv-1/uid-1") || e.GetVolumeCapability().GetBlock() == nil ||
		e.CapacityRange.GetRequiredBytes() != 3<<30 {
		t.Errorf("online NodeExpandVolume %+v", e)
	}
	got, err = rig.client.CoreV1().PersistentVolumeClaims("ns").Get(ctx, "claim", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if c := got.Status.Capacity[v1.ResourceStorage]; c.Cmp(resource.MustParse("3Gi")) != 0 || len(got.Status.AllocatedResourceStatuses) != 0 {
		t.Errorf("claim status %+v after the online expansion", got.Status)
	}
	if ev := drain(rec); len(ev) != 2 || ev[0] != `Normal FileSystemResizeSuccessful MountVolume.NodeExpandVolume succeeded for volume "pv-1" node-a` {
		t.Errorf("events %q", ev)
	}
	rig.f.calls = nil
	if _, err := rig.m.SetUp(ctx, pod, rig.podDir("uid-1"), &pod.Spec.Volumes[0]); err != nil || len(rig.f.Calls()) != 0 {
		t.Errorf("a sync after the expansion: %v, calls %v", err, rig.f.Calls())
	}
	if err := rig.m.TearDown(ctx, rig.podDir("uid-1")); err != nil {
		t.Fatal(err)
	}
}
