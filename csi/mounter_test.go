package csi

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	csipb "github.com/container-storage-interface/spec/lib/go/csi"
	"golang.org/x/sys/unix"
	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/nodeagent/nodeagent/pods/volume"
)

type mounterRig struct {
	m      *Mounter
	f      *fakeDriver
	client *fake.Clientset
	root   string
}

// newMounterRig registers a fake driver (with STAGE_UNSTAGE_VOLUME) and
// returns a Mounter over a fake API server holding objs.
func newMounterRig(t *testing.T, objs ...runtime.Object) *mounterRig {
	t.Helper()
	return newNamedMounterRig(t, "fake.csi", objs...)
}

// newNamedMounterRig is newMounterRig with a driver of that name.
func newNamedMounterRig(t *testing.T, driver string, objs ...runtime.Object) *mounterRig {
	t.Helper()
	rig := newRegistryRig(t, nil)
	f := newFakeDriver(driver)
	f.serve(t, rig.dir, rig.regDir)
	rig.reg.Sync(context.Background())
	if _, ok := rig.reg.Driver(driver); !ok {
		t.Fatal("fake driver not registered")
	}
	f.calls = nil
	client := fake.NewClientset(objs...)
	root := t.TempDir()
	m := &Mounter{
		RootDir: root, NodeName: testNode, Drivers: rig.reg,
		API: API{
			PVCs:       func(ns string) Getter[*v1.PersistentVolumeClaim] { return client.CoreV1().PersistentVolumeClaims(ns) },
			PVs:        client.CoreV1().PersistentVolumes(),
			CSIDrivers: client.StorageV1().CSIDrivers(), VolumeAttachments: client.StorageV1().VolumeAttachments(),
			Secrets:   func(ns string) Getter[*v1.Secret] { return client.CoreV1().Secrets(ns) },
			PVCStatus: func(ns string) PVCPatcher { return client.CoreV1().PersistentVolumeClaims(ns) },
		},
	}
	return &mounterRig{m: statusAtOnce(m), f: f, client: client, root: root}
}

func boolp(b bool) *bool { return &b }

func csiDriverObj(attach bool, modes ...storagev1.VolumeLifecycleMode) *storagev1.CSIDriver {
	policy := storagev1.FileFSGroupPolicy
	return &storagev1.CSIDriver{
		ObjectMeta: metav1.ObjectMeta{Name: "fake.csi"},
		Spec: storagev1.CSIDriverSpec{AttachRequired: boolp(attach), PodInfoOnMount: boolp(true),
			VolumeLifecycleModes: modes, FSGroupPolicy: &policy},
	}
}

func boundClaim(name, pvName string, uid types.UID) (*v1.PersistentVolumeClaim, *v1.PersistentVolume) {
	pvc := &v1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: uid},
		Spec:       v1.PersistentVolumeClaimSpec{VolumeName: pvName},
		Status:     v1.PersistentVolumeClaimStatus{Phase: v1.ClaimBound},
	}
	pv := &v1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: pvName},
		Spec: v1.PersistentVolumeSpec{
			AccessModes:  []v1.PersistentVolumeAccessMode{v1.ReadWriteOnce},
			ClaimRef:     &v1.ObjectReference{Namespace: "ns", Name: name, UID: uid},
			MountOptions: []string{"noatime"},
			PersistentVolumeSource: v1.PersistentVolumeSource{CSI: &v1.CSIPersistentVolumeSource{
				Driver: "fake.csi", VolumeHandle: "vol-1", FSType: "ext4", VolumeAttributes: map[string]string{"k": "v"},
			}},
		},
	}
	return pvc, pv
}

