package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/nodeagent/nodeagent/internal/loopdev"
	"github.com/nodeagent/nodeagent/internal/testing/testenv"
	"github.com/nodeagent/nodeagent/internal/testing/testimage"
)

// A local PersistentVolume of volumeMode Filesystem as an operator makes
// one: a directory on the node, a PV with spec.local.path and a
// nodeAffinity to the node, a no-provisioner StorageClass with
// WaitForFirstConsumer and a claim of that class. The claim waits for its
// first consumer (the PV controller's WaitForFirstConsumer event); a pod
// placed by kube-scheduler (whose volume binding picks the PV by its node
// affinity) writes a file through the claim; the agent binds the
// directory at kubelet's path
// <pod>/volumes/kubernetes.io~local-volume/<PV>, and the file is in the
// node's directory. The pod is deleted: its volume is unmounted and the
// pod's directory goes, but the directory's content stays (a local PV's
// data is the operator's); a second pod reads the file back, and after it
// no mount is left under the pods' directories.
func TestLocalPersistentVolume(t *testing.T) {
	t.Parallel()
	a, _ := readyPodAgent(t, "")
	ctx := context.Background()
	dir := t.TempDir()
	claim, pvName := "local-"+a.node, "pv-local-"+a.node
	localClaim(t, a, claim, pvName, dir, corev1.PersistentVolumeFilesystem)

	pod := func(name, cmd string) string {
		return localPod(a, name, cmd, "    volumeMounts: [{name: data, mountPath: /data}]\n", claim)
	}
	writer := a.node + "-local-writer"
	kubectl(t, a.env, pod(writer, "echo local-payload-7 > /data/f && sync && echo written; sleep 3600"), "apply", "-f", "-")
	wp := a.waitPod(ctx, writer, 90*time.Second, "Running", running)
	a.waitLog(wp, "c", 0, "written")
	checkLocalBound(t, a, wp, claim, pvName)
	target := filepath.Join(a.rootDir(), "pods", string(wp.UID), "volumes/kubernetes.io~local-volume", pvName)
	waitMount(t, target, true)
	if b, err := os.ReadFile(filepath.Join(dir, "f")); err != nil || string(b) != "local-payload-7\n" {
		t.Errorf("the node's directory holds %q (%v), want the pod's file", b, err)
	}

	// The writer goes: unmounted before it leaves the API (kubelet's
	// order: a claim's protection and a PV's reclaim follow the pod
	// object), its directory removed, the data kept.
	deleteLocalPod(t, a, wp, target)
	if b, err := os.ReadFile(filepath.Join(dir, "f")); err != nil || string(b) != "local-payload-7\n" {
		t.Errorf("after the pod's teardown the node's directory holds %q (%v): a local PV's data is not the agent's to delete", b, err)
	}

	reader := a.node + "-local-reader"
	kubectl(t, a.env, pod(reader, "echo read=$(cat /data/f); sleep 3600"), "apply", "-f", "-")
	rp := a.waitPod(ctx, reader, 90*time.Second, "Running", running)
	a.waitLog(rp, "c", 0, "read=local-payload-7")
	waitMount(t, filepath.Join(a.rootDir(), "pods", string(rp.UID), "volumes/kubernetes.io~local-volume", pvName), true)
	deleteLocalPod(t, a, rp, filepath.Join(a.rootDir(), "pods", string(rp.UID), "volumes/kubernetes.io~local-volume", pvName))
	if left, err := testenv.MountsUnder(filepath.Join(a.rootDir(), "pods")); err != nil || len(left) > 0 {
		t.Errorf("mounts left under the pods' directories: %v (%v)", left, err)
	}
	if es, err := os.ReadDir(dir); err != nil || len(es) != 1 {
		t.Errorf("the local PV's directory after both pods: %v (%v), want the file alone", es, err)
	}
}

