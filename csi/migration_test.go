package csi

import (
	"context"
	"crypto/sha256"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/nodeagent/nodeagent/internal/testing/testlog"
)

const gcePD = "pd.csi.storage.gke.io"

// kubelet 1.34's migrated plugins, as its CSINode annotation lists them.
const wantMigrated = "kubernetes.io/aws-ebs,kubernetes.io/azure-disk,kubernetes.io/azure-file,kubernetes.io/cinder,kubernetes.io/gce-pd,kubernetes.io/portworx-volume,kubernetes.io/vsphere-volume"

func gceDriverObj(attach bool) *storagev1.CSIDriver {
	d := csiDriverObj(attach, storagev1.VolumeLifecyclePersistent)
	d.Name = gcePD
	return d
}

// A PV made by the in-tree GCE PD provisioner (gcePersistentDisk, the
// zone label) is staged and published by pd.csi.storage.gke.io with the
// handle csi-translation-lib gives it, at the PV's kubelet paths; it is in
// volumesInUse under the CSI unique name the attach/detach controller's
// VolumeAttachment matches (and the mount waits for that attachment); an
// agent restarted finds it again from the pod's directory; the teardown
// unpublishes and unstages it through the driver.
func TestMigratedPV(t *testing.T) {
	ctx := context.Background()
	handle := "projects/UNSPECIFIED/zones/us-central1-a/disks/disk-1"
	pvc, pv := boundClaim("claim", "pv-gce", "pvc-uid")
	pv.Labels = map[string]string{v1.LabelTopologyZone: "us-central1-a"}
	pv.Spec.MountOptions = nil
	pv.Spec.PersistentVolumeSource = v1.PersistentVolumeSource{GCEPersistentDisk: &v1.GCEPersistentDiskVolumeSource{PDName: "disk-1", FSType: "ext4"}}
	va := &storagev1.VolumeAttachment{
		ObjectMeta: metav1.ObjectMeta{Name: attachmentName(handle, gcePD, testNode)},
		Status:     storagev1.VolumeAttachmentStatus{Attached: true},
	}
	rig := newNamedMounterRig(t, gcePD, pvc, pv, gceDriverObj(true), va)
	pod := claimPod("uid-1", "claim", false)
	p, err := rig.m.SetUp(ctx, pod, rig.podDir("uid-1"), &pod.Spec.Volumes[0])
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(rig.podDir("uid-1"), "volumes/kubernetes.io~csi/pv-gce/mount"); p != want {
		t.Errorf("path %s, want kubelet's %s", p, want)
	}
	staging := filepath.Join(rig.root, "plugins/kubernetes.io/csi", gcePD, fmt.Sprintf("%x", sha256.Sum256([]byte(handle))), "globalmount")
	if len(rig.f.stage) != 1 || rig.f.stage[0].VolumeId != handle || rig.f.stage[0].StagingTargetPath != staging ||
		rig.f.stage[0].VolumeCapability.GetMount().GetFsType() != "ext4" {
		t.Fatalf("stage requests %+v, want one of %s at %s", rig.f.stage, handle, staging)
	}
	if len(rig.f.publish) != 1 || rig.f.publish[0].VolumeId != handle || rig.f.publish[0].TargetPath != p {
		t.Fatalf("publish requests %+v", rig.f.publish)
	}
	inUse := []v1.UniqueVolumeName{v1.UniqueVolumeName("kubernetes.io/csi/" + gcePD + "^" + handle)}
	if got := rig.m.VolumesInUse(); !slices.Equal(got, inUse) {
		t.Errorf("volumes in use %v, want %v", got, inUse)
	}

	// Restart: a new Mounter over the same directories.
	m2 := statusAtOnce(&Mounter{RootDir: rig.root, NodeName: testNode, Drivers: rig.m.Drivers, API: rig.m.API})
	got := m2.Reconstruct(ctx, testlog.New(t))
	if len(got) != 1 || got[0].Driver != gcePD || got[0].Handle != handle || got[0].SpecName != "pv-gce" {
		t.Errorf("reconstructed %+v", got)
	}
	if got := m2.VolumesInUse(); !slices.Equal(got, inUse) {
		t.Errorf("volumes in use after the restart %v, want %v", got, inUse)
	}

	rig.f.calls = nil
	if err := m2.TearDown(ctx, rig.podDir("uid-1")); err != nil {
		t.Fatal(err)
	}
	if got, want := rig.f.Calls(), []string{"NodeUnpublishVolume", "NodeUnstageVolume"}; !slices.Equal(got, want) {
		t.Fatalf("calls %v, want %v", got, want)
	}
	if u := rig.f.unstage[0]; u.VolumeId != handle || u.StagingTargetPath != staging {
		t.Errorf("unstage %+v", u)
	}
	if len(m2.VolumesInUse()) != 0 {
		t.Errorf("in use %v after the teardown", m2.VolumesInUse())
	}
}