func claimPod(uid types.UID, claim string, readOnly bool) *v1.Pod {
	g := int64(4321)
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p-" + string(uid), Namespace: "ns", UID: uid},
		Spec: v1.PodSpec{
			ServiceAccountName: "sa",
			SecurityContext:    &v1.PodSecurityContext{FSGroup: &g},
			Volumes: []v1.Volume{{Name: "data", VolumeSource: v1.VolumeSource{
				PersistentVolumeClaim: &v1.PersistentVolumeClaimVolumeSource{ClaimName: claim, ReadOnly: readOnly}}}},
		},
	}
}

func (r *mounterRig) podDir(uid types.UID) string { return filepath.Join(r.root, "pods", string(uid)) }

func TestMounterStagesOncePublishesAndTearsDown(t *testing.T) {
	ctx := context.Background()
	pvc, pv := boundClaim("claim", "pv-1", "pvc-uid")
	rig := newMounterRig(t, pvc, pv, csiDriverObj(false))
	staging := filepath.Join(rig.root, "plugins/kubernetes.io/csi/fake.csi", fmt.Sprintf("%x", sha256.Sum256([]byte("vol-1"))), "globalmount")

	pod1 := claimPod("uid-1", "claim", false)
	p1, err := rig.m.SetUp(ctx, pod1, rig.podDir("uid-1"), &pod1.Spec.Volumes[0])
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(rig.podDir("uid-1"), "volumes/kubernetes.io~csi/pv-1/mount"); p1 != want {
		t.Errorf("path %s, want kubelet's %s", p1, want)
	}
	if got, want := rig.f.Calls(), []string{"NodeGetCapabilities", "NodeStageVolume", "NodePublishVolume"}; !slices.Equal(got, want) {
		t.Fatalf("calls %v, want %v", got, want)
	}
	st := rig.f.stage[0]
	if st.VolumeId != "vol-1" || st.StagingTargetPath != staging || st.VolumeCapability.GetMount().GetFsType() != "ext4" ||
		!slices.Equal(st.VolumeCapability.GetMount().GetMountFlags(), []string{"noatime"}) ||
		st.VolumeCapability.GetAccessMode().GetMode() != csipb.VolumeCapability_AccessMode_SINGLE_NODE_WRITER {
		t.Errorf("stage request %+v", st)
	}
	pub := rig.f.publish[0]
	if pub.TargetPath != p1 || pub.StagingTargetPath != staging || pub.Readonly ||
		pub.VolumeContext["k"] != "v" || pub.VolumeContext[ctxPodName] != "p-uid-1" || pub.VolumeContext[ctxPodUID] != "uid-1" ||
		pub.VolumeContext[ctxServiceAccount] != "sa" || pub.VolumeContext[ctxEphemeral] != "false" {
		t.Errorf("publish request %+v", pub)
	}
	// fsGroupPolicy File: the volume belongs to the fsGroup, setgid.
	fi, err := os.Stat(p1)
	if err != nil {
		t.Fatal(err)
	}
	if gid := fi.Sys().(*syscall.Stat_t).Gid; gid != 4321 || fi.Mode()&os.ModeSetgid == 0 {
		t.Errorf("volume gid %d mode %s, want the fsGroup 4321 and setgid", gid, fi.Mode())
	}
	for _, f := range []string{filepath.Join(filepath.Dir(staging), "vol_data.json"), filepath.Join(filepath.Dir(p1), "vol_data.json")} {
		if _, err := os.Stat(f); err != nil {
			t.Errorf("kubelet's volume data file: %v", err)
		}
	}

	// A second pod, read-only.
	pod2 := claimPod("uid-2", "claim", true)
	if _, err := rig.m.SetUp(ctx, pod2, rig.podDir("uid-2"), &pod2.Spec.Volumes[0]); err != nil {
		t.Fatal(err)
	}
	if !rig.f.publish[1].Readonly {
		t.Error("readOnly claim not published read-only")
	}

	// The first pod leaves: unpublished, not unstaged.
	rig.f.calls = nil
	if err := rig.m.TearDown(ctx, rig.podDir("uid-1")); err != nil {
		t.Fatal(err)
	}
	if got, want := rig.f.Calls(), []string{"NodeUnpublishVolume"}; !slices.Equal(got, want) {
		t.Fatalf("calls %v, want %v", got, want)
	}
	if _, err := os.Stat(filepath.Join(rig.podDir("uid-1"), "volumes/kubernetes.io~csi")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("pod 1's csi directory stays: %v", err)
	}
	// The last pod leaves: unpublished and unstaged, nothing stays.
	rig.f.calls = nil
	if err := rig.m.TearDown(ctx, rig.podDir("uid-2")); err != nil {
		t.Fatal(err)
	}
	if got, want := rig.f.Calls(), []string{"NodeUnpublishVolume", "NodeUnstageVolume"}; !slices.Equal(got, want) {
		t.Fatalf("calls %v, want %v", got, want)
	}
	if u := rig.f.unstage[0]; u.VolumeId != "vol-1" || u.StagingTargetPath != staging {
		t.Errorf("unstage %+v", u)
	}
	if _, err := os.Stat(filepath.Dir(staging)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("staging directory stays: %v", err)
	}
	// Tearing down again is a no-op.
	if err := rig.m.TearDown(ctx, rig.podDir("uid-2")); err != nil {
		t.Fatal(err)
	}
}

