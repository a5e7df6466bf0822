package e2e

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/nodeagent/nodeagent/internal/testing/csihostpath"
	"github.com/nodeagent/nodeagent/internal/testing/testenv"
	"github.com/nodeagent/nodeagent/internal/testing/testimage"
	"github.com/nodeagent/nodeagent/runtime"
)

// csiImageRef is the image of internal/testing/csihostpath's command.
const csiImageRef = "docker.io/nodeagent/csihostpath:test"

// The CSI node side against a driver deployed as an operator deploys the
// host-path driver: one privileged pod on the node with the driver
// (Bidirectional mount of the agent's rootDir, where it mounts) and its
// registrar (a socket in <rootDir>/plugins_registry). The agent registers
// it (CSINode entry, topology label); a pre-made PV of the driver, bound
// to a claim, is staged once at kubelet's global path and published at
// kubelet's pod path; data a pod writes is read by a later pod through a
// read-only claim; an inline ephemeral volume lives and goes with its
// pod; a claim that is not there keeps its pod in ContainerCreating with
// FailedMount while the others run; after the pods no mount and no
// staging directory stays; the plugin's removal removes its CSINode entry.
//
// The driver and registrar are internal/testing/csihostpath, stand-ins
// for kubernetes-csi's csi-driver-host-path and node-driver-registrar
// (their Go modules are not served by the module proxy here).
func TestCSIHostPathDriver(t *testing.T) {
	t.Parallel()
	a, rt := readyPodAgent(t, "")
	ctx := context.Background()
	admin := a.env.Admin
	cp := deployCSIPlugin(t, a, rt, false)
	root, data, driver, plugin, pp := cp.root, cp.data, cp.driver, cp.name, cp.pod
	var err error

	// Registered: the CSINode entry and the topology label.
	var csiNode *storagev1.CSINode
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		csiNode, err = admin.StorageV1().CSINodes().Get(ctx, a.node, metav1.GetOptions{})
		return err == nil && slices.ContainsFunc(csiNode.Spec.Drivers, func(d storagev1.CSINodeDriver) bool { return d.Name == driver }), nil
	})
	if err != nil {
		t.Fatalf("the driver is not in the CSINode within 30s (%+v); driver log:\n%s\nregistrar log:\n%s", csiNode, a.logOf(pp, "driver", 0), a.logOf(pp, "registrar", 0))
	}
	for _, d := range csiNode.Spec.Drivers {
		if d.Name == driver && (d.NodeID != a.node || !slices.Equal(d.TopologyKeys, []string{"topology.hostpath.csi/node"}) || d.Allocatable == nil || *d.Allocatable.Count != 100) {
			t.Errorf("CSINode entry %+v", d)
		}
	}
	if len(csiNode.OwnerReferences) != 1 || csiNode.OwnerReferences[0].Kind != "Node" {
		t.Errorf("CSINode owners %+v, want the Node", csiNode.OwnerReferences)
	}
	node, err := admin.CoreV1().Nodes().Get(ctx, a.node, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if node.Labels["topology.hostpath.csi/node"] != a.node {
		t.Errorf("Node labels %v, want the driver's topology", node.Labels)
	}

	// A PV of the driver, bound to a claim (no provisioner in this test).
	claim, pvName, handle := "data-"+a.node, "pv-"+a.node, "vol-"+a.node
	csiClaim(t, a, driver, claim, pvName, handle)

	// A pod whose claim does not exist waits in ContainerCreating with
	// FailedMount; the others are not held up by it.
	waiter := a.node + "-waiter"
	kubectl(t, a.env, podYAML(waiter, a.node, fmt.Sprintf(`  volumes:
  - name: data
    persistentVolumeClaim: {claimName: missing-%[2]s}
  containers:
  - name: c
    image: %[1]s
    command: ["sleep", "3600"]
`, testimage.Ref, a.node)), "apply", "-f", "-")

	stagingDir := filepath.Join(root, "plugins/kubernetes.io/csi", driver, fmt.Sprintf("%x", sha256.Sum256([]byte(handle))))
	writer := a.node + "-writer"
	kubectl(t, a.env, podYAML(writer, a.node, fmt.Sprintf(`  terminationGracePeriodSeconds: 1
  securityContext: {fsGroup: 2345}
  volumes:
  - name: data
    persistentVolumeClaim: {claimName: %[2]s}
  containers:
  - name: c
    image: %[1]s
    command: ["sh", "-c", "echo hello-from-writer > /data/file && echo written; ls -ln /data; sleep 3600"]
    volumeMounts: [{name: data, mountPath: /data}]
`, testimage.Ref, claim)), "apply", "-f", "-")
	wp := a.waitPod(ctx, writer, 60*time.Second, "Running", running)
	a.waitLog(wp, "c", 0, "written")
	if log := a.logOf(wp, "c", 0); !strings.Contains(log, " 2345 ") {
		t.Errorf("the file is not in the fsGroup (fsGroupPolicy File):\n%s", log)
	}
	target := filepath.Join(root, "pods", string(wp.UID), "volumes/kubernetes.io~csi", pvName, "mount")
	waitMount(t, target, true)
	waitMount(t, filepath.Join(stagingDir, "globalmount"), true)
	if b, err := os.ReadFile(filepath.Join(data, "volumes", handle, "file")); err != nil || string(b) != "hello-from-writer\n" {
		t.Errorf("the driver's volume holds %q (%v)", b, err)
	}

	// The agent is SIGKILLed and restarts: the running pod keeps its
	// volume (nothing is unmounted or published again), and the driver,
	// whose registrar socket is still there, registers again.
	if code, _ := a.stop(syscall.SIGKILL); code == 0 {
		t.Errorf("agent exit code %d after SIGKILL", code)
	}
	if m := waitMount(t, target, true); m.MountPoint != target {
		t.Errorf("mount %+v", m)
	}
	a.start()
	a.waitReady(ctx, 30*time.Second)
	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		return strings.Contains(a.out.String(), "registered CSI driver"), nil
	}); err != nil {
		t.Fatalf("the driver did not register again after the agent's restart")
	}
	time.Sleep(2 * time.Second) // a few syncs of the writer
	if p := a.waitPod(ctx, writer, 5*time.Second, "still Running", running); p.Status.ContainerStatuses[0].RestartCount != 0 {
		t.Errorf("the writer restarted over the agent's restart: %+v", p.Status.ContainerStatuses[0])
	}
	waitMount(t, target, true)
	if b, err := os.ReadFile(filepath.Join(target, "file")); err != nil || string(b) != "hello-from-writer\n" {
		t.Errorf("after the agent's restart the volume holds %q (%v)", b, err)
	}
	if n := strings.Count(a.logOf(pp, "driver", 0), "published "+handle); n != 1 {
		t.Errorf("the volume was published %d times, want once:\n%s", n, a.logOf(pp, "driver", 0))
	}

	a.waitEvent(ctx, "default", "involvedObject.name="+waiter, "FailedMount", func(e corev1.Event) bool {
		return e.Reason == "FailedMount" && strings.Contains(e.Message, fmt.Sprintf(`MountVolume.SetUp failed for volume "data" : error processing PVC default/missing-%s: failed to fetch PVC from API server`, a.node))
	})
	if p, err := admin.CoreV1().Pods("default").Get(ctx, waiter, metav1.GetOptions{}); err != nil || p.Status.Phase != corev1.PodPending ||
		len(p.Status.ContainerStatuses) != 1 || p.Status.ContainerStatuses[0].State.Waiting == nil || p.Status.ContainerStatuses[0].State.Waiting.Reason != "ContainerCreating" {
		t.Errorf("the waiting pod: %v %+v, want Pending in ContainerCreating", err, p.Status)
	}

	// The writer goes: unpublished and (its last user) unstaged.
	if err := admin.CoreV1().Pods("default").Delete(ctx, writer, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	podsGone(t, a, writer)
	waitMount(t, target, false)
	waitGone(t, stagingDir) // unstaged after the unpublish

	// A reader through a read-only claim, with an inline volume and a
	// generic ephemeral volume (its claim <pod>-eph made by the ephemeral
	// volume controller, bound by the PV controller to a PV made for it).
	reader := a.node + "-reader"
	csiPV(t, a, driver, reader+"-eph", "pv-eph-"+a.node, "vol-eph-"+a.node)
	kubectl(t, a.env, podYAML(reader, a.node, fmt.Sprintf(`  terminationGracePeriodSeconds: 1
  volumes:
  - name: data
    persistentVolumeClaim: {claimName: %[2]s, readOnly: true}
  - name: scratch
    csi: {driver: %[3]s}
  - name: eph
    ephemeral:
      volumeClaimTemplate:
        spec: {accessModes: [ReadWriteOnce], storageClassName: "", resources: {requests: {storage: 1Mi}}}
  containers:
  - name: c
    image: %[1]s
    command: ["sh", "-c", "echo read=$(cat /data/file); touch /data/x || echo readonly-refused; echo s > /scratch/s && echo scratch-ok; echo e > /eph/e && echo eph-ok; sleep 3600"]
    volumeMounts: [{name: data, mountPath: /data}, {name: scratch, mountPath: /scratch}, {name: eph, mountPath: /eph}]
`, testimage.Ref, claim, driver)), "apply", "-f", "-")
	rp := a.waitPod(ctx, reader, 90*time.Second, "Running", running)
	a.waitLog(rp, "c", 0, "read=hello-from-writer", "readonly-refused", "scratch-ok", "eph-ok")
	if b, err := os.ReadFile(filepath.Join(data, "volumes", "vol-eph-"+a.node, "e")); err != nil || string(b) != "e\n" {
		t.Errorf("the generic ephemeral volume holds %q (%v)", b, err)
	}
	inline := filepath.Join(root, "pods", string(rp.UID), "volumes/kubernetes.io~csi/scratch/mount")
	waitMount(t, inline, true)

	for _, name := range []string{reader, waiter} {
		if err := admin.CoreV1().Pods("default").Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	podsGone(t, a, reader, waiter)
	waitGone(t, filepath.Join(root, "pods", string(rp.UID)))
	if left, err := testenv.MountsUnder(filepath.Join(root, "pods"), filepath.Join(root, "plugins", "kubernetes.io")); err != nil || len(left) > 0 {
		t.Errorf("mounts left after the pods: %v (%v)", left, err)
	}
	if _, err := os.Stat(stagingDir); !os.IsNotExist(err) {
		t.Errorf("staging directory %s stays: %v", stagingDir, err)
	}
	if es, _ := os.ReadDir(filepath.Join(data, "ephemeral")); len(es) > 0 {
		t.Errorf("the inline volume's data stays: %v", es)
	}

	// The plugin goes: its registration socket goes, so does its entry.
	if err := admin.CoreV1().Pods("default").Delete(ctx, plugin, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		c, err := admin.StorageV1().CSINodes().Get(ctx, a.node, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		return err == nil && !slices.ContainsFunc(c.Spec.Drivers, func(d storagev1.CSINodeDriver) bool { return d.Name == driver }), nil
	})
	if err != nil {
		t.Errorf("the driver's CSINode entry stays after the plugin is gone: %v", err)
	}
	podsGone(t, a, plugin)
}

// waitGone waits (20s at most) until path does not exist.
func waitGone(t *testing.T, path string) {
	t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, 20*time.Second, true, func(context.Context) (bool, error) {
		_, err := os.Lstat(path)
		return os.IsNotExist(err), nil
	})
	if err != nil {
		t.Errorf("%s still there after 20s", path)
	}
}

