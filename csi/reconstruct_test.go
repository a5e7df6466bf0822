package csi

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	csipb "github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/nodeagent/nodeagent/internal/mountinfo"
	"github.com/nodeagent/nodeagent/internal/testing/csihostpath"
	"github.com/nodeagent/nodeagent/internal/testing/testlog"
)

// realRig is a CSI driver that really mounts (internal/testing/csihostpath:
// bind mounts for stage and publish) on sockets that outlive the agent,
// and a way to start an "agent" (a Registry and a Mounter over the same
// rootDir) again, as after a SIGKILL: nothing of the first one's memory
// is kept.
type realRig struct {
	root, regDir string
	client       *fake.Clientset
	driver       *countingDriver
}

func newRealRig(t *testing.T, objs ...runtime.Object) *realRig {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root to bind-mount volumes")
	}
	// The stand-in's volumes here are directories made at first staging:
	// a PV with an fsType would need the formatted file its CreateVolume
	// makes, so the rig's PVs have none.
	for _, o := range objs {
		if pv, ok := o.(*v1.PersistentVolume); ok && pv.Spec.CSI != nil {
			pv.Spec.CSI.FSType = ""
		}
	}
	sockDir := shortDir(t)
	root := t.TempDir()
	t.Cleanup(func() { unmountUnder(t, root) })
	regDir := filepath.Join(sockDir, "plugins_registry")
	if err := os.MkdirAll(regDir, 0o750); err != nil {
		t.Fatal(err)
	}
	endpoint := filepath.Join(sockDir, "csi.sock")
	ds := grpc.NewServer()
	d := &countingDriver{Driver: &csihostpath.Driver{Name: "fake.csi", NodeID: testNode, DataDir: filepath.Join(root, "data")}}
	csipb.RegisterIdentityServer(ds, d)
	csipb.RegisterNodeServer(ds, d)
	listen(t, ds, endpoint)
	rs := grpc.NewServer()
	registerapi.RegisterRegistrationServer(rs, &csihostpath.Registrar{DriverName: "fake.csi", Endpoint: endpoint})
	listen(t, rs, filepath.Join(regDir, "fake.csi-reg.sock"))
	node := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: testNode, UID: "node-uid"}}
	return &realRig{root: root, regDir: regDir, client: fake.NewClientset(append(objs, node)...), driver: d}
}

// start is an agent's start: a new Registry that registers the driver,
// and a new Mounter.
func (r *realRig) start(t *testing.T) *Mounter {
	t.Helper()
	info := &NodeInfo{NodeName: testNode, Nodes: r.client.CoreV1().Nodes(), CSINodes: r.client.StorageV1().CSINodes()}
	reg := NewRegistry(r.regDir, info, clocktesting.NewFakeClock(time.Unix(1000, 0)), testlog.New(t))
	reg.Sync(context.Background())
	if _, ok := reg.Driver("fake.csi"); !ok {
		t.Fatal("driver not registered")
	}
	c := r.client
	return statusAtOnce(&Mounter{
		RootDir: r.root, NodeName: testNode, Drivers: reg,
		API: API{
			PVCs:       func(ns string) Getter[*v1.PersistentVolumeClaim] { return c.CoreV1().PersistentVolumeClaims(ns) },
			PVs:        c.CoreV1().PersistentVolumes(),
			CSIDrivers: c.StorageV1().CSIDrivers(), VolumeAttachments: c.StorageV1().VolumeAttachments(),
			Secrets:   func(ns string) Getter[*v1.Secret] { return c.CoreV1().Secrets(ns) },
			PVCStatus: func(ns string) PVCPatcher { return c.CoreV1().PersistentVolumeClaims(ns) },
		},
	})
}

func (r *realRig) podDir(uid string) string { return filepath.Join(r.root, "pods", uid) }

func (r *realRig) target(uid string) string {
	return filepath.Join(r.podDir(uid), "volumes/kubernetes.io~csi/pv-1/mount")
}

func (r *realRig) staging(m *Mounter) string {
	return filepath.Join(m.stagingDir("fake.csi", "vol-1"), globalMount)
}

// mounts is how many mounts the mount table has at p (a second publish or
// stage would stack one more).
func mounts(t *testing.T, p string) int {
	t.Helper()
	ms, err := mountinfo.Read()
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, m := range ms {
		if m.MountPoint == p {
			n++
		}
	}
	return n
}

// countingDriver counts the driver's publish and stage calls.
type countingDriver struct {
	*csihostpath.Driver
	publishes, stages atomic.Int32
}

func (c *countingDriver) NodePublishVolume(ctx context.Context, r *csipb.NodePublishVolumeRequest) (*csipb.NodePublishVolumeResponse, error) {
	c.publishes.Add(1)
	return c.Driver.NodePublishVolume(ctx, r)
}