func TestMounterWaitsForClaimAndAttachment(t *testing.T) {
	ctx := context.Background()
	pvc, pv := boundClaim("claim", "pv-1", "pvc-uid")
	unbound := pvc.DeepCopy()
	unbound.Status.Phase, unbound.Spec.VolumeName = v1.ClaimPending, ""
	rig := newMounterRig(t, unbound, pv, csiDriverObj(true))
	pod := claimPod("uid-1", "claim", false)
	dir := rig.podDir("uid-1")

	_, err := rig.m.SetUp(ctx, pod, dir, &pod.Spec.Volumes[0])
	if want := `MountVolume.SetUp failed for volume "data" : error processing PVC ns/claim: PVC ns/claim has non-bound phase ("Pending") or empty pvc.Spec.VolumeName ("")`; err == nil || err.Error() != want {
		t.Fatalf("unbound claim: %v, want %s", err, want)
	}
	if len(volume.MountErrors(err)) != 1 {
		t.Errorf("not a MountError: %T", err)
	}
	if _, err := rig.client.CoreV1().PersistentVolumeClaims("ns").Update(ctx, pvc, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	// Bound, attachRequired, no VolumeAttachment yet: in use, not
	// published; kubelet's GET error.
	vaName := fmt.Sprintf("csi-%x", sha256.Sum256([]byte("vol-1"+"fake.csi"+testNode)))
	_, err = rig.m.SetUp(ctx, pod, dir, &pod.Spec.Volumes[0])
	if want := `MountVolume.WaitForAttach failed for volume "pv-1" : volume vol-1 has GET error for volume attachment ` + vaName + `: volumeattachments.storage.k8s.io "` + vaName + `" not found`; err == nil || err.Error() != want {
		t.Fatalf("no attachment: %v, want %s", err, want)
	}
	if got := rig.m.VolumesInUse(); !slices.Equal(got, []v1.UniqueVolumeName{"kubernetes.io/csi/fake.csi^vol-1"}) {
		t.Errorf("volumesInUse %v", got)
	}
	va := &storagev1.VolumeAttachment{ObjectMeta: metav1.ObjectMeta{Name: vaName}}
	if _, err := rig.client.StorageV1().VolumeAttachments().Create(ctx, va, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	_, err = rig.m.SetUp(ctx, pod, dir, &pod.Spec.Volumes[0])
	if want := "volume vol-1 is not attached for volume attachment " + vaName; err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("not attached: %v, want %s", err, want)
	}
	if len(rig.f.Calls()) != 0 {
		t.Errorf("the driver was called before the attachment: %v", rig.f.Calls())
	}
	va.Status = storagev1.VolumeAttachmentStatus{Attached: true, AttachmentMetadata: map[string]string{"dev": "/dev/x"}}
	if _, err := rig.client.StorageV1().VolumeAttachments().Update(ctx, va, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := rig.m.SetUp(ctx, pod, dir, &pod.Spec.Volumes[0]); err != nil {
		t.Fatal(err)
	}
	if rig.f.stage[0].PublishContext["dev"] != "/dev/x" || rig.f.publish[0].PublishContext["dev"] != "/dev/x" {
		t.Errorf("publish context not passed: %+v %+v", rig.f.stage[0], rig.f.publish[0])
	}
	// In use until unstaged.
	if err := rig.m.TearDown(ctx, dir); err != nil {
		t.Fatal(err)
	}
	if got := rig.m.VolumesInUse(); len(got) != 0 {
		t.Errorf("volumesInUse %v after teardown", got)
	}
}

func TestMounterInlineEphemeral(t *testing.T) {
	ctx := context.Background()
	rig := newMounterRig(t, csiDriverObj(false, storagev1.VolumeLifecycleEphemeral))
	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", UID: "uid-e"},
		Spec: v1.PodSpec{Volumes: []v1.Volume{{Name: "scratch", VolumeSource: v1.VolumeSource{CSI: &v1.CSIVolumeSource{
			Driver: "fake.csi", VolumeAttributes: map[string]string{"size": "1Mi"}}}}}},
	}
	p, err := rig.m.SetUp(ctx, pod, rig.podDir("uid-e"), &pod.Spec.Volumes[0])
	if err != nil {
		t.Fatal(err)
	}
	if got, want := rig.f.Calls(), []string{"NodeGetCapabilities", "NodePublishVolume"}; !slices.Equal(got, want) {
		t.Fatalf("calls %v, want %v (inline volumes are not staged)", got, want)
	}
	pub := rig.f.publish[0]
	if want := fmt.Sprintf("csi-%x", sha256.Sum256([]byte("uid-escratch"))); pub.VolumeId != want {
		t.Errorf("handle %s, want kubelet's %s", pub.VolumeId, want)
	}
	if pub.TargetPath != p || !strings.HasSuffix(p, "volumes/kubernetes.io~csi/scratch/mount") || pub.VolumeContext[ctxEphemeral] != "true" || pub.VolumeContext["size"] != "1Mi" {
		t.Errorf("publish %+v", pub)
	}
	if len(rig.m.VolumesInUse()) != 0 {
		t.Errorf("an inline volume is not attachable: %v", rig.m.VolumesInUse())
	}
	rig.f.calls = nil
	if err := rig.m.TearDown(ctx, rig.podDir("uid-e")); err != nil {
		t.Fatal(err)
	}
	if got, want := rig.f.Calls(), []string{"NodeUnpublishVolume"}; !slices.Equal(got, want) {
		t.Fatalf("calls %v, want %v", got, want)
	}

	// A driver without the Ephemeral mode refuses inline volumes.
	rig2 := newMounterRig(t, csiDriverObj(false))
	_, err = rig2.m.SetUp(ctx, pod, rig2.podDir("uid-e"), &pod.Spec.Volumes[0])
	if want := `volume mode "Ephemeral" not supported by driver fake.csi (only supports ["Persistent"])`; err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("%v, want %s", err, want)
	}
}