// csiPlugin is internal/testing/csihostpath deployed on an agent's node.
type csiPlugin struct {
	root   string      // the agent's rootDir, symlinks resolved
	data   string      // the driver's data directory on the host
	driver string      // the driver's name (and its CSIDriver's)
	name   string      // the plugin pod
	pod    *corev1.Pod // the plugin pod, Running
	exe    []byte      // the csihostpath program
	attach bool        // the driver attaches (CSIDriver attachRequired, -enable-attach)
}

// deployCSIPlugin builds internal/testing/csihostpath's image, creates its
// CSIDriver (one name per test node: CSIDrivers are cluster-wide; attach:
// attachRequired, and the driver runs with -enable-attach: its node side
// then requires the publish context of its controller's attach) and runs
// the plugin pod as the host-path driver's DaemonSet lays it out: the
// driver privileged with a Bidirectional mount of the agent's rootDir, the
// registrar with a socket in plugins_registry. driverArgs are more flags
// of the driver (its data directory is /csi-data-dir in its container).
func deployCSIPlugin(t *testing.T, a *agent, rt *runtime.Runtime, attach bool, driverArgs ...string) csiPlugin {
	t.Helper()
	// One driver name per test node: CSIDrivers are cluster-wide.
	sum := sha256.Sum256([]byte(a.node))
	return deployNamedCSIPlugin(t, a, rt, fmt.Sprintf("hp-%x.csi.test", sum[:6]), attach, driverArgs...)
}