func (c *countingDriver) NodeStageVolume(ctx context.Context, r *csipb.NodeStageVolumeRequest) (*csipb.NodeStageVolumeResponse, error) {
	c.stages.Add(1)
	return c.Driver.NodeStageVolume(ctx, r)
}

// unmountUnder detaches what a failed test left mounted under dir,
// deepest first.
func unmountUnder(t *testing.T, dir string) {
	ms, err := mountinfo.Read()
	if err != nil {
		t.Error(err)
		return
	}
	var left []string
	for _, m := range ms {
		if strings.HasPrefix(m.MountPoint, dir+"/") {
			left = append(left, m.MountPoint)
		}
	}
	sort.Sort(sort.Reverse(sort.StringSlice(left)))
	for _, p := range left {
		_ = syscall.Unmount(p, syscall.MNT_DETACH)
	}
}

func attachedVA() *storagev1.VolumeAttachment {
	return &storagev1.VolumeAttachment{
		ObjectMeta: metav1.ObjectMeta{Name: attachmentName("vol-1", "fake.csi", testNode)},
		Status:     storagev1.VolumeAttachmentStatus{Attached: true},
	}
}

// After a SIGKILL the agent rebuilds what is mounted from the pods'
// directories and the mount table: the attachable volume is in
// volumesInUse before any pod syncs (and Synced says the list is
// complete only then), the running pod's volume stays the same mount
// (not published again), the gone pod's volume is unpublished while the
// running pod keeps the staging, and the last teardown unstages.
func TestReconstructAfterRestart(t *testing.T) {
	ctx := context.Background()
	pvc, pv := boundClaim("claim", "pv-1", "pvc-uid")
	rig := newRealRig(t, pvc, pv, csiDriverObj(true), attachedVA())
	m1 := rig.start(t)
	running, gone := claimPod("uid-a", "claim", false), claimPod("uid-b", "claim", false)
	for _, p := range []*v1.Pod{running, gone} {
		if _, err := m1.SetUp(ctx, p, rig.podDir(string(p.UID)), &p.Spec.Volumes[0]); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(rig.target("uid-a"), "f"), []byte("data"), 0o644); err != nil {
		t.Fatal(err)
	}
	if mounts(t, rig.target("uid-a")) != 1 || mounts(t, rig.staging(m1)) != 1 || mounts(t, rig.target("uid-b")) != 1 {
		t.Fatal("the volume is not staged and published for both pods")
	}
	if p, s := rig.driver.publishes.Load(), rig.driver.stages.Load(); p != 2 || s != 1 {
		t.Fatalf("%d publishes, %d stages; want 2 and 1", p, s)
	}

	// SIGKILL: a new agent, nothing kept in memory.
	m2 := rig.start(t)
	if m2.Synced() || len(m2.VolumesInUse()) != 0 {
		t.Errorf("before the reconstruction: synced %v, in use %v", m2.Synced(), m2.VolumesInUse())
	}
	got := m2.Reconstruct(ctx, testlog.New(t))
	if len(got) != 2 || !got[0].Mounted || !got[1].Mounted || got[0].Handle != "vol-1" || got[0].SpecName != "pv-1" {
		t.Errorf("reconstructed %+v, want both pods' pv-1, mounted", got)
	}
	want := []v1.UniqueVolumeName{"kubernetes.io/csi/fake.csi^vol-1"}
	if !m2.Synced() || !slices.Equal(m2.VolumesInUse(), want) {
		t.Errorf("after the reconstruction: synced %v, in use %v, want %v", m2.Synced(), m2.VolumesInUse(), want)
	}

	// The running pod syncs: the same mount, the data there.
	if p, err := m2.SetUp(ctx, running, rig.podDir("uid-a"), &running.Spec.Volumes[0]); err != nil || p != rig.target("uid-a") {
		t.Fatalf("SetUp of the running pod: %q %v", p, err)
	}
	if n, p, s := mounts(t, rig.target("uid-a")), rig.driver.publishes.Load(), rig.driver.stages.Load(); n != 1 || p != 2 || s != 1 {
		t.Errorf("the running pod's volume was set up again: %d mounts, %d publishes, %d stages", n, p, s)
	}
	if b, err := os.ReadFile(filepath.Join(rig.target("uid-a"), "f")); err != nil || string(b) != "data" {
		t.Errorf("the running pod's volume holds %q (%v)", b, err)
	}

	// The gone pod (an orphan after the sources synced) is torn down:
	// unpublished; the staging stays for the running pod, so does the
	// volume in volumesInUse.
	if err := m2.TearDown(ctx, rig.podDir("uid-b")); err != nil {
		t.Fatal(err)
	}
	if mounts(t, rig.target("uid-b")) != 0 {
		t.Error("the gone pod's volume is still mounted")
	}
	if _, err := os.Stat(filepath.Join(rig.podDir("uid-b"), "volumes/kubernetes.io~csi")); !os.IsNotExist(err) {
		t.Errorf("the gone pod's volume directory stays: %v", err)
	}
	if mounts(t, rig.staging(m2)) != 1 || mounts(t, rig.target("uid-a")) != 1 {
		t.Error("the staging or the running pod's mount changed while the pod uses it")
	}
	if !slices.Equal(m2.VolumesInUse(), want) {
		t.Errorf("in use %v while the running pod has it, want %v", m2.VolumesInUse(), want)
	}

	// The running pod goes too: unpublished, unstaged, nothing mounted.
	if err := m2.TearDown(ctx, rig.podDir("uid-a")); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Dir(rig.staging(m2))); !os.IsNotExist(err) {
		t.Errorf("the staging directory stays: %v", err)
	}
	if len(m2.VolumesInUse()) != 0 {
		t.Errorf("in use %v after the last teardown", m2.VolumesInUse())
	}
	assertNothingMounted(t, rig.root)
}