func TestMounterDriverNotRegistered(t *testing.T) {
	ctx := context.Background()
	pvc, pv := boundClaim("claim", "pv-1", "pvc-uid")
	pv.Spec.CSI.Driver = "other.csi"
	rig := newMounterRig(t, pvc, pv)
	pod := claimPod("uid-1", "claim", false)
	_, err := rig.m.SetUp(ctx, pod, rig.podDir("uid-1"), &pod.Spec.Volumes[0])
	if want := "driver name other.csi not found in the list of registered CSI drivers"; err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("%v, want %s", err, want)
	}
	// Teardown of a volume whose driver is gone fails (and is retried)
	// rather than unmounting behind the driver.
	dir := filepath.Join(rig.podDir("uid-1"), "volumes/kubernetes.io~csi/pv-1")
	os.MkdirAll(dir, 0o750)
	writeVolData(dir, volData{VolumeHandle: "vol-1", DriverName: "other.csi"})
	if err := rig.m.TearDown(ctx, rig.podDir("uid-1")); err == nil || !strings.Contains(err.Error(), "not found in the list of registered CSI drivers") {
		t.Fatalf("teardown: %v", err)
	}
	if _, err := os.Stat(dir); err != nil {
		t.Errorf("the volume's data went: %v", err)
	}
}