// deployNamedCSIPlugin is deployCSIPlugin with the driver's name (a
// cluster-wide name: one test at a time may use it).
func deployNamedCSIPlugin(t *testing.T, a *agent, rt *runtime.Runtime, driver string, attach bool, driverArgs ...string) csiPlugin {
	t.Helper()
	ctx := context.Background()
	admin := a.env.Admin
	root, err := filepath.EvalSymlinks(a.rootDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if left, err := testenv.RemoveHostLeftovers(filepath.Join(root, "plugins"), filepath.Join(root, "pods")); err != nil || len(left) > 0 {
			t.Logf("cleanup unmounted %v (%v)", left, err)
		}
	})

	// The driver's image.
	bin := filepath.Join(t.TempDir(), "csihostpath")
	build := exec.Command("go", "build", "-o", bin, "../internal/testing/csihostpath/cmd/csihostpath")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building the test CSI driver: %v\n%s", err, out)
	}
	exe, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	img, err := testimage.Spec{Ref: csiImageRef, Files: []testimage.File{
		testimage.Dir("bin", 0o755), testimage.Dir("tmp", 0o1777), testimage.Dir("dev", 0o755), testimage.Dir("proc", 0o755), testimage.Dir("sys", 0o755),
		testimage.Reg("bin/csihostpath", 0o755, exe),
	}, Entrypoint: []string{"/bin/csihostpath"}}.Archive()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rt.ImportImage(ctx, bytes.NewReader(img)); err != nil {
		t.Fatal(err)
	}

	policy := storagev1.FileFSGroupPolicy
	yes := true
	if _, err := admin.StorageV1().CSIDrivers().Create(ctx, &storagev1.CSIDriver{
		ObjectMeta: metav1.ObjectMeta{Name: driver},
		Spec: storagev1.CSIDriverSpec{AttachRequired: &attach, PodInfoOnMount: &yes, FSGroupPolicy: &policy,
			VolumeLifecycleModes: []storagev1.VolumeLifecycleMode{storagev1.VolumeLifecyclePersistent, storagev1.VolumeLifecycleEphemeral}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = admin.StorageV1().CSIDrivers().Delete(context.Background(), driver, metav1.DeleteOptions{})
	})

	// The plugin pod, as the host-path driver's DaemonSet lays it out.
	data := filepath.Join(a.dir, "csi-data")
	endpoint := filepath.Join(root, "plugins", driver, "csi.sock")
	plugin := a.node + "-csi-plugin"
	// A driver that attaches also reads the Node at each
	// NodeStageVolume and NodePublishVolume (-check-in-use): it logs
	// whether status.volumesInUse listed the volume then. It reads with
	// its own service account (allowed to get nodes) through the API
	// server's address (hostNetwork; no kube-proxy here).
	var inUsePod, inUseContainer string
	if attach {
		inUsePod, inUseContainer = csiNodeReader(t, a, plugin)
	}
	kubectl(t, a.env, podYAML(plugin, a.node, fmt.Sprintf(`  terminationGracePeriodSeconds: 5
  volumes:
  - name: root
    hostPath: {path: %[2]s, type: Directory}
  - name: data
    hostPath: {path: %[3]s, type: DirectoryOrCreate}
%[8]s  containers:
  - name: driver
    image: %[1]s
    args: ["-mode=driver", "-drivername=%[4]s", "-endpoint=%[5]s", "-nodeid=%[6]s", "-maxvolumespernode=100", "-datadir=/csi-data-dir", "-enable-attach=%[7]v", "-check-in-use=%[7]v"%[10]s]
    securityContext: {privileged: true}
    volumeMounts:
    - {name: root, mountPath: %[2]s, mountPropagation: Bidirectional}
    - {name: data, mountPath: /csi-data-dir}
%[9]s  - name: registrar
    image: %[1]s
    args: ["-mode=registrar", "-drivername=%[4]s", "-registration-socket=%[2]s/plugins_registry/%[4]s-reg.sock", "-kubelet-registration-path=%[5]s"]
    volumeMounts:
    - {name: root, mountPath: %[2]s}
`, csiImageRef, root, data, driver, endpoint, a.node, attach, inUsePod, inUseContainer, extraArgs(driverArgs))), "apply", "-f", "-")
	pp := a.waitPod(ctx, plugin, 60*time.Second, "Running", running)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("driver log:\n%s\nregistrar log:\n%s", a.logOf(pp, "driver", 0), a.logOf(pp, "registrar", 0))
		}
	})

	return csiPlugin{root: root, data: data, driver: driver, name: plugin, pod: pp, exe: exe, attach: attach}
}

