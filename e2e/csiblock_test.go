package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/nodeagent/nodeagent/internal/loopdev"
	"github.com/nodeagent/nodeagent/internal/testing/testenv"
	"github.com/nodeagent/nodeagent/internal/testing/testimage"
)

// A raw block volume (volumeMode: Block, a container's volumeDevices) on
// the stand-in host-path driver, real loop devices and real containerd,
// at kubelet's paths: the driver stages (a loop device over the volume's
// file) and publishes (the device bound on a file under
// plugins/kubernetes.io/csi/volumeDevices/publish/<PV>/<uid>), the agent
// binds it under volumeDevices/<PV>/dev/<uid> with a loop device over it
// (kubelet's descriptor lock), links it from the pod's volumeDevices
// directory and gives it to the container at devicePath. The writer pod
// writes to the device; /stats/summary and the kubelet_volume_stats_*
// gauges report the volume with its device's size as the driver gives
// it; after an agent SIGKILL and restart the running pod
// keeps its device, nothing is mapped again and no second loop device is
// made; the writer goes (unmapped, unpublished, unstaged: its loop
// devices detached); a new pod reads the data back; the agent is
// SIGKILLed again and the reader force-deleted while it is down, and the
// restarted agent tears the gone pod's map down from what is on disk.
// Nothing stays: no mount, no loop device over the agent's or the
// driver's files, no volumeDevices directory.
func TestCSIBlockVolume(t *testing.T) {
	t.Parallel()
	a, rt := readyPodAgent(t, "")
	ctx := context.Background()
	admin := a.env.Admin
	cp := deployCSIPlugin(t, a, rt, false)
	root, data, driver := cp.root, cp.data, cp.driver
	t.Cleanup(func() { detachLoopsUnder(t, root, data) })

	// The volume: an 8 MiB file in the driver's data directory (the test
	// plays the provisioner), a Block PV pre-bound to a Block claim.
	claim, pvName, handle := "blk-"+a.node, "pv-blk-"+a.node, "vol-blk-"+a.node
	if err := os.MkdirAll(filepath.Join(data, "volumes"), 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(data, "volumes", handle), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(filepath.Join(data, "volumes", handle), 8<<20); err != nil {
		t.Fatal(err)
	}
	blockClaim(t, a, driver, claim, pvName, handle)

	base := filepath.Join(root, "plugins/kubernetes.io/csi/volumeDevices")
	podYAMLBlock := func(name, cmd string) string {
		return podYAML(name, a.node, fmt.Sprintf(`  terminationGracePeriodSeconds: 1
  volumes:
  - name: data
    persistentVolumeClaim: {claimName: %[2]s}
  containers:
  - name: c
    image: %[1]s
    command: ["sh", "-c", %[3]q]
    volumeDevices: [{name: data, devicePath: /dev/xvda}]
`, testimage.Ref, claim, cmd))
	}
	writer := a.node + "-blk-writer"
	kubectl(t, a.env, podYAMLBlock(writer, "ls -l /dev/xvda; printf block-payload-42 > /dev/xvda && sync && echo written; sleep 3600"), "apply", "-f", "-")
	wp := a.waitPod(ctx, writer, 90*time.Second, "Running", running)
	if log := a.waitLog(wp, "c", 0, "written"); !strings.Contains(log, "brw") {
		t.Errorf("/dev/xvda is not a block device in the container:\n%s", log)
	}
	link := filepath.Join(root, "pods", string(wp.UID), "volumeDevices/kubernetes.io~csi", pvName)
	publish := filepath.Join(base, "publish", pvName, string(wp.UID))
	bind := filepath.Join(base, pvName, "dev", string(wp.UID))
	if target, err := os.Readlink(link); err != nil || target != publish {
		t.Errorf("the pod's symlink %s -> %q (%v), want kubelet's publish path %s", link, target, err, publish)
	}
	waitMount(t, publish, true)
	waitMount(t, bind, true)
	if _, err := os.Stat(filepath.Join(base, pvName, "data/vol_data.json")); err != nil {
		t.Errorf("kubelet's vol_data.json: %v", err)
	}
	if _, err := os.Stat(filepath.Join(base, "staging", pvName)); err != nil {
		t.Errorf("kubelet's staging path: %v", err)
	}
	if n := len(loopsOver(t, bind)); n != 1 {
		t.Errorf("%d loop devices over %s, want 1 (the descriptor lock)", n, bind)
	}
	// The driver's loop device: its backing file is named as the driver's
	// container sees it (/csi-data-dir/volumes/<handle>).
	if n := len(loopsMatching(t, driverFile(handle))); n != 1 {
		t.Errorf("%d loop devices over the volume's file, want the driver's 1: %v", n, loopBackings(t))
	}

	// Its stats, as kubelet reports a block volume's: the driver's
	// NodeGetVolumeStats for the pod's bind of the device gives its size
	// (the volume's 8 MiB) and nothing else; the claim's gauges follow.
	vs := podVolumeStats(t, a, wp, "data")
	if vs.PVCRef == nil || vs.PVCRef.Name != claim || vs.CapacityBytes == nil || *vs.CapacityBytes != 8<<20 ||
		vs.UsedBytes == nil || *vs.UsedBytes != 0 || vs.Inodes == nil || *vs.Inodes != 0 {
		b, _ := json.Marshal(vs)
		t.Errorf("block volume stats %s, want the pvcRef and a capacity of 8 MiB alone", b)
	}
	_, metrics := a.get("/metrics")
	for _, m := range []string{`capacity_bytes{namespace="default",persistentvolumeclaim=%q} 8.388608e+06`, `used_bytes{namespace="default",persistentvolumeclaim=%q} 0`} {
		if want := "kubelet_volume_stats_" + fmt.Sprintf(m, claim); !strings.Contains(metrics, want) {
			t.Errorf("/metrics has no %s", want)
		}
	}

	// SIGKILL and restart while the writer runs: the device stays, the
	// volume is neither published nor locked again.
	if code, _ := a.stop(syscall.SIGKILL); code == 0 {
		t.Errorf("agent exit code %d after SIGKILL", code)
	}
	a.start()
	a.waitReady(ctx, 30*time.Second)
	time.Sleep(3 * time.Second) // a few syncs of the writer
	if p := a.waitPod(ctx, writer, 10*time.Second, "still Running", running); p.Status.ContainerStatuses[0].RestartCount != 0 {
		t.Errorf("the writer restarted over the agent's restart: %+v", p.Status.ContainerStatuses[0])
	}
	waitMount(t, bind, true)
	if n := len(loopsOver(t, bind)); n != 1 {
		t.Errorf("%d loop devices over %s after the restart, want 1", n, bind)
	}
	if n := strings.Count(a.logOf(cp.pod, "driver", 0), "published block volume "+handle); n != 1 {
		t.Errorf("the volume was published %d times, want once:\n%s", n, a.logOf(cp.pod, "driver", 0))
	}

	// The writer goes: unmapped, unpublished and unstaged.
	if err := admin.CoreV1().Pods("default").Delete(ctx, writer, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	podsGone(t, a, writer)
	waitGone(t, link)
	waitGone(t, filepath.Join(base, pvName))
	waitGone(t, filepath.Join(base, "staging", pvName))
	waitGone(t, filepath.Join(base, "publish", pvName))
	noBlockLeftovers(t, root, data, handle)

	// A reader gets the data back through a new map.
	reader := a.node + "-blk-reader"
	kubectl(t, a.env, podYAMLBlock(reader, "echo read=$(head -c 16 /dev/xvda); sleep 3600"), "apply", "-f", "-")
	rp := a.waitPod(ctx, reader, 90*time.Second, "Running", running)
	a.waitLog(rp, "c", 0, "read=block-payload-42")
	rbind := filepath.Join(base, pvName, "dev", string(rp.UID))
	waitMount(t, rbind, true)

	// SIGKILL, the reader force-deleted while the agent is down: the
	// restarted agent reconstructs the map from the pod's symlink and the
	// volume's data and tears it down as an orphan's.
	if code, _ := a.stop(syscall.SIGKILL); code == 0 {
		t.Errorf("agent exit code %d after SIGKILL", code)
	}
	zero := int64(0)
	if err := admin.CoreV1().Pods("default").Delete(ctx, reader, metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
		t.Fatal(err)
	}
	a.start()
	a.waitReady(ctx, 30*time.Second)
	// The orphan's teardown waits for its container's stop first (up to
	// 10 s for the PLEG's event at a high load): more than waitGone's 20 s.
	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 60*time.Second, true, func(context.Context) (bool, error) {
		_, err := os.Lstat(filepath.Join(root, "pods", string(rp.UID)))
		return os.IsNotExist(err), nil
	}); err != nil {
		t.Errorf("the force-deleted reader's directory stays 60s after the agent's restart")
	}
	waitGone(t, filepath.Join(base, pvName))
	waitGone(t, filepath.Join(base, "staging", pvName))
	if !strings.Contains(a.out.String(), "reconstructed volume") {
		t.Errorf("the agent's log has no reconstructed volume")
	}
	noBlockLeftovers(t, root, data, handle)
}

// noBlockLeftovers: no mount under the agent's pods and CSI plugin
// directories, and no loop device over a file of the agent or the
// driver (whose volume file is handle).
func noBlockLeftovers(t *testing.T, root, data, handle string) {
	t.Helper()
	if left, err := testenv.MountsUnder(filepath.Join(root, "pods"), filepath.Join(root, "plugins", "kubernetes.io")); err != nil || len(left) > 0 {
		t.Errorf("mounts left: %v (%v)", left, err)
	}
	for _, dir := range []string{root, data} {
		if l := loopsUnder(t, dir); len(l) > 0 {
			t.Errorf("loop devices left over files under %s: %v", dir, l)
		}
	}
	if l := loopsMatching(t, driverFile(handle)); len(l) > 0 {
		t.Errorf("the driver's loop device stays: %v", l)
	}
}

// driverFile matches the backing file of the driver's loop device over
// volume handle, named as the driver's container sees it.
func driverFile(handle string) func(string) bool {
	return func(b string) bool { return strings.HasSuffix(b, "/volumes/"+handle) }
}

func loopsMatching(t *testing.T, match func(string) bool) []string {
	var out []string
	for dev, b := range loopBackings(t) {
		if match(b) {
			out = append(out, dev+"="+b)
		}
	}
	return out
}

// loopBackings maps each attached loop device to its backing file.
func loopBackings(t *testing.T) map[string]string {
	t.Helper()
	out := map[string]string{}
	devs, _ := filepath.Glob("/sys/block/loop*")
	for _, d := range devs {
		b, err := os.ReadFile(filepath.Join(d, "loop", "backing_file"))
		if err != nil {
			continue
		}
		out["/dev/"+filepath.Base(d)] = strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(string(b)), "(deleted)"))
	}
	return out
}

func loopsOver(t *testing.T, file string) []string {
	var out []string
	for dev, b := range loopBackings(t) {
		if b == file {
			out = append(out, dev)
		}
	}
	return out
}

func loopsUnder(t *testing.T, dir string) []string {
	var out []string
	for dev, b := range loopBackings(t) {
		if strings.HasPrefix(b, dir+"/") {
			out = append(out, dev+"="+b)
		}
	}
	return out
}

// detachLoopsUnder detaches what a failed test left (never what another
// test's files back).
func detachLoopsUnder(t *testing.T, dirs ...string) {
	for _, dir := range dirs {
		for _, l := range loopsUnder(t, dir) {
			file := strings.SplitN(l, "=", 2)[1]
			if err := loopdev.Detach(file); err != nil {
				t.Logf("cleanup: %v", err)
			} else {
				t.Logf("cleanup detached %s", l)
			}
		}
	}
}

// blockClaim makes a Block PV of driver pre-bound to the Block claim
// default/claim it makes too; both are deleted at the end.
func blockClaim(t *testing.T, a *agent, driver, claim, pvName, handle string) {
	t.Helper()
	csiClaimMode(t, a, driver, claim, pvName, handle, corev1.PersistentVolumeBlock, "8Mi")
}