func TestMounterHostPathPV(t *testing.T) {
	ctx := context.Background()
	pvc, pv := boundClaim("claim", "pv-h", "pvc-uid")
	host := t.TempDir()
	typ := v1.HostPathDirectory
	pv.Spec.PersistentVolumeSource = v1.PersistentVolumeSource{HostPath: &v1.HostPathVolumeSource{Path: host, Type: &typ}}
	rig := newMounterRig(t, pvc, pv)
	pod := claimPod("uid-1", "claim", false)
	p, err := rig.m.SetUp(ctx, pod, rig.podDir("uid-1"), &pod.Spec.Volumes[0])
	if err != nil || p != host {
		t.Fatalf("%q %v, want the hostPath %s", p, err, host)
	}
	if len(rig.f.Calls()) != 0 {
		t.Errorf("driver called for a hostPath PV: %v", rig.f.Calls())
	}
}

func TestSupportsFSGroup(t *testing.T) {
	rwo := []v1.PersistentVolumeAccessMode{v1.ReadWriteOnce}
	rwx := []v1.PersistentVolumeAccessMode{v1.ReadWriteMany}
	pol := func(p storagev1.FSGroupPolicy) *storagev1.CSIDriver {
		return &storagev1.CSIDriver{Spec: storagev1.CSIDriverSpec{FSGroupPolicy: &p}}
	}
	for _, tc := range []struct {
		desc string
		cv   csiVolume
		drv  *storagev1.CSIDriver
		want bool
	}{
		{"default policy, fsType, RWO", csiVolume{fsType: "ext4", accessModes: rwo}, nil, true},
		{"default policy, no fsType", csiVolume{accessModes: rwo}, nil, false},
		{"default policy, RWX", csiVolume{fsType: "ext4", accessModes: rwx}, nil, false},
		{"File, RWX, no fsType", csiVolume{accessModes: rwx}, pol(storagev1.FileFSGroupPolicy), true},
		{"None", csiVolume{fsType: "ext4", accessModes: rwo}, pol(storagev1.NoneFSGroupPolicy), false},
		{"read-only", csiVolume{fsType: "ext4", accessModes: rwo, readOnly: true}, pol(storagev1.FileFSGroupPolicy), false},
	} {
		if got := supportsFSGroup(&tc.cv, tc.drv); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.desc, got, tc.want)
		}
	}
}