// csiNodeReader makes the service account name (in default) allowed to
// get Nodes, deleted at the end, and returns the lines of a pod spec
// (after its volumes) and of a container (after its volumeMounts) that run
// the container as it, with its token and the cluster's CA where
// in-cluster clients look, on the host's network with the API server's
// address in KUBERNETES_SERVICE_HOST/PORT (no kube-proxy here).
func csiNodeReader(t *testing.T, a *agent, name string) (podLines, containerLines string) {
	t.Helper()
	ctx := context.Background()
	admin := a.env.Admin
	if _, err := admin.CoreV1().ServiceAccounts("default").Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"nodes"}, Verbs: []string{"get"}}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: name},
		Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Namespace: "default", Name: name}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx := context.Background()
		_ = admin.RbacV1().ClusterRoleBindings().Delete(ctx, name, metav1.DeleteOptions{})
		_ = admin.RbacV1().ClusterRoles().Delete(ctx, name, metav1.DeleteOptions{})
		_ = admin.CoreV1().ServiceAccounts("default").Delete(ctx, name, metav1.DeleteOptions{})
	})
	u, err := url.Parse(a.env.APIServerURL)
	if err != nil {
		t.Fatal(err)
	}
	podLines = fmt.Sprintf(`  - name: sa
    projected:
      sources:
      - serviceAccountToken: {path: token}
      - configMap: {name: kube-root-ca.crt, items: [{key: ca.crt, path: ca.crt}]}
  serviceAccountName: %s
  hostNetwork: true
`, name)
	containerLines = fmt.Sprintf(`    - {name: sa, mountPath: /var/run/secrets/kubernetes.io/serviceaccount, readOnly: true}
    env:
    - {name: KUBERNETES_SERVICE_HOST, value: "%s"}
    - {name: KUBERNETES_SERVICE_PORT, value: "%s"}
`, u.Hostname(), u.Port())
	return podLines, containerLines
}

