package e2e

import (
	"context"
	"crypto/sha256"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/nodeagent/nodeagent/internal/testing/testenv"
	"github.com/nodeagent/nodeagent/internal/testing/testimage"
)

// kubelet 1.34's migrated in-tree plugins, as its CSINode annotation
// storage.alpha.kubernetes.io/migrated-plugins lists them.
const migratedPlugins = "kubernetes.io/aws-ebs,kubernetes.io/azure-disk,kubernetes.io/azure-file,kubernetes.io/cinder,kubernetes.io/gce-pd,kubernetes.io/portworx-volume,kubernetes.io/vsphere-volume"

// CSI migration against the real API server and controllers: the stand-in
// host-path driver registered as GCE PD's CSI driver
// (pd.csi.storage.gke.io, attachRequired false) serves a PV made the way
// the in-tree provisioner made them (gcePersistentDisk, pre-bound to a
// claim by the PV controller) and an inline gcePersistentDisk volume. The
// CSINode carries the migrated-plugins annotation; the pod runs with both
// volumes staged and published by the driver under the handles
// csi-translation-lib gives them (projects/UNSPECIFIED/zones/UNSPECIFIED/
// disks/<disk>), at kubelet's paths (the PV's name; the inline volume's
// translated PV name pd.csi.storage.gke.io-<disk>); an agent SIGKILL and
// restart leaves them mounted and published once; the pod's deletion
// unpublishes and unstages both, leaving no mount and no staging
// directory.
func TestCSIMigration(t *testing.T) {
	t.Parallel()
	a, rt := readyPodAgent(t, "")
	ctx := context.Background()
	admin := a.env.Admin
	const driver = "pd.csi.storage.gke.io"
	cp := deployNamedCSIPlugin(t, a, rt, driver, false)
	root, data, pp := cp.root, cp.data, cp.pod

	// The CSINode: the driver's entry and kubelet's annotation.
	var csiNode *storagev1.CSINode
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		c, err := admin.StorageV1().CSINodes().Get(ctx, a.node, metav1.GetOptions{})
		csiNode = c
		return err == nil && slices.ContainsFunc(c.Spec.Drivers, func(d storagev1.CSINodeDriver) bool { return d.Name == driver }), nil
	})
	if err != nil {
		t.Fatalf("the driver is not in the CSINode within 30s (%+v)", csiNode)
	}
	if got := csiNode.Annotations[corev1.MigratedPluginsAnnotationKey]; got != migratedPlugins {
		t.Errorf("CSINode annotation %s=%q, want kubelet's %q", corev1.MigratedPluginsAnnotationKey, got, migratedPlugins)
	}

	// A PV of the in-tree GCE PD plugin, bound to a claim.
	claim, pvName, disk, inlineDisk := "gce-"+a.node, "pv-gce-"+a.node, "disk-"+a.node, "inline-"+a.node
	fs := corev1.PersistentVolumeFilesystem
	if _, err := admin.CoreV1().PersistentVolumes().Create(ctx, &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: pvName},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:    corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Mi")},
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}, VolumeMode: &fs,
			ClaimRef:                      &corev1.ObjectReference{Namespace: "default", Name: claim},
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
			PersistentVolumeSource:        corev1.PersistentVolumeSource{GCEPersistentDisk: &corev1.GCEPersistentDiskVolumeSource{PDName: disk}},
		},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = admin.CoreV1().PersistentVolumes().Delete(context.Background(), pvName, metav1.DeleteOptions{})
	})
	empty := ""
	if _, err := admin.CoreV1().PersistentVolumeClaims("default").Create(ctx, &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: claim},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}, VolumeName: pvName, StorageClassName: &empty, VolumeMode: &fs,
			Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Mi")}},
		},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = admin.CoreV1().PersistentVolumeClaims("default").Delete(context.Background(), claim, metav1.DeleteOptions{})
	})

	handle := "projects/UNSPECIFIED/zones/UNSPECIFIED/disks/" + disk
	inlineHandle := "projects/UNSPECIFIED/zones/UNSPECIFIED/disks/" + inlineDisk
	staging := func(h string) string {
		return filepath.Join(root, "plugins/kubernetes.io/csi", driver, fmt.Sprintf("%x", sha256.Sum256([]byte(h))))
	}
	pod := a.node + "-gce"
	kubectl(t, a.env, podYAML(pod, a.node, fmt.Sprintf(`  terminationGracePeriodSeconds: 1
  volumes:
  - name: data
    persistentVolumeClaim: {claimName: %[2]s}
  - name: inline
    gcePersistentDisk: {pdName: %[3]s}
  containers:
  - name: c
    image: %[1]s
    command: ["sh", "-c", "echo pv > /data/file && echo inline > /inline/file && echo written; sleep 3600"]
    volumeMounts: [{name: data, mountPath: /data}, {name: inline, mountPath: /inline}]
`, testimage.Ref, claim, inlineDisk)), "apply", "-f", "-")
	p := a.waitPod(ctx, pod, 90*time.Second, "Running", running)
	a.waitLog(p, "c", 0, "written")
	target := filepath.Join(root, "pods", string(p.UID), "volumes/kubernetes.io~csi", pvName, "mount")
	inlineTarget := filepath.Join(root, "pods", string(p.UID), "volumes/kubernetes.io~csi", driver+"-"+inlineDisk, "mount")
	for _, m := range []string{target, inlineTarget, filepath.Join(staging(handle), "globalmount"), filepath.Join(staging(inlineHandle), "globalmount")} {
		waitMount(t, m, true)
	}
	// The driver's volumes are the translated handles.
	for h, want := range map[string]string{handle: "pv\n", inlineHandle: "inline\n"} {
		if b, err := os.ReadFile(filepath.Join(data, "volumes", h, "file")); err != nil || string(b) != want {
			t.Errorf("the driver's volume %s holds %q (%v), want %q", h, b, err, want)
		}
	}

	// SIGKILL and restart: reconstructed, nothing published again.
	if code, _ := a.stop(syscall.SIGKILL); code == 0 {
		t.Errorf("agent exit code %d after SIGKILL", code)
	}
	a.start()
	a.waitReady(ctx, 30*time.Second)
	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		return strings.Contains(a.out.String(), "registered CSI driver"), nil
	}); err != nil {
		t.Fatalf("the driver did not register again after the agent's restart")
	}
	time.Sleep(2 * time.Second) // a few syncs of the pod
	if p := a.waitPod(ctx, pod, 5*time.Second, "still Running", running); p.Status.ContainerStatuses[0].RestartCount != 0 {
		t.Errorf("the pod restarted over the agent's restart: %+v", p.Status.ContainerStatuses[0])
	}
	log := a.logOf(pp, "driver", 0)
	for _, h := range []string{handle, inlineHandle} {
		if n := strings.Count(log, "published "+h); n != 1 {
			t.Errorf("volume %s published %d times, want once:\n%s", h, n, log)
		}
	}
	if b, err := os.ReadFile(filepath.Join(target, "file")); err != nil || string(b) != "pv\n" {
		t.Errorf("after the restart the volume holds %q (%v)", b, err)
	}

	// The pod goes: both unpublished and unstaged, nothing left.
	if err := admin.CoreV1().Pods("default").Delete(ctx, pod, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	podsGone(t, a, pod)
	waitMount(t, target, false)
	waitMount(t, inlineTarget, false)
	waitGone(t, staging(handle))
	waitGone(t, staging(inlineHandle))
	waitGone(t, filepath.Join(root, "pods", string(p.UID)))
	if left, err := testenv.MountsUnder(filepath.Join(root, "pods"), filepath.Join(root, "plugins", "kubernetes.io")); err != nil || len(left) > 0 {
		t.Errorf("mounts left after the pod: %v (%v)", left, err)
	}
	if log := a.logOf(pp, "driver", 0); !strings.Contains(log, "unstaged "+handle) || !strings.Contains(log, "unstaged "+inlineHandle) {
		t.Errorf("the driver did not unstage both volumes:\n%s", log)
	}
	// The plugin goes: its CSINode entry goes, the annotation stays (as
	// under kubelet: it is the node's, not the driver's).
	if err := admin.CoreV1().Pods("default").Delete(ctx, cp.name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	podsGone(t, a, cp.name)
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		c, err := admin.StorageV1().CSINodes().Get(ctx, a.node, metav1.GetOptions{})
		csiNode = c
		return err == nil && !slices.ContainsFunc(c.Spec.Drivers, func(d storagev1.CSINodeDriver) bool { return d.Name == driver }), nil
	})
	if err != nil || csiNode.Annotations[corev1.MigratedPluginsAnnotationKey] != migratedPlugins {
		t.Errorf("after the plugin's removal: %v, CSINode %+v", err, csiNode)
	}
}