// An inline gcePersistentDisk volume is the translation's PV
// (pd.csi.storage.gke.io-<disk>, which names the pod's volume directory),
// a persistent volume of the driver, published read-only as its source
// says.
func TestMigratedInline(t *testing.T) {
	ctx := context.Background()
	rig := newNamedMounterRig(t, gcePD, gceDriverObj(false))
	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", UID: "uid-1"},
		Spec: v1.PodSpec{Volumes: []v1.Volume{{Name: "disk", VolumeSource: v1.VolumeSource{
			GCEPersistentDisk: &v1.GCEPersistentDiskVolumeSource{PDName: "disk-2", ReadOnly: true}}}}},
	}
	if !Handles(&pod.Spec.Volumes[0]) {
		t.Fatal("the mounter does not take an inline gcePersistentDisk volume")
	}
	p, err := rig.m.SetUp(ctx, pod, rig.podDir("uid-1"), &pod.Spec.Volumes[0])
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(rig.podDir("uid-1"), "volumes/kubernetes.io~csi", gcePD+"-disk-2", "mount"); p != want {
		t.Errorf("path %s, want %s", p, want)
	}
	handle := "projects/UNSPECIFIED/zones/UNSPECIFIED/disks/disk-2"
	if len(rig.f.publish) != 1 || rig.f.publish[0].VolumeId != handle || !rig.f.publish[0].Readonly ||
		rig.f.publish[0].VolumeContext[ctxEphemeral] != "false" {
		t.Fatalf("publish requests %+v, want one of %s, read-only, not ephemeral", rig.f.publish, handle)
	}
	b, err := os.ReadFile(filepath.Join(filepath.Dir(p), volDataFileName))
	if err != nil || !strings.Contains(string(b), `"volumeLifecycleMode":"Persistent"`) {
		t.Errorf("vol_data.json %s (%v), want a persistent volume", b, err)
	}
	if err := rig.m.TearDown(ctx, rig.podDir("uid-1")); err != nil {
		t.Fatal(err)
	}
	if u := rig.f.unstage; len(u) != 1 || u[0].VolumeId != handle {
		t.Errorf("unstage %+v", u)
	}
}

// A PV of an in-tree type that is not migrated (nfs) fails the mount with
// a message that says which are supported.
func TestUnmigratedPV(t *testing.T) {
	pvc, pv := boundClaim("claim", "pv-nfs", "pvc-uid")
	pv.Spec.PersistentVolumeSource = v1.PersistentVolumeSource{NFS: &v1.NFSVolumeSource{Server: "s", Path: "/p"}}
	rig := newMounterRig(t, pvc, pv, csiDriverObj(false))
	pod := claimPod("uid-1", "claim", false)
	_, err := rig.m.SetUp(context.Background(), pod, rig.podDir("uid-1"), &pod.Spec.Volumes[0])
	if err == nil || !strings.Contains(err.Error(), "kubernetes.io/gce-pd") || !strings.Contains(err.Error(), "pv-nfs") {
		t.Errorf("SetUp of an nfs PV: %v", err)
	}
	if c := rig.f.Calls(); len(c) != 0 {
		t.Errorf("driver calls %v", c)
	}
}

// The CSINode's storage.alpha.kubernetes.io/migrated-plugins annotation,
// as kubelet's nodeinfomanager writes it: at initialization (the CSINode
// made when missing), set right when another value is there, kept by a
// driver's installation.
func TestMigrationAnnotation(t *testing.T) {
	ctx := context.Background()
	node := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: testNode, UID: "node-uid"}}
	client := fake.NewClientset(node)
	info := &NodeInfo{NodeName: testNode, Nodes: client.CoreV1().Nodes(), CSINodes: client.StorageV1().CSINodes()}
	get := func() *storagev1.CSINode {
		c, err := client.StorageV1().CSINodes().Get(ctx, testNode, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	if err := info.Initialize(ctx); err != nil {
		t.Fatal(err)
	}
	c := get()
	if a := c.Annotations[v1.MigratedPluginsAnnotationKey]; a != wantMigrated {
		t.Errorf("annotation %q, want %q", a, wantMigrated)
	}
	if len(c.OwnerReferences) != 1 || c.OwnerReferences[0].UID != "node-uid" {
		t.Errorf("owners %+v", c.OwnerReferences)
	}

	c.Annotations[v1.MigratedPluginsAnnotationKey] = "kubernetes.io/gce-pd"
	c.Annotations["other"] = "kept"
	if _, err := client.StorageV1().CSINodes().Update(ctx, c, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := info.Initialize(ctx); err != nil {
		t.Fatal(err)
	}
	if c := get(); c.Annotations[v1.MigratedPluginsAnnotationKey] != wantMigrated || c.Annotations["other"] != "kept" {
		t.Errorf("annotations %v after initialization", c.Annotations)
	}

	// An existing CSINode without the annotation gets it from a driver's
	// installation.
	c = get()
	delete(c.Annotations, v1.MigratedPluginsAnnotationKey)
	if _, err := client.StorageV1().CSINodes().Update(ctx, c, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	f := newFakeDriver(gcePD)
	info2, err := f.NodeGetInfo(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := info.InstallDriver(ctx, gcePD, info2); err != nil {
		t.Fatal(err)
	}
	if c := get(); c.Annotations[v1.MigratedPluginsAnnotationKey] != wantMigrated || len(c.Spec.Drivers) != 1 {
		t.Errorf("after the installation: annotations %v, drivers %+v", c.Annotations, c.Spec.Drivers)
	}
}