// extraArgs is args as more items of a YAML flow sequence.
func extraArgs(args []string) string {
	var b strings.Builder
	for _, a := range args {
		fmt.Fprintf(&b, ", %q", a)
	}
	return b.String()
}

// csiClaim makes a PV of driver with volume handle handle, pre-bound to
// the claim default/claim it makes too (no provisioner in these tests),
// and deletes both at the end.
func csiClaim(t *testing.T, a *agent, driver, claim, pvName, handle string) {
	t.Helper()
	csiClaimMode(t, a, driver, claim, pvName, handle, corev1.PersistentVolumeFilesystem, "1Mi")
}

// csiClaimMode is csiClaim with the PV's and the claim's volume mode and size.
func csiClaimMode(t *testing.T, a *agent, driver, claim, pvName, handle string, mode corev1.PersistentVolumeMode, size string) {
	t.Helper()
	ctx := context.Background()
	admin := a.env.Admin
	csiPVMode(t, a, driver, claim, pvName, handle, mode, size)
	empty := ""
	if _, err := admin.CoreV1().PersistentVolumeClaims("default").Create(ctx, &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: claim},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}, VolumeName: pvName, StorageClassName: &empty, VolumeMode: &mode,
			Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(size)}},
		},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = admin.CoreV1().PersistentVolumeClaims("default").Delete(context.Background(), claim, metav1.DeleteOptions{})
	})
}

// csiPV makes a PV of driver, pre-bound to the claim default/claim (which
// may come later: the PV controller binds it then), deleted at the end.
func csiPV(t *testing.T, a *agent, driver, claim, pvName, handle string) {
	t.Helper()
	csiPVMode(t, a, driver, claim, pvName, handle, corev1.PersistentVolumeFilesystem, "1Mi")
}

// csiPVMode is csiPV with the PV's volume mode and capacity.
func csiPVMode(t *testing.T, a *agent, driver, claim, pvName, handle string, mode corev1.PersistentVolumeMode, size string) {
	t.Helper()
	admin := a.env.Admin
	if _, err := admin.CoreV1().PersistentVolumes().Create(context.Background(), &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: pvName},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:    corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(size)},
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}, VolumeMode: &mode,
			ClaimRef:                      &corev1.ObjectReference{Namespace: "default", Name: claim},
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
			PersistentVolumeSource:        corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{Driver: driver, VolumeHandle: handle}},
		},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = admin.CoreV1().PersistentVolumes().Delete(context.Background(), pvName, metav1.DeleteOptions{})
	})
}