// CSI migration with attachment, end to end through kube-controller-
// manager's attach/detach controller and kubernetes-csi's real
// external-attacher: the stand-in driver registered as AWS EBS's CSI driver
// (ebs.csi.aws.com, attachRequired). A PV with awsElasticBlockStore
// (aws://<zone>/vol-…, translated to the handle vol-…) and an inline
// awsElasticBlockStore volume: the controller attaches each through CSI
// (the node's CSINode annotation says the node migrated aws-ebs) with a
// VolumeAttachment named after the translated handle — the PV's by
// persistentVolumeName, the inline one's with inlineVolumeSpec — and the
// agent reports each in status.volumesInUse under the name the
// controller matches (kubernetes.io/csi/ebs.csi.aws.com^<handle>): the
// driver, reading the Node at NodeStageVolume, finds it there, and the
// publish context of the attachment reaches it. After the pod, both leave
// volumesInUse and are detached (the VolumeAttachments go).
func TestCSIMigrationAttach(t *testing.T) {
	t.Parallel()
	a, rt := readyPodAgent(t, "")
	ctx := context.Background()
	admin := a.env.Admin
	const driver = "ebs.csi.aws.com"
	cp := deployNamedCSIPlugin(t, a, rt, driver, true)
	ctrl := deployCSIController(t, a, rt, cp, 1)

	claim, pvName := "ebs-"+a.node, "pv-ebs-"+a.node
	handle, inlineHandle := "vol-"+a.node, "vol-inline-"+a.node
	// The disks, made beforehand (the driver attaches only a volume that
	// is there).
	for _, h := range []string{handle, inlineHandle} {
		if err := os.MkdirAll(filepath.Join(cp.data, "volumes", h), 0o777); err != nil {
			t.Fatal(err)
		}
	}
	fs := corev1.PersistentVolumeFilesystem
	if _, err := admin.CoreV1().PersistentVolumes().Create(ctx, &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: pvName},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:    corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Mi")},
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}, VolumeMode: &fs,
			ClaimRef:                      &corev1.ObjectReference{Namespace: "default", Name: claim},
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
			PersistentVolumeSource: corev1.PersistentVolumeSource{AWSElasticBlockStore: &corev1.AWSElasticBlockStoreVolumeSource{
				VolumeID: "aws://us-east-1a/" + handle}},
		},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	empty := ""
	if _, err := admin.CoreV1().PersistentVolumeClaims("default").Create(ctx, &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: claim},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}, VolumeName: pvName, StorageClassName: &empty, VolumeMode: &fs,
			Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Mi")}},
		},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	vaName := func(h string) string { return fmt.Sprintf("csi-%x", sha256.Sum256([]byte(h+driver+a.node))) }
	name := a.node + "-ebs"
	// On a failure, before the controller goes (cleanups run last first):
	// the pod, the claim and the PV, then the VolumeAttachments, which
	// need external-attacher to let go of them.
	t.Cleanup(func() {
		ctx := context.Background()
		_ = admin.CoreV1().Pods("default").Delete(ctx, name, metav1.DeleteOptions{})
		_ = admin.CoreV1().PersistentVolumeClaims("default").Delete(ctx, claim, metav1.DeleteOptions{})
		_ = admin.CoreV1().PersistentVolumes().Delete(ctx, pvName, metav1.DeleteOptions{})
		if err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 60*time.Second, true, func(ctx context.Context) (bool, error) {
			_, err1 := admin.StorageV1().VolumeAttachments().Get(ctx, vaName(handle), metav1.GetOptions{})
			_, err2 := admin.StorageV1().VolumeAttachments().Get(ctx, vaName(inlineHandle), metav1.GetOptions{})
			_, err3 := admin.CoreV1().PersistentVolumes().Get(ctx, pvName, metav1.GetOptions{})
			return apierrors.IsNotFound(err1) && apierrors.IsNotFound(err2) && apierrors.IsNotFound(err3), nil
		}); err != nil {
			t.Errorf("a VolumeAttachment or the PV %s stays 60s after the test; deleting the VolumeAttachments", pvName)
			_ = admin.StorageV1().VolumeAttachments().Delete(ctx, vaName(handle), metav1.DeleteOptions{})
			_ = admin.StorageV1().VolumeAttachments().Delete(ctx, vaName(inlineHandle), metav1.DeleteOptions{})
		}
	})
	if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		c, err := admin.StorageV1().CSINodes().Get(ctx, a.node, metav1.GetOptions{})
		return err == nil && slices.ContainsFunc(c.Spec.Drivers, func(d storagev1.CSINodeDriver) bool { return d.Name == driver }) &&
			c.Annotations[corev1.MigratedPluginsAnnotationKey] == migratedPlugins, nil
	}); err != nil {
		t.Fatalf("the driver did not register or the CSINode has no migrated-plugins annotation: %v", err)
	}

	kubectl(t, a.env, podYAML(name, a.node, fmt.Sprintf(`  terminationGracePeriodSeconds: 1
  volumes:
  - name: data
    persistentVolumeClaim: {claimName: %[2]s}
  - name: inline
    awsElasticBlockStore: {volumeID: %[3]s}
  containers:
  - name: c
    image: %[1]s
    command: ["sh", "-c", "echo pv > /data/f && echo inline > /inline/f && echo ok; sleep 3600"]
    volumeMounts: [{name: data, mountPath: /data}, {name: inline, mountPath: /inline}]
`, testimage.Ref, claim, inlineHandle)), "apply", "-f", "-")
	p := a.waitPod(ctx, name, 120*time.Second, "Running", running)
	a.waitLog(p, "c", 0, "ok")
	for h, want := range map[string]string{handle: "pv\n", inlineHandle: "inline\n"} {
		if b, err := os.ReadFile(filepath.Join(cp.data, "volumes", h, "f")); err != nil || string(b) != want {
			t.Errorf("the driver's volume %s holds %q (%v), want %q", h, b, err, want)
		}
	}
	pva, err := admin.StorageV1().VolumeAttachments().Get(ctx, vaName(handle), metav1.GetOptions{})
	if err != nil {
		t.Fatalf("no VolumeAttachment %s for the PV: %v", vaName(handle), err)
	}
	if !pva.Status.Attached || pva.Spec.Attacher != driver || pva.Spec.Source.PersistentVolumeName == nil || *pva.Spec.Source.PersistentVolumeName != pvName {
		t.Errorf("the PV's VolumeAttachment %+v", pva)
	}
	iva, err := admin.StorageV1().VolumeAttachments().Get(ctx, vaName(inlineHandle), metav1.GetOptions{})
	if err != nil {
		t.Fatalf("no VolumeAttachment %s for the inline volume: %v", vaName(inlineHandle), err)
	}
	if s := iva.Spec.Source.InlineVolumeSpec; !iva.Status.Attached || iva.Spec.Attacher != driver || s == nil || s.CSI == nil || s.CSI.VolumeHandle != inlineHandle {
		t.Errorf("the inline volume's VolumeAttachment %+v", iva)
	}
	for _, h := range []string{handle, inlineHandle} {
		waitNodeVolumesInUse(t, a, corev1.UniqueVolumeName("kubernetes.io/csi/"+driver+"^"+h), true)
	}
	log := a.logOf(cp.pod, "driver", 0)
	for _, h := range []string{handle, inlineHandle} {
		if !strings.Contains(log, "NodeStageVolume of "+h+": in the Node's volumesInUse") || !strings.Contains(log, "staged "+h+" at ") {
			t.Errorf("volume %s: not staged while in the Node's volumesInUse:\n%s", h, log)
		}
	}

	// Gone: out of volumesInUse, detached.
	if err := admin.CoreV1().Pods("default").Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	podsGone(t, a, name)
	for _, h := range []string{handle, inlineHandle} {
		waitNodeVolumesInUse(t, a, corev1.UniqueVolumeName("kubernetes.io/csi/"+driver+"^"+h), false)
		if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 90*time.Second, true, func(ctx context.Context) (bool, error) {
			_, err := admin.StorageV1().VolumeAttachments().Get(ctx, vaName(h), metav1.GetOptions{})
			return apierrors.IsNotFound(err), nil
		}); err != nil {
			t.Errorf("the VolumeAttachment of %s stays 90s after the pod:\n%s", h, ctrl.log(t, "csi-attacher"))
		}
	}
	if log := ctrl.log(t, "hostpath"); strings.Count(log, "detached volume ") != 2 || strings.Contains(log, "refused to detach") {
		t.Errorf("the driver's controller log, want two detaches and no refusal:\n%s", log)
	}
	if left, err := testenv.MountsUnder(filepath.Join(cp.root, "pods", string(p.UID)), filepath.Join(cp.root, "plugins", "kubernetes.io")); err != nil || len(left) > 0 {
		t.Errorf("mounts left after the pod: %v (%v)", left, err)
	}
}