// A local PersistentVolume of volumeMode Block: a loop device over an
// 8 MiB file the test makes is the PV's spec.local.path, the claim is of
// volumeMode Block and the pods map it with volumeDevices. As kubelet's
// local volume plugin maps it: the device bound at
// plugins/kubernetes.io~local-volume/volumeDevices/<PV>/<uid> with a loop
// device over the bind (the descriptor lock) and the pod's symlink
// <pod>/volumeDevices/kubernetes.io~local-volume/<PV>. The writer writes
// bytes on the device, which are on the test's file; after the writer's
// teardown (no bind, no symlink, no loop device over the agent's files)
// a second pod reads them back from the device.
func TestLocalBlockPersistentVolume(t *testing.T) {
	t.Parallel()
	a, _ := readyPodAgent(t, "")
	ctx := context.Background()
	dir := t.TempDir()
	file := filepath.Join(dir, "disk")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(file, 8<<20); err != nil {
		t.Fatal(err)
	}
	dev, err := loopdev.Attach(file)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { detachLoopsUnder(t, a.rootDir(), dir) })
	claim, pvName := "local-blk-"+a.node, "pv-local-blk-"+a.node
	localClaim(t, a, claim, pvName, dev, corev1.PersistentVolumeBlock)

	pod := func(name, cmd string) string {
		return localPod(a, name, cmd, "    volumeDevices: [{name: data, devicePath: /dev/xvda}]\n", claim)
	}
	base := filepath.Join(a.rootDir(), "plugins/kubernetes.io~local-volume/volumeDevices", pvName)
	writer := a.node + "-local-blk-writer"
	kubectl(t, a.env, pod(writer, "ls -l /dev/xvda; printf local-block-payload-9 > /dev/xvda && sync && echo written; sleep 3600"), "apply", "-f", "-")
	wp := a.waitPod(ctx, writer, 90*time.Second, "Running", running)
	if log := a.waitLog(wp, "c", 0, "written"); !bytes.Contains([]byte(log), []byte("brw")) {
		t.Errorf("/dev/xvda is not a block device in the container:\n%s", log)
	}
	checkLocalBound(t, a, wp, claim, pvName)
	link := filepath.Join(a.rootDir(), "pods", string(wp.UID), "volumeDevices/kubernetes.io~local-volume", pvName)
	bind := filepath.Join(base, string(wp.UID))
	if target, err := os.Readlink(link); err != nil || target != dev {
		t.Errorf("the pod's symlink %s -> %q (%v), want the PV's device %s", link, target, err, dev)
	}
	waitMount(t, bind, true)
	if n := len(loopsOver(t, bind)); n != 1 {
		t.Errorf("%d loop devices over %s, want 1 (the descriptor lock)", n, bind)
	}
	if b, err := os.ReadFile(file); err != nil || !bytes.HasPrefix(b, []byte("local-block-payload-9")) {
		t.Errorf("the device's file starts with %q (%v), want the pod's bytes", b[:min(len(b), 32)], err)
	}

	deleteLocalPod(t, a, wp, bind)
	waitGone(t, link)
	waitGone(t, base)
	if l := loopsUnder(t, a.rootDir()); len(l) > 0 {
		t.Errorf("loop devices left over the agent's files: %v", l)
	}
	if got, err := loopdev.Find(file); err != nil || got != dev {
		t.Errorf("the PV's own loop device is %q (%v) after the teardown, want %s kept", got, err, dev)
	}

	reader := a.node + "-local-blk-reader"
	kubectl(t, a.env, pod(reader, "echo read=$(head -c 21 /dev/xvda); sleep 3600"), "apply", "-f", "-")
	rp := a.waitPod(ctx, reader, 90*time.Second, "Running", running)
	a.waitLog(rp, "c", 0, "read=local-block-payload-9")
	deleteLocalPod(t, a, rp, filepath.Join(base, string(rp.UID)))
	waitGone(t, base)
	if left, err := testenv.MountsUnder(filepath.Join(a.rootDir(), "pods"), filepath.Join(a.rootDir(), "plugins")); err != nil || len(left) > 0 {
		t.Errorf("mounts left: %v (%v)", left, err)
	}
}