// After an agent restart a running pod's published volume (its target a
// mount point) is used as it is: no driver call, nothing unmounted, and
// an attachable one is listed in volumesInUse again.
func TestMounterPublishedVolumeAfterRestart(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to mount a tmpfs as the published volume")
	}
	ctx := context.Background()
	pvc, pv := boundClaim("claim", "pv-1", "pvc-uid")
	rig := newMounterRig(t, pvc, pv, csiDriverObj(true))
	pod := claimPod("uid-1", "claim", false)
	target := filepath.Join(rig.podDir("uid-1"), "volumes/kubernetes.io~csi/pv-1/mount")
	if err := os.MkdirAll(target, 0o750); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mount("tmpfs", target, "tmpfs", 0, "size=1m"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Unmount(target, syscall.MNT_DETACH) })
	p, err := rig.m.SetUp(ctx, pod, rig.podDir("uid-1"), &pod.Spec.Volumes[0])
	if err != nil || p != target {
		t.Fatalf("%q %v, want %s", p, err, target)
	}
	if len(rig.f.Calls()) != 0 {
		t.Errorf("the driver was called for a published volume: %v", rig.f.Calls())
	}
	if mounted, _ := isMountPoint(target); !mounted {
		t.Error("the published volume was unmounted")
	}
	if got := rig.m.VolumesInUse(); !slices.Equal(got, []v1.UniqueVolumeName{"kubernetes.io/csi/fake.csi^vol-1"}) {
		t.Errorf("volumesInUse %v, want the attachable volume", got)
	}
}

// A local PV as kubelet's local volume plugin: bound at its pod path,
// read-only for a read-only claim, the fsGroup on it otherwise; the pod's
// teardown of its other volumes unmounts it.
func TestMounterLocalPV(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to bind-mount a local volume")
	}
	ctx := context.Background()
	src := t.TempDir()
	os.WriteFile(filepath.Join(src, "f"), []byte("local"), 0o644)
	pvc, pv := boundClaim("claim", "pv-local", "pvc-uid")
	pv.Spec.PersistentVolumeSource = v1.PersistentVolumeSource{Local: &v1.LocalVolumeSource{Path: src}}
	rig := newMounterRig(t, pvc, pv)
	for _, ro := range []bool{false, true} {
		uid := types.UID(fmt.Sprintf("uid-ro-%v", ro))
		pod := claimPod(uid, "claim", ro)
		p, err := rig.m.SetUp(ctx, pod, rig.podDir(uid), &pod.Spec.Volumes[0])
		if err != nil {
			t.Fatal(err)
		}
		if want := filepath.Join(rig.podDir(uid), "volumes/kubernetes.io~local-volume/pv-local"); p != want {
			t.Errorf("path %s, want kubelet's %s", p, want)
		}
		if b, err := os.ReadFile(filepath.Join(p, "f")); err != nil || string(b) != "local" {
			t.Errorf("read %q %v through the local volume", b, err)
		}
		werr := os.WriteFile(filepath.Join(p, "w"), nil, 0o644)
		if ro != (werr != nil) {
			t.Errorf("readOnly %v: write error %v", ro, werr)
		}
		if !ro {
			fi, _ := os.Stat(p)
			if gid := fi.Sys().(*syscall.Stat_t).Gid; gid != 4321 {
				t.Errorf("local volume gid %d, want the fsGroup", gid)
			}
		}
		// Idempotent.
		if p2, err := rig.m.SetUp(ctx, pod, rig.podDir(uid), &pod.Spec.Volumes[0]); err != nil || p2 != p {
			t.Errorf("second SetUp %q %v", p2, err)
		}
		if err := rig.m.TearDown(ctx, rig.podDir(uid)); err != nil {
			t.Fatal(err)
		}
		if err := volume.TeardownVolumes(rig.podDir(uid)); err != nil {
			t.Fatal(err)
		}
		if mounted, _ := isMountPoint(p); mounted {
			t.Errorf("%s still mounted", p)
		}
	}
	if b, err := os.ReadFile(filepath.Join(src, "f")); err != nil || string(b) != "local" {
		t.Errorf("the local volume's data went: %q %v", b, err)
	}
	if len(rig.f.Calls()) != 0 {
		t.Errorf("driver called for a local PV: %v", rig.f.Calls())
	}
}

