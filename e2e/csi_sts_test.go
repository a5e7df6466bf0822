package e2e

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"

	"github.com/nodeagent/nodeagent/internal/testing/testenv"
	"github.com/nodeagent/nodeagent/internal/testing/testimage"
	"github.com/nodeagent/nodeagent/runtime"
)

// A StatefulSet with volumeClaimTemplates, as an operator runs one on a
// CSI driver with dynamic provisioning: the driver's node plugin as in
// TestCSIHostPathDriver, its controller as a Deployment holding the real
// kubernetes-csi external-provisioner and external-resizer
// (deployCSIController, hack/csi-sidecars), a StorageClass. Replica 0
// writes a file into its claim; the file is there after the pod is
// deleted and recreated (a new pod UID: the volume is unpublished and
// published again), and after the agent is SIGKILLed and restarted (the
// pod keeps running, the volume stays mounted and is not published again);
// when the pod is force-deleted while the agent is down, the restarted
// agent's volume reconstruction leads to the gone pod's volume being
// unpublished while the StatefulSet's new pod gets it.
// While it runs, /stats/summary reports the volume with its pvcRef from
// the driver's NodeGetVolumeStats and /metrics has kubelet's
// kubelet_volume_stats_* for the claim; the claim resized,
// external-resizer expands it in the controller and the agent on the node
// (NodeExpandVolume) and writes the claim's new capacity. Scaled to zero
// and with the claim deleted, no mount, no staging directory, no
// VolumeAttachment and no PV stay, and the driver's volume is deleted.
//
// The sidecars are built beforehand (make csi-sidecars; make test does).
// Wall time: see docs/storage.md.
func TestCSIStatefulSet(t *testing.T) {
	t.Parallel()
	a, rt := readyPodAgent(t, "")
	ctx := context.Background()
	admin := a.env.Admin
	cp := deployCSIPlugin(t, a, rt, false)
	ctrl := deployCSIController(t, a, rt, cp, 1)

	// The StorageClass, named after the driver (one per test node).
	del, yes := corev1.PersistentVolumeReclaimDelete, true
	if _, err := admin.StorageV1().StorageClasses().Create(ctx, &storagev1.StorageClass{
		ObjectMeta: metav1.ObjectMeta{Name: cp.driver}, Provisioner: cp.driver, ReclaimPolicy: &del, AllowVolumeExpansion: &yes,
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = admin.StorageV1().StorageClasses().Delete(context.Background(), cp.driver, metav1.DeleteOptions{})
	})

	sum := sha256.Sum256([]byte(a.node))
	sts := fmt.Sprintf("sts-%x", sum[:4])
	pod0, claim := sts+"-0", "data-"+sts+"-0"
	kubectl(t, a.env, fmt.Sprintf(`apiVersion: apps/v1
kind: StatefulSet
metadata: {name: %[1]s, namespace: default}
spec:
  serviceName: %[1]s
  replicas: 1
  selector: {matchLabels: {app: %[1]s}}
  template:
    metadata: {labels: {app: %[1]s}}
    spec:
      nodeName: %[2]s
      automountServiceAccountToken: false
      terminationGracePeriodSeconds: 1
      containers:
      - name: c
        image: %[3]s
        command: ["sh", "-c", "if [ -f /data/f ]; then echo found=$(cat /data/f); else echo token-%[1]s > /data/f && echo wrote; fi; sleep 3600"]
        volumeMounts: [{name: data, mountPath: /data}]
  volumeClaimTemplates:
  - metadata: {name: data}
    spec:
      accessModes: [ReadWriteOnce]
      storageClassName: %[4]s
      resources: {requests: {storage: 1Mi}}
`, sts, a.node, testimage.Ref, cp.driver), "apply", "-f", "-")
	t.Cleanup(func() {
		_ = admin.AppsV1().StatefulSets("default").Delete(context.Background(), sts, metav1.DeleteOptions{})
		_ = admin.CoreV1().PersistentVolumeClaims("default").Delete(context.Background(), claim, metav1.DeleteOptions{})
	})

	// Provisioned and bound: a PV of the driver, made by the provisioner.
	p0 := a.waitPod(ctx, pod0, 90*time.Second, "Running", running)
	a.waitLog(p0, "c", 0, "wrote")
	pvc, err := admin.CoreV1().PersistentVolumeClaims("default").Get(ctx, claim, metav1.GetOptions{})
	if err != nil || pvc.Status.Phase != corev1.ClaimBound {
		t.Fatalf("claim %s: %v %+v", claim, err, pvc)
	}
	pvName := pvc.Spec.VolumeName
	pv, err := admin.CoreV1().PersistentVolumes().Get(ctx, pvName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if pv.Spec.CSI == nil || pv.Spec.CSI.Driver != cp.driver || pv.Annotations["pv.kubernetes.io/provisioned-by"] != cp.driver ||
		pv.Spec.PersistentVolumeReclaimPolicy != corev1.PersistentVolumeReclaimDelete {
		t.Errorf("PV %s: %+v %v", pvName, pv.Spec, pv.Annotations)
	}
	handle := pv.Spec.CSI.VolumeHandle
	stagingDir := filepath.Join(cp.root, "plugins/kubernetes.io/csi", cp.driver, fmt.Sprintf("%x", sha256.Sum256([]byte(handle))))
	target := func(uid types.UID) string {
		return filepath.Join(cp.root, "pods", string(uid), "volumes/kubernetes.io~csi", pvName, "mount")
	}
	waitMount(t, target(p0.UID), true)
	if b, err := os.ReadFile(filepath.Join(cp.data, "volumes", handle, "f")); err != nil || string(b) != "token-"+sts+"\n" {
		t.Errorf("the driver's volume holds %q (%v)", b, err)
	}

	// The pod is deleted; the StatefulSet controller makes it again (a new
	// UID), which finds the file.
	if err := admin.CoreV1().Pods("default").Delete(ctx, pod0, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	p1 := a.waitPod(ctx, pod0, 90*time.Second, "Running again", func(p *corev1.Pod) bool { return p.UID != p0.UID && running(p) })
	a.waitLog(p1, "c", 0, "found=token-"+sts)
	waitMount(t, target(p0.UID), false)
	waitMount(t, target(p1.UID), true)

	// The agent is SIGKILLed and restarts: the pod keeps running with its
	// volume, which is not published again.
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
	if p := a.waitPod(ctx, pod0, 5*time.Second, "still Running", running); p.UID != p1.UID || p.Status.ContainerStatuses[0].RestartCount != 0 {
		t.Errorf("the pod was replaced or restarted over the agent's restart: %s %+v", p.UID, p.Status.ContainerStatuses[0])
	}
	if b, err := os.ReadFile(filepath.Join(target(p1.UID), "f")); err != nil || string(b) != "token-"+sts+"\n" {
		t.Errorf("after the agent's restart the volume holds %q (%v)", b, err)
	}
	if n := strings.Count(a.logOf(cp.pod, "driver", 0), " published "+handle); n != 2 { // not "unpublished"
		t.Errorf("the volume was published %d times, want twice (one per pod):\n%s", n, a.logOf(cp.pod, "driver", 0))
	}

	// Volume stats: the driver's NodeGetVolumeStats, with the claim.
	checkCSIVolumeStats(t, a, p1, claim)

	// Online expansion: the claim asks for 2Mi; external-resizer expands
	// the volume in the controller (ControllerExpandVolume), grows the PV
	// and leaves the claim NodeResizePending; at the pod's next sync (here
	// made at once by a change of the pod) the agent expands on the node
	// and the claim gets its new capacity.
	expandClaim(t, a, claim, pvName, p1.Name)
	if !strings.Contains(ctrl.log(t, "hostpath"), "controller-expanded volume "+handle) {
		t.Errorf("the driver's controller was not asked to expand:\n%s", ctrl.log(t, "hostpath"))
	}
	if !strings.Contains(a.logOf(cp.pod, "driver", 0), "expanded "+handle) {
		t.Errorf("the driver was not asked to expand:\n%s", a.logOf(cp.pod, "driver", 0))
	}

	// Volume reconstruction: the agent is SIGKILLed again and the pod is
	// force-deleted while it is down. The restarted agent finds the gone
	// pod's volume in its directory, tears it down as an orphan's
	// (unpublished, no stale mount) while the StatefulSet's new pod gets
	// the volume, and the file.
	if code, _ := a.stop(syscall.SIGKILL); code == 0 {
		t.Errorf("agent exit code %d after SIGKILL", code)
	}
	zero := int64(0)
	if err := admin.CoreV1().Pods("default").Delete(ctx, pod0, metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
		t.Fatal(err)
	}
	a.start()
	a.waitReady(ctx, 30*time.Second)
	p2 := a.waitPod(ctx, pod0, 90*time.Second, "Running (third)", func(p *corev1.Pod) bool { return p.UID != p1.UID && running(p) })
	a.waitLog(p2, "c", 0, "found=token-"+sts)
	waitMount(t, target(p1.UID), false)
	waitGone(t, filepath.Join(cp.root, "pods", string(p1.UID)))
	if !strings.Contains(a.out.String(), "reconstructed volume") {
		t.Errorf("the agent's log has no reconstructed volume")
	}
	waitMount(t, target(p2.UID), true)

	// Scaled to zero: unpublished and unstaged; the claim stays (the
	// StatefulSet's default retention) until it is deleted, and then the
	// provisioner deletes the volume and the PV.
	kubectl(t, a.env, "", "scale", "statefulset/"+sts, "--replicas=0")
	podsGone(t, a, pod0)
	waitMount(t, target(p2.UID), false)
	waitGone(t, stagingDir)
	if err := admin.CoreV1().PersistentVolumeClaims("default").Delete(ctx, claim, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 60*time.Second, true, func(ctx context.Context) (bool, error) {
		_, err := admin.CoreV1().PersistentVolumes().Get(ctx, pvName, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	}); err != nil {
		t.Errorf("PV %s stays after its claim is deleted: %v", pvName, err)
	}
	waitGone(t, filepath.Join(cp.data, "volumes", handle))
	// (The controller's pod runs on the node still, with its token's mount.)
	left, err := testenv.MountsUnder(filepath.Join(cp.root, "pods"), filepath.Join(cp.root, "plugins", "kubernetes.io"))
	var stale []string
	for _, m := range left {
		if !strings.Contains(m, filepath.Join(cp.root, "pods", string(ctrl.pod))+"/") {
			stale = append(stale, m)
		}
	}
	if err != nil || len(stale) > 0 {
		t.Errorf("mounts left: %v (%v)", stale, err)
	}
	vas, err := admin.StorageV1().VolumeAttachments().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, va := range vas.Items {
		if va.Spec.NodeName == a.node {
			t.Errorf("VolumeAttachment %s stays: %+v", va.Name, va.Spec)
		}
	}
}

// checkCSIVolumeStats: /stats/summary lists the pod's volume "data" with
// its pvcRef and the driver's figures (the file the pod wrote is used
// bytes), and /metrics has kubelet's volume stats gauges for the claim.
func checkCSIVolumeStats(t *testing.T, a *agent, p *corev1.Pod, claim string) {
	t.Helper()
	vs := podVolumeStats(t, a, p, "data")
	if vs.PVCRef == nil || vs.PVCRef.Name != claim || vs.PVCRef.Namespace != "default" ||
		vs.CapacityBytes == nil || *vs.CapacityBytes == 0 || vs.UsedBytes == nil || *vs.UsedBytes == 0 ||
		vs.InodesUsed == nil || *vs.InodesUsed < 2 || vs.Inodes == nil || *vs.Inodes == 0 {
		b, _ := json.Marshal(vs)
		t.Errorf("volume stats %s", b)
	}
	_, metrics := a.get("/metrics")
	for _, m := range []string{"capacity_bytes", "available_bytes", "used_bytes", "inodes", "inodes_free", "inodes_used"} {
		want := fmt.Sprintf(`kubelet_volume_stats_%s{namespace="default",persistentvolumeclaim=%q} `, m, claim)
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics has no %s", want)
		}
	}
	// Without kubelet's CSIVolumeHealth gate (off by default) no volume
	// condition, though the driver reports one.
	if vs.VolumeHealthStats != nil || strings.Contains(metrics, "kubelet_volume_stats_health_status_abnormal{") {
		t.Errorf("volume health without the CSIVolumeHealth gate: %+v", vs.VolumeHealthStats)
	}
}

// checkCSIVolumeHealth: with kubelet's CSIVolumeHealth gate the pod's
// volume "data" has the driver's condition as volumeHealthStats in
// /stats/summary and as kubelet_volume_stats_health_status_abnormal of
// the claim in /metrics (1 when abnormal).
// A volume is measured at most once a minute (and, with the gate, in the
// background every minute), so a condition that changed right after a
// measurement shows at the next one: polled for 75s.
func checkCSIVolumeHealth(t *testing.T, a *agent, p *corev1.Pod, claim string, abnormal bool) {
	t.Helper()
	var vs *statsapi.VolumeStats
	deadline := time.Now().Add(75 * time.Second)
	for {
		vs = podVolumeStats(t, a, p, "data")
		if h := vs.VolumeHealthStats; (h != nil && h.Abnormal == abnormal) || time.Now().After(deadline) {
			break
		}
		time.Sleep(time.Second)
	}
	if vs.VolumeHealthStats == nil || vs.VolumeHealthStats.Abnormal != abnormal {
		b, _ := json.Marshal(vs)
		t.Errorf("volume stats %s, want volumeHealthStats abnormal %v", b, abnormal)
	}
	_, metrics := a.get("/metrics")
	v := 0
	if abnormal {
		v = 1
	}
	if want := fmt.Sprintf("kubelet_volume_stats_health_status_abnormal{namespace=\"default\",persistentvolumeclaim=%q} %d\n", claim, v); !strings.Contains(metrics, want) {
		t.Errorf("/metrics has no %s", want)
	}
}

// podVolumeStats waits until /stats/summary lists the pod's volume name
// and returns its stats.
func podVolumeStats(t *testing.T, a *agent, p *corev1.Pod, name string) *statsapi.VolumeStats {
	t.Helper()
	var vs *statsapi.VolumeStats
	var out string
	// After an agent restart the volume is listed once the pod synced.
	if err := wait.PollUntilContextTimeout(context.Background(), 500*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		var err error
		if out, err = kubectlOut(t, a.env, "get", "--raw", "/api/v1/nodes/"+a.node+"/proxy/stats/summary"); err != nil {
			return false, nil
		}
		var sum statsapi.Summary
		if err := json.Unmarshal([]byte(out), &sum); err != nil {
			return false, err
		}
		for _, ps := range sum.Pods {
			for i := range ps.VolumeStats {
				if ps.PodRef.UID == string(p.UID) && ps.VolumeStats[i].Name == name {
					vs = &ps.VolumeStats[i]
				}
			}
		}
		return vs != nil, nil
	}); err != nil {
		t.Fatalf("no volume stats for the pod's volume %s in /stats/summary (%v):\n%s", name, err, out)
	}
	return vs
}

// csiControllerRef is the image of the CSI driver's controller Deployment
// (hack/csi-sidecars/controller.yaml): internal/testing/csihostpath and
// kubernetes-csi's external-provisioner, external-resizer and
// external-attacher, which hack/build-csi-sidecars.sh builds from their
// pinned modules.
const csiControllerRef = "docker.io/nodeagent/csi-controller:e2e"

// csiController is the driver's controller deployed by deployCSIController.
type csiController struct {
	namespace string
	pod       types.UID // its pod
	env       *testenv.Env
}

// csiControllerContainers are the containers of the controller's pod.
var csiControllerContainers = []string{"hostpath", "csi-provisioner", "csi-resizer", "csi-attacher"}

// log is the named container's log (the hostpath driver's controller,
// csi-provisioner, csi-resizer or csi-attacher).
func (c csiController) log(t *testing.T, container string) string {
	out, err := kubectlOut(t, c.env, "-n", c.namespace, "logs", "deployment/csi-controller", "-c", container, "--tail=200")
	if err != nil {
		return fmt.Sprintf("(no log: %v)", err)
	}
	return out
}

// deployCSIController deploys cp's driver's controller as an operator does
// (hack/csi-sidecars/controller.yaml: a one-replica Deployment on the
// test's node holding the driver's controller service, external-
// provisioner, external-resizer and external-attacher on a shared socket,
// with upstream's RBAC for its ServiceAccount; the driver's controller
// attaches when cp's driver does) in a namespace of its own, with replicas
// (0 or 1) replicas, and with one waits for its pod to run. It is removed
// when the test ends.
func deployCSIController(t *testing.T, a *agent, rt *runtime.Runtime, cp csiPlugin, replicas int) csiController {
	t.Helper()
	ctx := context.Background()
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	files := []testimage.File{
		testimage.Dir("bin", 0o755), testimage.Dir("tmp", 0o1777), testimage.Dir("dev", 0o755), testimage.Dir("proc", 0o755), testimage.Dir("sys", 0o755),
		testimage.Dir("etc", 0o755), testimage.Reg("bin/csihostpath", 0o755, cp.exe),
	}
	for _, n := range csiControllerContainers[1:] {
		b, err := os.ReadFile(filepath.Join(root, "_output", "bin", n))
		if err != nil {
			t.Fatalf("%s is built by hack/build-csi-sidecars.sh (make csi-sidecars): %v", n, err)
		}
		files = append(files, testimage.Reg("bin/"+n, 0o755, b))
	}
	img, err := testimage.Spec{Ref: csiControllerRef, Files: files, Entrypoint: []string{"/bin/csihostpath"}}.Archive()
	if err != nil {
		t.Fatal(err)
	}
	// About 190 MB (external-attacher alone is 72): more than the
	// runtime's 10 s call timeout allows on a loaded machine, so through a
	// client of the same containerd namespace with a longer one.
	big, err := runtime.New(runtime.Options{Address: a.env.ContainerdAddress, Namespace: rt.Namespace(), CallTimeout: 2 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	defer big.Close()
	imported := time.Now()
	if _, err := big.ImportImage(ctx, bytes.NewReader(img)); err != nil {
		t.Fatal(err)
	}
	t.Logf("controller image (%d MB) imported in %.1fs", len(img)>>20, time.Since(imported).Seconds())
	tmpl, err := os.ReadFile(filepath.Join(root, "hack", "csi-sidecars", "controller.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	u, err := url.Parse(a.env.APIServerURL)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256([]byte(a.node))
	ns := fmt.Sprintf("csi-%x", sum[:6])
	manifests := "apiVersion: v1\nkind: Namespace\nmetadata: {name: " + ns + "}\n---\n" + strings.NewReplacer(
		"${NAMESPACE}", ns, "${NAME}", ns, "${DRIVER}", cp.driver, "${NODE}", a.node, "${DATADIR}", cp.data,
		"${IMAGE}", csiControllerRef, "${APIHOST}", u.Hostname(), "${APIPORT}", u.Port(), "${ATTACH}", fmt.Sprint(cp.attach),
	).Replace(string(tmpl))
	if replicas != 1 {
		if !strings.Contains(manifests, "\n  replicas: 1\n") {
			t.Fatalf("hack/csi-sidecars/controller.yaml has no Deployment of replicas: 1 to scale")
		}
		manifests = strings.Replace(manifests, "\n  replicas: 1\n", fmt.Sprintf("\n  replicas: %d\n", replicas), 1)
	}
	c := csiController{namespace: ns, env: a.env}
	// Before the agent's cleanup deletes the node's pods (the Deployment
	// would make another): cleanups run last first.
	t.Cleanup(func() {
		if t.Failed() {
			for _, n := range csiControllerContainers {
				t.Logf("controller's %s log:\n%s", n, c.log(t, n))
			}
		}
		kubectlStdin(t, a.env, manifests, "delete", "--ignore-not-found", "--wait=false", "--grace-period=1", "-f", "-")
		// The agent tears the pod down (its token's mount) before the
		// plugin's cleanup looks for leftovers under rootDir.
		if err := wait.PollUntilContextTimeout(context.Background(), 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
			l, err := a.env.Admin.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
			return err == nil && len(l.Items) == 0, nil
		}); err != nil {
			t.Errorf("the CSI controller's pod is still there 30s after its deletion")
		}
	})
	kubectl(t, a.env, manifests, "apply", "-f", "-")
	if replicas == 1 {
		c.waitRunning(t, a, time.Now(), "deployed")
	}
	return c
}

// waitRunning waits (90 s at most) for the controller's pod to run and
// notes it.
func (c *csiController) waitRunning(t *testing.T, a *agent, since time.Time, what string) {
	t.Helper()
	p := waitNamespacedPod(t, a.env, c.namespace, "app.kubernetes.io/name=csi-controller", 90*time.Second, "Running on "+a.node, func(p *corev1.Pod) bool {
		return p.Spec.NodeName == a.node && p.DeletionTimestamp == nil && running(p)
	})
	t.Logf("CSI controller %s/%s Running %.1fs after it was %s", c.namespace, p.Name, time.Since(since).Seconds(), what)
	c.pod = p.UID
}

// scaleUp scales the controller's Deployment (deployed with no replica)
// to one and waits for its pod to run.
func (c *csiController) scaleUp(t *testing.T, a *agent) {
	t.Helper()
	if _, err := a.env.Admin.AppsV1().Deployments(c.namespace).Patch(context.Background(), "csi-controller", types.MergePatchType, []byte(`{"spec":{"replicas":1}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	c.waitRunning(t, a, time.Now(), "scaled up")
}

// expandClaim resizes claim (bound to pvName, used by pod) from 1Mi to
// 2Mi: the claim's request is raised; kube-controller-manager's expand
// controller hands it to external-resizer, which expands the volume in the
// driver's controller and leaves the PV's capacity 2Mi and the claim
// NodeResizePending (allocatedResources 2Mi, FileSystemResizePending)
// (60 s at most). Then it changes the pod so that the agent syncs it, and
// waits (30 s at most) for the claim's status as kubelet leaves it:
// capacity 2Mi, no storage entry in allocatedResourceStatuses, no resize
// condition.
func expandClaim(t *testing.T, a *agent, claim, pvName, pod string) {
	t.Helper()
	ctx := context.Background()
	admin := a.env.Admin
	two := resource.MustParse("2Mi")
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		pvc, err := admin.CoreV1().PersistentVolumeClaims("default").Get(ctx, claim, metav1.GetOptions{})
		if err != nil {
			return err
		}
		pvc.Spec.Resources.Requests[corev1.ResourceStorage] = two
		_, err = admin.CoreV1().PersistentVolumeClaims("default").Update(ctx, pvc, metav1.UpdateOptions{})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	pvc, pv := &corev1.PersistentVolumeClaim{}, &corev1.PersistentVolume{}
	if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 60*time.Second, true, func(ctx context.Context) (bool, error) {
		gotClaim, err := admin.CoreV1().PersistentVolumeClaims("default").Get(ctx, claim, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		gotPV, err := admin.CoreV1().PersistentVolumes().Get(ctx, pvName, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		pvc, pv = gotClaim, gotPV
		c, al := pv.Spec.Capacity[corev1.ResourceStorage], pvc.Status.AllocatedResources[corev1.ResourceStorage]
		return c.Cmp(two) == 0 && al.Cmp(two) == 0 &&
			pvc.Status.AllocatedResourceStatuses[corev1.ResourceStorage] == corev1.PersistentVolumeClaimNodeResizePending, nil
	}); err != nil {
		t.Fatalf("external-resizer did not leave the claim NodeResizePending with a 2Mi PV within 60s: claim %+v, PV capacity %v", pvc.Status, pv.Spec.Capacity)
	}
	// Its Event, by its name and the driver's (events are recorded
	// asynchronously: waited for, 20 s at most).
	resizer := "external-resizer " + pv.Spec.CSI.Driver
	if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 20*time.Second, true, func(ctx context.Context) (bool, error) {
		evs, err := admin.CoreV1().Events("default").List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + claim})
		if err != nil {
			return false, nil
		}
		for _, e := range evs.Items {
			if e.Reason == "FileSystemResizeRequired" && e.Source.Component == resizer {
				return true, nil
			}
		}
		return false, nil
	}); err != nil {
		t.Errorf("no FileSystemResizeRequired Event from %q on claim %s", resizer, claim)
	}
	if _, err := admin.CoreV1().Pods("default").Patch(ctx, pod, types.MergePatchType, []byte(`{"metadata":{"annotations":{"e2e/resized":"2Mi"}}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	var last *corev1.PersistentVolumeClaim
	if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		var err error
		last, err = admin.CoreV1().PersistentVolumeClaims("default").Get(ctx, claim, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		c := last.Status.Capacity[corev1.ResourceStorage]
		return c.Cmp(two) == 0, nil
	}); err != nil {
		t.Fatalf("the claim's capacity is not 2Mi after the node's expansion: %+v", last.Status)
	}
	if len(last.Status.AllocatedResourceStatuses) != 0 || len(last.Status.Conditions) != 0 {
		t.Errorf("claim status after the expansion %+v", last.Status)
	}
	a.waitEvent(ctx, "default", "involvedObject.name="+claim, "FileSystemResizeSuccessful", func(e corev1.Event) bool {
		return e.Reason == "FileSystemResizeSuccessful" && strings.Contains(e.Message, `MountVolume.NodeExpandVolume succeeded for volume "`+pvName+`"`)
	})
}