// localClaim makes, for the test's node, a no-provisioner StorageClass
// with WaitForFirstConsumer, a local PV of mode at path with a
// nodeAffinity to the node, and the claim default/claim of that class; it
// waits for the PV controller's WaitForFirstConsumer event on the claim.
// All three are deleted at the end.
func localClaim(t *testing.T, a *agent, claim, pvName, path string, mode corev1.PersistentVolumeMode) {
	t.Helper()
	ctx := context.Background()
	admin := a.env.Admin
	// The scheduler binds the pods once the node has no taints.
	a.waitNode(ctx, 60*time.Second, "no taints", func(n *corev1.Node) bool { return len(n.Spec.Taints) == 0 })
	class := pvName
	wffc, retain := storagev1.VolumeBindingWaitForFirstConsumer, corev1.PersistentVolumeReclaimRetain
	if _, err := admin.StorageV1().StorageClasses().Create(ctx, &storagev1.StorageClass{
		ObjectMeta: metav1.ObjectMeta{Name: class}, Provisioner: "kubernetes.io/no-provisioner",
		VolumeBindingMode: &wffc, ReclaimPolicy: &retain,
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.CoreV1().PersistentVolumes().Create(ctx, &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: pvName},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:    corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("8Mi")},
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}, VolumeMode: &mode,
			StorageClassName: class, PersistentVolumeReclaimPolicy: retain,
			PersistentVolumeSource: corev1.PersistentVolumeSource{Local: &corev1.LocalVolumeSource{Path: path}},
			NodeAffinity: &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
				MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "kubernetes.io/hostname", Operator: corev1.NodeSelectorOpIn, Values: []string{a.node}}},
			}}}},
		},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.CoreV1().PersistentVolumeClaims("default").Create(ctx, &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: claim},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}, StorageClassName: &class, VolumeMode: &mode,
			Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("8Mi")}},
		},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		bg := context.Background()
		_ = admin.CoreV1().PersistentVolumeClaims("default").Delete(bg, claim, metav1.DeleteOptions{})
		_ = admin.CoreV1().PersistentVolumes().Delete(bg, pvName, metav1.DeleteOptions{})
		_ = admin.StorageV1().StorageClasses().Delete(bg, class, metav1.DeleteOptions{})
	})
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		evs, err := admin.CoreV1().Events("default").List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + claim})
		if err != nil {
			return false, nil
		}
		for _, e := range evs.Items {
			if e.Reason == "WaitForFirstConsumer" {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Errorf("no WaitForFirstConsumer event on claim %s within 30s: %v", claim, err)
	}
	if c, err := admin.CoreV1().PersistentVolumeClaims("default").Get(ctx, claim, metav1.GetOptions{}); err != nil || c.Status.Phase != corev1.ClaimPending || c.Spec.VolumeName != "" {
		t.Errorf("claim %s before its first consumer: %v %+v, want Pending and unbound", claim, err, c.Status)
	}
}

// localPod is a pod for the scheduler (no nodeName; a nodeSelector for
// the test's node) whose container c runs cmd with the claim as volume
// data, used as use (its volumeMounts or volumeDevices line).
func localPod(a *agent, name, cmd, use, claim string) string {
	return podYAML(name, "", fmt.Sprintf(`  terminationGracePeriodSeconds: 1
  nodeSelector: {kubernetes.io/hostname: %[1]s}
  volumes:
  - name: data
    persistentVolumeClaim: {claimName: %[2]s}
  containers:
  - name: c
    image: %[3]s
    command: ["sh", "-c", %[4]q]
%[5]s`, a.node, claim, testimage.Ref, cmd, use))
}

// checkLocalBound: the scheduler placed pod p on the test's node and the
// claim is bound to the local PV.
func checkLocalBound(t *testing.T, a *agent, p *corev1.Pod, claim, pvName string) {
	t.Helper()
	if p.Spec.NodeName != a.node {
		t.Errorf("pod %s bound to %q, want %q", p.Name, p.Spec.NodeName, a.node)
	}
	c, err := a.env.Admin.CoreV1().PersistentVolumeClaims("default").Get(context.Background(), claim, metav1.GetOptions{})
	if err != nil || c.Status.Phase != corev1.ClaimBound || c.Spec.VolumeName != pvName {
		t.Errorf("claim %s: %v %q %+v, want Bound to %s", claim, err, c.Spec.VolumeName, c.Status, pvName)
	}
}

// deleteLocalPod deletes p and waits until the agent finished it and its
// directory under the agent's root is gone. When the pod has left the
// API, mount (its volume's mount or device bind) must be gone already.
func deleteLocalPod(t *testing.T, a *agent, p *corev1.Pod, mount string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	// A watch, not a poll: the check runs as soon as the pod leaves.
	w, err := a.env.Admin.CoreV1().Pods("default").Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + p.Name, ResourceVersion: p.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	if err := a.env.Admin.CoreV1().Pods("default").Delete(ctx, p.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	for ev := range w.ResultChan() {
		if ev.Type == watch.Deleted {
			break
		}
	}
	podsGone(t, a, p.Name)
	if left, err := testenv.MountsUnder(filepath.Dir(mount)); err != nil || slices.ContainsFunc(left, func(m string) bool { return strings.HasSuffix(m, " "+mount) }) {
		t.Errorf("%s is still mounted when pod %s has left the API (%v): kubelet deletes a pod once its volumes are torn down", mount, p.Name, err)
	}
	waitGone(t, filepath.Join(a.rootDir(), "pods", string(p.UID)))
}