// A generic ephemeral volume is its claim <pod>-<volume>, which must be
// owned by the pod (kubelet's VolumeIsForPod), then as any claim.
func TestMounterGenericEphemeral(t *testing.T) {
	ctx := context.Background()
	pvc, pv := boundClaim("p-uid-1-scratch", "pv-1", "pvc-uid")
	pv.Spec.ClaimRef.Name = pvc.Name
	rig := newMounterRig(t, pvc, pv, csiDriverObj(false))
	pod := claimPod("uid-1", "", false)
	pod.Spec.Volumes = []v1.Volume{{Name: "scratch", VolumeSource: v1.VolumeSource{Ephemeral: &v1.EphemeralVolumeSource{}}}}

	_, err := rig.m.SetUp(ctx, pod, rig.podDir("uid-1"), &pod.Spec.Volumes[0])
	if want := "PVC ns/p-uid-1-scratch was not created for pod ns/p-uid-1 (pod is not owner)"; err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("claim not owned by the pod: %v, want %s", err, want)
	}
	yes := true
	pvc.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: pod.Name, UID: pod.UID, Controller: &yes}}
	if _, err := rig.client.CoreV1().PersistentVolumeClaims("ns").Update(ctx, pvc, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	p, err := rig.m.SetUp(ctx, pod, rig.podDir("uid-1"), &pod.Spec.Volumes[0])
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(p, "volumes/kubernetes.io~csi/pv-1/mount") || rig.f.publish[0].VolumeId != "vol-1" {
		t.Errorf("path %s, publish %+v", p, rig.f.publish[0])
	}
}

// A PV whose only access mode is ReadWriteOncePod is not published for a
// second pod while another pod has it mounted (kubelet's MountVolume
// check: a pod bound to the node by name bypasses the scheduler's); a
// ReadWriteOnce PV is.
func TestMounterReadWriteOncePod(t *testing.T) {
	for _, tc := range []struct {
		mode    v1.PersistentVolumeAccessMode
		refused bool
	}{{v1.ReadWriteOncePod, true}, {v1.ReadWriteOnce, false}} {
		t.Run(string(tc.mode), func(t *testing.T) {
			ctx := context.Background()
			pvc, pv := boundClaim("claim", "pv-1", "pvc-uid")
			pv.Spec.AccessModes = []v1.PersistentVolumeAccessMode{tc.mode}
			rig := newMounterRig(t, pvc, pv, csiDriverObj(false))
			pod1, pod2 := claimPod("uid-1", "claim", false), claimPod("uid-2", "claim", false)
			p1, err := rig.m.SetUp(ctx, pod1, rig.podDir("uid-1"), &pod1.Spec.Volumes[0])
			if err != nil {
				t.Fatal(err)
			}
			// The fake driver makes the target a directory; a bind mount
			// onto itself makes it published as a real driver's.
			if err := unix.Mount(p1, p1, "", unix.MS_BIND, ""); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = unix.Unmount(p1, unix.MNT_DETACH) })
			_, err = rig.m.SetUp(ctx, pod2, rig.podDir("uid-2"), &pod2.Spec.Volumes[0])
			var me *volume.MountError
			switch {
			case !tc.refused && err != nil:
				t.Fatalf("second pod of a %s volume: %v", tc.mode, err)
			case tc.refused && (!errors.As(err, &me) || me.Op != "MountVolume.SetUp" ||
				me.Err.Error() != "volume uses the ReadWriteOncePod access mode and is already in use by another pod"):
				t.Fatalf("second pod of a ReadWriteOncePod volume: %v, want kubelet's MountVolume.SetUp refusal", err)
			}
			if !tc.refused {
				return
			}
			// The first pod gone, the second gets it.
			if err := unix.Unmount(p1, 0); err != nil {
				t.Fatal(err)
			}
			if err := rig.m.TearDown(ctx, rig.podDir("uid-1")); err != nil {
				t.Fatal(err)
			}
			if _, err := rig.m.SetUp(ctx, pod2, rig.podDir("uid-2"), &pod2.Spec.Volumes[0]); err != nil {
				t.Fatalf("after the first pod left: %v", err)
			}
		})
	}
}