// An agent killed in the middle of a pod's teardown (after the driver
// unpublished, before the unstage) finds the pod's volume directory at
// its next start, counts the volume in use, and the orphan's teardown
// finishes: the staging mount does not stay behind.
func TestReconstructInterruptedTeardown(t *testing.T) {
	ctx := context.Background()
	pvc, pv := boundClaim("claim", "pv-1", "pvc-uid")
	rig := newRealRig(t, pvc, pv, csiDriverObj(true), attachedVA())
	m1 := rig.start(t)
	pod := claimPod("uid-a", "claim", false)
	if _, err := m1.SetUp(ctx, pod, rig.podDir("uid-a"), &pod.Spec.Volumes[0]); err != nil {
		t.Fatal(err)
	}
	// What the killed agent's teardown got done: NodeUnpublishVolume.
	d, _ := m1.Drivers.Driver("fake.csi")
	if _, err := d.Node.NodeUnpublishVolume(ctx, &csipb.NodeUnpublishVolumeRequest{VolumeId: "vol-1", TargetPath: rig.target("uid-a")}); err != nil {
		t.Fatal(err)
	}

	m2 := rig.start(t)
	got := m2.Reconstruct(ctx, testlog.New(t))
	if len(got) != 1 || got[0].Mounted {
		t.Errorf("reconstructed %+v, want the pod's volume, not mounted", got)
	}
	if len(m2.VolumesInUse()) != 1 {
		t.Errorf("in use %v: the volume is still staged here", m2.VolumesInUse())
	}
	if err := m2.TearDown(ctx, rig.podDir("uid-a")); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Dir(rig.staging(m2))); !os.IsNotExist(err) {
		t.Errorf("the staging directory stays: %v", err)
	}
	if len(m2.VolumesInUse()) != 0 {
		t.Errorf("in use %v after the teardown", m2.VolumesInUse())
	}
	assertNothingMounted(t, rig.root)
}

// A driver whose CSIDriver says no attachment: reconstructed volumes are
// not in volumesInUse (kubelet's CanAttach); an unreadable CSIDriver
// counts as attachable.
func TestReconstructAttachability(t *testing.T) {
	ctx := context.Background()
	pvc, pv := boundClaim("claim", "pv-1", "pvc-uid")
	rig := newRealRig(t, pvc, pv, csiDriverObj(false))
	m1 := rig.start(t)
	pod := claimPod("uid-a", "claim", false)
	if _, err := m1.SetUp(ctx, pod, rig.podDir("uid-a"), &pod.Spec.Volumes[0]); err != nil {
		t.Fatal(err)
	}
	m2 := rig.start(t)
	if got := m2.Reconstruct(ctx, testlog.New(t)); len(got) != 1 || len(m2.VolumesInUse()) != 0 {
		t.Errorf("reconstructed %+v, in use %v: want the volume, not in use (no attachment)", got, m2.VolumesInUse())
	}
	m3 := rig.start(t)
	m3.API.CSIDrivers = failingGetter[*storagev1.CSIDriver]{}
	if m3.Reconstruct(ctx, testlog.New(t)); len(m3.VolumesInUse()) != 1 {
		t.Errorf("in use %v with the CSIDriver unreadable, want the volume", m3.VolumesInUse())
	}
	if err := m3.TearDown(ctx, rig.podDir("uid-a")); err != nil {
		t.Fatal(err)
	}
	assertNothingMounted(t, rig.root)
}

type failingGetter[T any] struct{}

func (failingGetter[T]) Get(context.Context, string, metav1.GetOptions) (T, error) {
	var zero T
	return zero, &net.OpError{Op: "dial", Err: syscall.ECONNREFUSED}
}

func assertNothingMounted(t *testing.T, root string) {
	t.Helper()
	ms, err := mountinfo.Read()
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range ms {
		if strings.HasPrefix(m.MountPoint, root+"/") {
			t.Errorf("%s is still mounted", m.MountPoint)
		}
	}
}