// A driver that attaches, deployed as an operator deploys one: its
// CSIDriver says attachRequired; its node plugin as in TestCSIHostPathDriver
// but attaching (-enable-attach: it stages and publishes only a volume its
// controller attached to this node, named by the attachment ID in the
// publish context); its controller Deployment holds kubernetes-csi's real
// external-attacher (deployCSIController, hack/csi-sidecars). The agent's
// Node carries kubelet's controller-managed attach-detach annotation, so
// kube-controller-manager's attach/detach controller makes the
// VolumeAttachment for the pod. While the controller has no replica,
// nothing attaches: the pod waits in ContainerCreating (FailedMount,
// MountVolume.WaitForAttach) with the volume in the Node's
// status.volumesInUse. Scaled to one, external-attacher calls the driver's
// ControllerPublishVolume, puts its finalizer external-attacher/<driver>
// on the VolumeAttachment and the PV and writes the publish context into
// the VolumeAttachment's status; the agent hands it to NodeStageVolume and
// NodePublishVolume, and the pod runs. After the pod is gone the volume
// leaves volumesInUse before the detach (the VolumeAttachment's deletion;
// the driver refuses ControllerUnpublishVolume while the volume is staged
// on the node, and no refusal is logged); external-attacher detaches (the
// driver's attachment record goes) and removes its finalizer, so the
// VolumeAttachment goes; the PV, deleted, goes too (external-attacher lets
// go of it).
func TestCSIAttachRequired(t *testing.T) {
	t.Parallel()
	// With kubelet's CSIVolumeHealth gate (alpha, off by default): the
	// driver's volume condition in the volume stats.
	a, rt := readyPodAgent(t, "featureGates:\n  CSIVolumeHealth: true\n")
	ctx := context.Background()
	admin := a.env.Admin
	cp := deployCSIPlugin(t, a, rt, true)
	ctrl := deployCSIController(t, a, rt, cp, 0)
	// external-attacher's finalizer: "external-attacher/" and the driver's
	// name with every character but [a-zA-Z0-9-] made "-" (the test's
	// driver names have dots).
	finalizer := "external-attacher/" + strings.ReplaceAll(cp.driver, ".", "-")
	node, err := admin.CoreV1().Nodes().Get(ctx, a.node, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if node.Annotations["volumes.kubernetes.io/controller-managed-attach-detach"] != "true" {
		t.Errorf("Node annotations %v, want kubelet's controller-managed attach-detach", node.Annotations)
	}
	// The volume, made beforehand as an administrator makes a disk (the
	// driver's ControllerPublishVolume attaches only a volume that is
	// there), and its PV bound to a claim.
	claim, pvName, handle := "att-"+a.node, "pv-att-"+a.node, "vol-att-"+a.node
	if err := os.MkdirAll(filepath.Join(cp.data, "volumes", handle), 0o777); err != nil {
		t.Fatal(err)
	}
	csiClaim(t, a, cp.driver, claim, pvName, handle)
	vaName := fmt.Sprintf("csi-%x", sha256.Sum256([]byte(handle+cp.driver+a.node)))
	name := a.node + "-attached"
	// On a failure, before the controller goes (cleanups run last first):
	// the pod, then the VolumeAttachment and the PV, which need
	// external-attacher to let go of them.
	t.Cleanup(func() {
		ctx := context.Background()
		_ = admin.CoreV1().Pods("default").Delete(ctx, name, metav1.DeleteOptions{})
		_ = admin.CoreV1().PersistentVolumeClaims("default").Delete(ctx, claim, metav1.DeleteOptions{})
		_ = admin.CoreV1().PersistentVolumes().Delete(ctx, pvName, metav1.DeleteOptions{})
		if err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 60*time.Second, true, func(ctx context.Context) (bool, error) {
			_, err1 := admin.StorageV1().VolumeAttachments().Get(ctx, vaName, metav1.GetOptions{})
			_, err2 := admin.CoreV1().PersistentVolumes().Get(ctx, pvName, metav1.GetOptions{})
			return apierrors.IsNotFound(err1) && apierrors.IsNotFound(err2), nil
		}); err != nil {
			// A VolumeAttachment never attached can stay (seen with the
			// attacher left out): removed here, so that the shared
			// cluster does not keep it.
			t.Errorf("the VolumeAttachment %s or the PV %s stays 60s after the test; deleting the VolumeAttachment", vaName, pvName)
			_ = admin.StorageV1().VolumeAttachments().Delete(ctx, vaName, metav1.DeleteOptions{})
		}
	})
	// Registered before the pod comes (the CSINode entry is what the
	// controller and scheduler read).
	if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		c, err := admin.StorageV1().CSINodes().Get(ctx, a.node, metav1.GetOptions{})
		return err == nil && slices.ContainsFunc(c.Spec.Drivers, func(d storagev1.CSINodeDriver) bool { return d.Name == cp.driver }), nil
	}); err != nil {
		t.Fatalf("the driver did not register: %v", err)
	}

	kubectl(t, a.env, podYAML(name, a.node, fmt.Sprintf(`  terminationGracePeriodSeconds: 1
  volumes:
  - name: data
    persistentVolumeClaim: {claimName: %[2]s}
  containers:
  - name: c
    image: %[1]s
    command: ["sh", "-c", "echo attached > /data/f && echo ok; sleep 3600"]
    volumeMounts: [{name: data, mountPath: /data}]
`, testimage.Ref, claim)), "apply", "-f", "-")

	// Nothing attaches while the controller has no replica.
	var va *storagev1.VolumeAttachment
	if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 60*time.Second, true, func(ctx context.Context) (bool, error) {
		va, err = admin.StorageV1().VolumeAttachments().Get(ctx, vaName, metav1.GetOptions{})
		return err == nil, nil
	}); err != nil {
		t.Fatalf("the attach/detach controller made no VolumeAttachment %s: %v", vaName, err)
	}
	if va.Spec.Attacher != cp.driver || va.Spec.NodeName != a.node || va.Spec.Source.PersistentVolumeName == nil || *va.Spec.Source.PersistentVolumeName != pvName {
		t.Errorf("VolumeAttachment spec %+v", va.Spec)
	}
	unique := corev1.UniqueVolumeName("kubernetes.io/csi/" + cp.driver + "^" + handle)
	a.waitEvent(ctx, "default", "involvedObject.name="+name, "FailedMount WaitForAttach", func(e corev1.Event) bool {
		return e.Reason == "FailedMount" && strings.Contains(e.Message, `MountVolume.WaitForAttach failed for volume "`+pvName+`" : volume `+handle+` is not attached for volume attachment `+vaName)
	})
	waitNodeVolumesInUse(t, a, unique, true)
	if p, err := admin.CoreV1().Pods("default").Get(ctx, name, metav1.GetOptions{}); err != nil || p.Status.Phase != corev1.PodPending {
		t.Fatalf("the pod runs before its volume is attached: %v %+v", err, p.Status)
	}
	if va, err = admin.StorageV1().VolumeAttachments().Get(ctx, vaName, metav1.GetOptions{}); err != nil || va.Status.Attached || len(va.Finalizers) > 0 {
		t.Fatalf("with no attacher running the VolumeAttachment is %v %+v", err, va)
	}

	// The controller comes: external-attacher attaches, the pod runs.
	scaled := time.Now()
	ctrl.scaleUp(t, a)
	p := a.waitPod(ctx, name, 90*time.Second, "Running", running)
	t.Logf("the pod Running %.1fs after the controller was scaled up (%.1fs after it was made)", time.Since(scaled).Seconds(), time.Since(p.CreationTimestamp.Time).Seconds())
	a.waitLog(p, "c", 0, "ok")
	// The volume is healthy (the driver's condition: its publish target
	// is mounted).
	checkCSIVolumeHealth(t, a, p, claim, false)
	if va, err = admin.StorageV1().VolumeAttachments().Get(ctx, vaName, metav1.GetOptions{}); err != nil {
		t.Fatal(err)
	}
	aid := va.Status.AttachmentMetadata[csihostpath.AttachmentKey]
	if !va.Status.Attached || aid == "" || !slices.Contains(va.Finalizers, finalizer) {
		t.Errorf("VolumeAttachment finalizers %v status %+v, want external-attacher's finalizer %s and the driver's publish context", va.Finalizers, va.Status, finalizer)
	}
	if pv, err := admin.CoreV1().PersistentVolumes().Get(ctx, pvName, metav1.GetOptions{}); err != nil || !slices.Contains(pv.Finalizers, finalizer) {
		t.Errorf("PV finalizers %v (%v), want external-attacher's %s", pv.Finalizers, err, finalizer)
	}
	record := filepath.Join(cp.data, "attachments", handle, a.node)
	if b, err := os.ReadFile(record); err != nil || string(b) != aid {
		t.Errorf("the driver's attachment record holds %q (%v), want the VolumeAttachment's %q", b, err, aid)
	}
	if log := ctrl.log(t, "hostpath"); !strings.Contains(log, fmt.Sprintf("attached volume %s to node %s (attachment %s", handle, a.node, aid)) {
		t.Errorf("the driver's controller did not attach the volume as attachment %s:\n%s", aid, log)
	}
	// The publish context reached the node side.
	pc := fmt.Sprintf("publish context map[%s:%s]", csihostpath.AttachmentKey, aid)
	if log := a.logOf(cp.pod, "driver", 0); !strings.Contains(log, "staged "+handle+" at ") || !strings.Contains(log, pc) ||
		strings.Count(log, pc) != 2 {
		t.Errorf("NodeStageVolume and NodePublishVolume were not given %q:\n%s", pc, log)
	}

	// Gone: unmounted, out of volumesInUse, then detached. Each poll reads
	// the VolumeAttachment, then the Node: one being deleted (or gone)
	// while the Node still lists the volume would be a detach before the
	// node let go of the volume.
	if err := admin.CoreV1().Pods("default").Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	deleted := time.Now()
	var unused, detaching time.Duration
	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 90*time.Second, true, func(ctx context.Context) (bool, error) {
		va, err := admin.StorageV1().VolumeAttachments().Get(ctx, vaName, metav1.GetOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			return false, nil
		}
		gone := apierrors.IsNotFound(err)
		n, err := admin.CoreV1().Nodes().Get(ctx, a.node, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		inUse := slices.Contains(n.Status.VolumesInUse, unique)
		if !inUse && unused == 0 {
			unused = time.Since(deleted)
		}
		if (gone || va.DeletionTimestamp != nil) && detaching == 0 {
			detaching = time.Since(deleted)
			if inUse {
				t.Errorf("the VolumeAttachment is deleted while the Node still has the volume in use: %v", n.Status.VolumesInUse)
			}
		}
		return gone, nil
	}); err != nil {
		t.Fatalf("the VolumeAttachment stays 90s after the pod's deletion (out of volumesInUse after %v): %v", unused, err)
	}
	t.Logf("after the pod's deletion: out of volumesInUse %.1fs, detaching %.1fs, VolumeAttachment gone %.1fs", unused.Seconds(), detaching.Seconds(), time.Since(deleted).Seconds())
	podsGone(t, a, name)
	if _, err := os.Stat(record); !os.IsNotExist(err) {
		t.Errorf("the driver's attachment record %s stays after the detach: %v", record, err)
	}
	if log := ctrl.log(t, "hostpath"); !strings.Contains(log, fmt.Sprintf("detached volume %s from node %s", handle, a.node)) || strings.Contains(log, "refused to detach") {
		t.Errorf("the driver's controller log, want one detach and no refusal:\n%s", log)
	}
	// (The controller's pod runs on the node too: its token stays mounted.)
	if left, err := testenv.MountsUnder(filepath.Join(cp.root, "pods", string(p.UID)), filepath.Join(cp.root, "plugins", "kubernetes.io")); err != nil || len(left) > 0 {
		t.Errorf("mounts left after the pod: %v (%v)", left, err)
	}

	// Again with the attacher running, so that the attachment is quick and
	// the node status is what the mount waits for: as under kubelet the
	// volume is in the Node's volumesInUse (a status write listed it)
	// before NodeStageVolume and NodePublishVolume — the driver reads the
	// Node at each call and logs what it found — and the agent writes
	// that status at once rather than at its next 10s period.
	name2 := a.node + "-attached-again"
	t.Cleanup(func() { _ = admin.CoreV1().Pods("default").Delete(context.Background(), name2, metav1.DeleteOptions{}) })
	kubectl(t, a.env, podYAML(name2, a.node, fmt.Sprintf(`  terminationGracePeriodSeconds: 1
  volumes:
  - name: data
    persistentVolumeClaim: {claimName: %[2]s}
  containers:
  - name: c
    image: %[1]s
    command: ["sh", "-c", "cat /data/f; sleep 3600"]
    volumeMounts: [{name: data, mountPath: /data}]
`, testimage.Ref, claim)), "apply", "-f", "-")
	created := time.Now()
	var inUseAfter time.Duration
	var p2 *corev1.Pod
	if err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 90*time.Second, true, func(ctx context.Context) (bool, error) {
		if inUseAfter == 0 {
			if n, err := admin.CoreV1().Nodes().Get(ctx, a.node, metav1.GetOptions{}); err == nil && slices.Contains(n.Status.VolumesInUse, unique) {
				inUseAfter = time.Since(created)
			}
		}
		p, err := admin.CoreV1().Pods("default").Get(ctx, name2, metav1.GetOptions{})
		if err == nil && running(p) {
			p2 = p
			return true, nil
		}
		return false, nil
	}); err != nil {
		t.Fatalf("the second pod is not Running 90s after it was made: %v", err)
	}
	t.Logf("second pod (attacher running): in the Node's volumesInUse %.2fs and Running %.2fs after it was made", inUseAfter.Seconds(), time.Since(created).Seconds())
	a.waitLog(p2, "c", 0, "attached")
	log := a.logOf(cp.pod, "driver", 0)
	for _, call := range []string{"NodeStageVolume", "NodePublishVolume"} {
		if want := call + " of " + handle + ": in the Node's volumesInUse"; strings.Count(log, want) < 2 {
			t.Errorf("the driver's log has %d times %q, want one per pod at least:\n%s", strings.Count(log, want), want, log)
		}
	}
	if strings.Contains(log, "NOT in the Node's volumesInUse") || strings.Contains(log, "cannot read the Node's volumesInUse") {
		t.Errorf("a stage or publish came before the Node listed the volume in use (or the driver could not tell):\n%s", log)
	}
	// The publish target unmounted behind the driver's back (the
	// container keeps its own mount): the driver's condition is abnormal
	// at the volume's first measurement, in /stats/summary, /metrics and
	// kubelet's VolumeConditionAbnormal Event on the pod.
	target := filepath.Join(cp.root, "pods", string(p2.UID), "volumes", "kubernetes.io~csi", pvName, "mount")
	if err := syscall.Unmount(target, 0); err != nil {
		t.Fatalf("unmounting the publish target %s: %v", target, err)
	}
	checkCSIVolumeHealth(t, a, p2, claim, true)
	a.waitEvent(ctx, "default", "involvedObject.name="+name2, "VolumeConditionAbnormal", func(e corev1.Event) bool {
		return e.Type == corev1.EventTypeWarning && e.Reason == "VolumeConditionAbnormal" && e.Message == "Volume data: volume path is not mounted"
	})
	if err := admin.CoreV1().Pods("default").Delete(ctx, name2, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 90*time.Second, true, func(ctx context.Context) (bool, error) {
		_, err := admin.StorageV1().VolumeAttachments().Get(ctx, vaName, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	}); err != nil {
		t.Fatalf("the VolumeAttachment stays 90s after the second pod's deletion: %v", err)
	}
	podsGone(t, a, name2)

	// The PV, its claim deleted, is deleted: external-attacher lets go of it.
	if err := admin.CoreV1().PersistentVolumeClaims("default").Delete(ctx, claim, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := admin.CoreV1().PersistentVolumes().Delete(ctx, pvName, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	var pv *corev1.PersistentVolume
	if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 60*time.Second, true, func(ctx context.Context) (bool, error) {
		pv, err = admin.CoreV1().PersistentVolumes().Get(ctx, pvName, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	}); err != nil {
		t.Errorf("the deleted PV stays: finalizers %v, phase %s", pv.Finalizers, pv.Status.Phase)
	}
}

// waitNodeVolumesInUse waits (30s at most: the status is computed every
// 10s) until the Node's status.volumesInUse has (want) or has not v.
func waitNodeVolumesInUse(t *testing.T, a *agent, v corev1.UniqueVolumeName, want bool) {
	t.Helper()
	var last []corev1.UniqueVolumeName
	if err := wait.PollUntilContextTimeout(context.Background(), 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		n, err := a.env.Admin.CoreV1().Nodes().Get(ctx, a.node, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		last = n.Status.VolumesInUse
		return slices.Contains(last, v) == want, nil
	}); err != nil {
		t.Fatalf("Node volumesInUse %v: want %s there = %v", last, v, want)
	}
}
